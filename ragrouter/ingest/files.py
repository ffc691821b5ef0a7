"""Documents as users have them: ``.txt``, ``.md``, ``.html``, ``.pdf`` and ``.docx`` files and folders.

:func:`expand` turns the command line's paths (files, folders read recursively, glob patterns)
into document files and questions files; :func:`read_document` reads one document file into a
:class:`~ragrouter.ingest.records.Document`, or says in one line why it cannot
(:class:`Unreadable`: a corrupt or encrypted PDF, a scanned PDF without a text layer, a text
file that is not UTF-8, an empty file).

Document id: the file's path as written from the current folder (``reports/2024/AAPL-Q1.pdf``);
a file outside the current folder gets the path below the folder named on the command line,
led by that folder's name (``reports/2024/AAPL-Q1.pdf`` for ``/data/reports``), or its bare
name when it was named itself. Title: the PDF's or .docx's metadata title, the HTML
``<title>`` (else its first ``<h1>``), the Markdown file's first heading; a metadata title that
looks like an identifier (an accession number, digits and dashes, a file name) gives way to
the document's first heading; else the file name without its suffix.

Reading order and tables: PDF text comes from PDFium (pypdf where PDFium cannot open the
file; :mod:`ragrouter.ingest.pdf`), a line per printed line — a table row included — with the
gaps between a row's columns written `` | ``. HTML and .docx table rows are written as one line each, cells joined
by `` | ``. Markdown is kept as written (its tables are already one row a line).

The readers' libraries (pypdfium2, pypdf, beautifulsoup4, markdown-it-py, python-docx) are imported when a
file of their format is read; where one is missing, :class:`MissingReader` names it and the
extra that installs it.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ragrouter.ingest import pdf
from ragrouter.ingest.questions import Catalog, load_questions
from ragrouter.ingest.records import Dataset, Document, LoaderError

DOCUMENT_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx")
QUESTION_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".jsonlines", ".json")
EXTRA = "pip install 'ragrouter[files]'"
_GLOB_CHARS = re.compile(r"[*?\[]")


class Unreadable(Exception):
    """One document file cannot be read: it is skipped, the rest load."""


class MissingReader(LoaderError):
    """The library that reads a format is not installed (stops the ingest: every such file fails)."""

    def __init__(self, path: Path, module: str, package: str, suffix: str):
        super().__init__(path, None, f"reading {suffix} files needs the {package} package, which is not "
                                     f"installed: {EXTRA}")


@dataclass
class Inputs:
    """What the command line's paths name."""

    documents: list[tuple[Path, str]] = field(default_factory=list)
    """(file, document id) in a stable order: the arguments in order, each folder sorted."""
    questions: list[Path] = field(default_factory=list)
    other: dict[str, int] = field(default_factory=dict)
    """Suffix → files inside folders that are neither documents nor questions files (not read)."""


def _is_hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def _under_cwd(path: Path) -> str | None:
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path(os.path.abspath(os.getcwd()))).as_posix()
    except ValueError:
        return None


def document_id(path: Path, folder: Path | None = None) -> str:
    """The id of document file ``path`` found in ``folder`` (None: named on the command line)."""
    rel = _under_cwd(path)
    if rel is not None:
        return rel
    if folder is None:
        return path.name
    name = Path(os.path.abspath(folder)).name
    inner = Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(folder))).as_posix()
    return f"{name}/{inner}" if name else inner


def expand(paths: list[Path]) -> Inputs:
    """Files, folders (recursively, hidden files and folders left out) and glob patterns →
    document files with their ids and questions files; a path naming nothing, a file of a format
    not read, or two files with one id raise :class:`LoaderError`."""
    out = Inputs()
    seen: dict[str, str] = {}  # absolute path -> id
    ids: dict[str, Path] = {}

    def add(file: Path, folder: Path | None) -> None:
        key = os.path.abspath(file)
        if key in seen:
            return
        did = document_id(file, folder)
        if did in ids:
            raise LoaderError(file, None, f"has the same document id {did!r} as {ids[did]} (give the folders "
                                          "from a common parent folder, or rename one)")
        seen[key] = did
        ids[did] = file
        out.documents.append((file, did))

    def add_file(file: Path) -> None:
        suffix = file.suffix.lower()
        if suffix in DOCUMENT_SUFFIXES:
            add(file, None)
        elif suffix in QUESTION_SUFFIXES:
            if file not in out.questions:
                out.questions.append(file)
        else:
            raise LoaderError(file, None, f"not a format --format files reads (documents: "
                                          f"{' '.join(DOCUMENT_SUFFIXES)}; questions: {' '.join(QUESTION_SUFFIXES)})")

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and not _is_hidden(p.relative_to(path)))
            found = 0
            for file in files:
                suffix = file.suffix.lower()
                if suffix in DOCUMENT_SUFFIXES:
                    add(file, path)
                    found += 1
                else:  # a questions file inside a folder is read only when named
                    out.other[suffix or "(no suffix)"] = out.other.get(suffix or "(no suffix)", 0) + 1
            if not found:
                raise LoaderError(path, None, f"no documents ({' '.join(DOCUMENT_SUFFIXES)}) in this folder")
        elif path.is_file():
            add_file(path)
        elif _GLOB_CHARS.search(str(path)):
            matches = sorted(Path(m) for m in glob.glob(str(path), recursive=True))
            files = [m for m in matches if m.is_file() and m.suffix.lower() in DOCUMENT_SUFFIXES + QUESTION_SUFFIXES]
            if not files:
                raise LoaderError(path, None, "the pattern matches no document or questions file")
            for file in files:
                add_file(file)
        elif path.exists():
            raise LoaderError(path, None, "not a regular file or folder")
        else:
            raise LoaderError(path, None, "no such file or folder")
    return out


# --------------------------------------------------------------------------- readers

_BLANK_RUNS = re.compile(r"\n{3,}")


def _clean(text: str, strip_lines: bool = True) -> str:
    """What the stores can hold (no NUL, no lone surrogate), lines stripped (else only at their
    end), runs of blank lines cut to one."""
    text = text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates from broken fonts
    lines = [line.strip() if strip_lines else line.rstrip() for line in text.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _import(module: str, package: str, path: Path):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingReader(path, module, package, path.suffix.lower()) from None


def _decode(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise Unreadable(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, line {line}); "
                         "save it as UTF-8") from None


def read_text(path: Path) -> tuple[str, str, dict]:
    return path.stem, _decode(path), {}


def read_markdown(path: Path) -> tuple[str, str, dict]:
    """The Markdown source as written; title: its first level-1 heading, else its first heading."""
    markdown_it = _import("markdown_it", "markdown-it-py", path)
    source = _decode(path)
    tokens = markdown_it.MarkdownIt("commonmark").parse(source)
    headings = [(tok.tag, tokens[i + 1].content) for i, tok in enumerate(tokens[:-1]) if tok.type == "heading_open"]
    title = next((t for tag, t in headings if tag == "h1"), headings[0][1] if headings else "")
    return title.strip() or path.stem, source, {}


_BLOCKS = ("p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
           "header", "footer", "pre", "blockquote", "dt", "dd", "table", "caption", "figure", "figcaption",
           "hr", "main", "nav", "aside", "form", "address")


MAX_HTML_BYTES = 32 * 2**20
"""An HTML file larger than this is skipped (its parse tree would take gigabytes)."""
MAX_HTML_DEPTH = 200
"""An HTML file whose elements nest deeper than this is skipped (real pages nest a few dozen
deep; a parser's time and memory grow with the depth)."""
MAX_DOCX_BYTES = 256 * 2**20
"""A .docx whose parts unpack to more than this is skipped (a zip bomb unpacks to gigabytes)."""
MAX_DOCX_XML_BYTES = 64 * 2**20
"""… or whose XML parts unpack to more than this (their parse trees take several times it)."""


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n / 1024:,.0f} KiB"


def _html_depth(path: Path, data: bytes, limit: int) -> int:
    """The deepest nesting of ``data``'s elements, by libxml2's HTML parser (C, implied end tags
    as browsers imply them), stopping once past ``limit``."""
    import io

    etree = _import("lxml.etree", "lxml", path)
    depth = deepest = 0
    try:
        for event, element in etree.iterparse(io.BytesIO(data), events=("start", "end"), html=True, recover=True,
                                              huge_tree=False):
            if event == "start":
                depth += 1
                if depth > deepest:
                    deepest = depth
                    if deepest > limit:
                        break
            else:
                depth -= 1
                element.clear()
    except etree.LxmlError:
        pass  # what libxml2 could not read, html.parser reads below
    return deepest


def read_html(path: Path) -> tuple[str, str, dict]:
    """Visible text, a line per block and per table row (cells joined by `` | ``); scripts,
    styles and the head left out. Title: ``<title>``, else (missing, or an identifier) the
    first ``<h1>``. A file over :data:`MAX_HTML_BYTES` or nested deeper than
    :data:`MAX_HTML_DEPTH` is :class:`Unreadable` (checked before the parse, in seconds)."""
    bs4 = _import("bs4", "beautifulsoup4", path)
    size = path.stat().st_size
    if size > MAX_HTML_BYTES:
        raise Unreadable(f"{_mib(size)} of HTML, over the {_mib(MAX_HTML_BYTES)} limit of an HTML document; "
                         "split it or save its text")
    text = _decode(path)
    depth = _html_depth(path, text.encode("utf-8"), MAX_HTML_DEPTH)
    if depth > MAX_HTML_DEPTH:
        raise Unreadable(f"its HTML elements nest more than {MAX_HTML_DEPTH} deep (a damaged or generated page); "
                         "save its text")
    soup = bs4.BeautifulSoup(text, "html.parser")
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag else ""
    if pdf.looks_like_identifier(title, path):
        h1 = soup.find("h1")
        title = h1.get_text(" ", strip=True) if h1 else ""
    for tag in soup(["script", "style", "noscript", "template", "head", "svg"]):
        tag.decompose()
    for row in soup.find_all("tr"):
        cells = [c.get_text(" ", strip=True) for c in row.find_all(["td", "th"])]
        row.replace_with(soup.new_string("\n" + " | ".join(cells) + "\n"))
    for tag in soup.find_all(_BLOCKS):
        tag.insert_after(soup.new_string("\n"))
    text = "\n".join(" ".join(line.split()) for line in soup.get_text("").split("\n"))
    return title or path.stem, text, {}


def _docx_size(path: Path) -> None:
    """:class:`Unreadable` when the .docx's parts unpack to more than the limits (read from the
    archive's directory, nothing unpacked; a part that unpacks past its stated size fails its
    check when read)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise Unreadable(f"not a readable .docx file ({type(exc).__name__}: {_short(exc)})") from None
    total = sum(i.file_size for i in infos)
    xml = sum(i.file_size for i in infos if i.filename.lower().endswith((".xml", ".rels")))
    if total > MAX_DOCX_BYTES or xml > MAX_DOCX_XML_BYTES:
        raise Unreadable(f"its parts unpack to {_mib(total)} ({_mib(xml)} of XML) from {_mib(path.stat().st_size)}, "
                         f"over the limits of a .docx ({_mib(MAX_DOCX_BYTES)}, {_mib(MAX_DOCX_XML_BYTES)} of XML): "
                         "a zip bomb or a damaged file; not unpacked")


def read_docx(path: Path) -> tuple[str, str, dict]:
    """Paragraphs and tables in document order, a line per table row (cells joined by `` | ``,
    a merged cell once). Title: the document's core-properties title, else (missing, or an
    identifier) its first heading. A file whose parts unpack past :data:`MAX_DOCX_BYTES` (or
    :data:`MAX_DOCX_XML_BYTES` of XML) is :class:`Unreadable`, refused before it is unpacked."""
    docx = _import("docx", "python-docx", path)
    _docx_size(path)
    try:
        doc = docx.Document(str(path))
    except Exception as exc:  # python-docx raises zipfile, lxml and its own errors alike
        raise Unreadable(f"not a readable .docx file ({type(exc).__name__}: {_short(exc)})") from None
    lines = []
    heading = ""
    for block in doc.iter_inner_content():
        if hasattr(block, "rows"):
            for row in block.rows:
                cells: list[str] = []
                for cell in row.cells:
                    text = " ".join(cell.text.split())
                    if not cells or cells[-1] != text:
                        cells.append(text)
                lines.append(" | ".join(cells))
            lines.append("")
        else:
            lines.append(block.text)
            style = (getattr(block.style, "name", "") or "") if block.style is not None else ""
            if not heading and block.text.strip() and style.lower().startswith(("title", "heading")):
                heading = " ".join(block.text.split())[:300]
    title = (doc.core_properties.title or "").strip()
    if pdf.looks_like_identifier(title, path):
        title = heading
    return title or path.stem, "\n".join(lines), {}


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160] or "no detail"


def read_pdf(path: Path) -> tuple[str, str, dict]:
    """The text of every page, a line per printed line with a table row's cells joined by
    `` | `` (pages joined by a blank line), by PDFium, else pypdf (:mod:`ragrouter.ingest.pdf`).
    A PDF none of whose pages has text is a scan (:class:`Unreadable`); the pages without text
    of one that has some are counted in the meta (``pages_without_text``). Title: the metadata
    title, else (missing, or an identifier such as an accession number) the first heading."""
    _import("pypdfium2", "pypdfium2", path)
    try:
        title, pages, meta = pdf.read(path)
    except pdf.PdfUnreadable as why:
        raise Unreadable(str(why)) from None
    if not pages:
        raise Unreadable("not a readable PDF (no pages)")
    texts = [_clean(p) for p in pages]
    empty = sum(not t for t in texts)
    if empty == len(texts):
        raise Unreadable(f"no text layer on any of its {len(texts)} pages (a scanned PDF?); run OCR on it "
                         "first (e.g. ocrmypdf) and ingest the result")
    meta = {"pages": len(texts), **meta}
    if empty:
        meta["pages_without_text"] = empty
    return title.strip() or path.stem, "\n\n".join(t for t in texts if t), meta


READERS = {
    ".txt": read_text, ".md": read_markdown, ".markdown": read_markdown, ".html": read_html,
    ".htm": read_html, ".pdf": read_pdf, ".docx": read_docx,
}


def read_document(path: Path, did: str) -> Document:
    """One document file as a Document; :class:`Unreadable` says why not (skip it),
    :class:`MissingReader` that its format's library is not installed (stop)."""
    suffix = path.suffix.lower()
    try:
        title, text, meta = READERS[suffix](path)
    except OSError as exc:
        raise Unreadable(f"cannot be read ({exc.strerror or exc})") from None
    text = _clean(text, strip_lines=False)
    if not text.strip():
        raise Unreadable("holds no text")
    title = " ".join(_clean(title).split())[:500]
    return Document(did, title, text, {"format": suffix.lstrip("."), "bytes": path.stat().st_size,
                                       **meta})


# --------------------------------------------------------------------------- the whole ingest


@dataclass
class Loaded:
    """What :func:`load_files` read."""

    dataset: Dataset
    skipped: list[tuple[str, str]]
    """(document id, why) of the document files that could not be read."""
    dropped_questions: dict[str, list[str]]
    """Skipped document id → the questions dropped because a source named only it."""
    columns: list = field(default_factory=list)
    """Per questions file, the columns it was read with (:class:`~ragrouter.ingest.questions.Columns`)."""


def load_files(inputs: Inputs, mapping: dict[str, str] | None = None, type_map: dict[str, str] | None = None,
               stored_ids: list[str] | None = None) -> Loaded:
    """Read every document of ``inputs`` (skipping the unreadable ones) and its questions files,
    whose sources may name these documents or ``stored_ids`` (the corpus's documents already in
    the store). Documents were named but none could be read: one :class:`LoaderError` naming them."""
    documents, skipped = [], []
    for path, did in inputs.documents:
        try:
            documents.append(read_document(path, did))
        except Unreadable as why:
            skipped.append((did, str(why)))
    if inputs.documents and not documents:
        shown = "; ".join(f"{did}: {why}" for did, why in skipped[:3])
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        raise LoaderError(", ".join(did for did, _ in skipped[:3]) + (", …" if len(skipped) > 3 else ""), None,
                          f"none of the {len(skipped)} document files could be read ({shown}{more}); "
                          "nothing was stored")
    catalog = Catalog([d.external_id for d in documents] + list(stored_ids or []), [did for did, _ in skipped])
    loaded = load_questions(inputs.questions, catalog, mapping, type_map)
    dropped = {}
    if skipped:
        dropped["unreadable_file"] = len(skipped)
    if loaded.dropped:
        dropped["source_unreadable"] = len({q for qs in loaded.dropped.values() for q in qs})
    return Loaded(Dataset(documents, loaded.questions, dropped), skipped, loaded.dropped, loaded.columns)


def load(paths: list[Path]) -> Dataset:
    """``--format files`` with the default column mapping and no store (the loader registry's form)."""
    return load_files(expand(paths)).dataset
