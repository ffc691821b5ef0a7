"""PDF text for ``ingest --format files``: PDFium first (``pypdfium2``), pypdf as the fallback.

Why two readers (``benchmarks/docs/ingest.md`` measures them): PDFium, the C++ reader of
Chromium, read the generated multi-page filings with tables many times faster than pypdf's
layout mode, and it opens files that pypdf's safety limits refuse (an array of more than
100,000 elements, as a tagged filing's structure tree holds, raised pypdf's
``LimitReachedError`` on open). pypdf reads a file PDFium cannot open, with its limits raised
for the local file (:data:`PYPDF_LIMITS`).

Layout: PDFium gives the page's text as runs (a run: characters of one text object on one
line) with their boxes, in the order the file draws them. Runs follow each other on a line
unless the next one starts lower or left of the last; a horizontal gap of at least
:data:`CELL_GAP` × the run's height between two runs of one line (a table's columns) becomes
`` | ``, a smaller one a space. So a table row stays on one line with its cells in order, as
pypdf's layout mode kept it; a two-column page keeps its columns apart where the file draws
them column by column.

Titles: the metadata title, unless it looks like an identifier (:func:`looks_like_identifier`:
an accession number such as ``0000320193-24-000123``, digits and dashes, a file name); then the
first page's first heading (the first line set in the page's largest font, when that is larger
than the body text), else the file name.
"""

from __future__ import annotations

import logging
import re
import statistics
import warnings
from pathlib import Path

CELL_GAP = 0.8
"""A gap between two runs of one line of at least this × the line's height is a column gap."""

PYPDF_LIMITS = {"array_maximum_element_count": 10_000_000, "dictionary_maximum_element_count": 10_000_000,
                "stream_parsing_work_maximum_count": 200_000_000, "page_tree_maximum_entries": 10_000_000}
"""pypdf's limits, raised for the user's own files (its defaults guard servers against hostile
uploads: 100,000 array elements, 2,000,000 content-stream tokens)."""

_HEADING_LINES = 3


class PdfUnreadable(Exception):
    """The PDF cannot be read (the message says why, in words)."""


def looks_like_identifier(title: str, path: Path | None = None) -> bool:
    """A metadata title that names the file rather than the document: empty, only digits and
    punctuation (``0000320193-24-000123``, ``2024-03-31``), a file name (``q1.pdf``,
    ``Microsoft Word - q1.docx``), the file's own name, or one token of letters, digits and
    separators with a digit in it (``ACME_10Q_2024``)."""
    t = " ".join(str(title or "").split())
    if not t or not re.search(r"[^\W\d_]", t):
        return True
    low = t.lower()
    if path is not None and low in (path.stem.lower(), path.name.lower()):
        return True
    if re.fullmatch(r"(?:microsoft \w+ - )?\S.*\.(?:pdf|docx?|html?|txt|md|rtf|xlsx?|pptx?|indd|tex|ps)", low):
        return True
    if low in ("untitled", "document", "title", "no title") or re.fullmatch(r"(document|untitled)\s*\d*", low):
        return True
    return " " not in t and bool(re.search(r"\d", t)) and bool(re.search(r"[-_./]", t))


def _lines(textpage) -> list[tuple[str, float, int]]:
    """(text, height, first run index) of each line of a PDFium text page (see the module doc)."""
    lines: list[tuple[str, float, int]] = []
    cur: list[str] = []
    height, start, last = 0.0, 0, None
    for i in range(textpage.count_rects()):
        box = textpage.get_rect(i)
        left, bottom, right, top = box
        text = " ".join(textpage.get_text_bounded(*box).split())
        if not text:
            continue
        h = max(top - bottom, 0.1)
        if last is not None:
            l_left, l_bottom, l_right, l_top = last
            overlap = min(top, l_top) - max(bottom, l_bottom)
            same = overlap >= 0.5 * min(h, l_top - l_bottom) and left >= l_right - 0.5 * h
            if same:
                cur.append(" | " if left - l_right >= CELL_GAP * max(h, l_top - l_bottom) else " ")
                cur.append(text)
                height = max(height, h)
                last = box
                continue
            lines.append(("".join(cur), height, start))
        cur, height, start, last = [text], h, i, box
    if cur:
        lines.append(("".join(cur), height, start))
    return lines


def _font_size(textpage, raw, box) -> float:
    left, bottom, right, top = box
    idx = textpage.get_index((left + min(right, left + 4)) / 2, (bottom + top) / 2, 2, 2)
    size = raw.FPDFText_GetFontSize(textpage.raw, idx) if idx is not None and idx >= 0 else 0.0
    return float(size or (top - bottom))


def _heading(textpage, raw, lines: list[tuple[str, float, int]]) -> str:
    """The first line set in the page's largest font (with the next lines of that size), when
    larger than the body text; else ``""``."""
    if not lines:
        return ""
    sizes = [round(_font_size(textpage, raw, textpage.get_rect(i)), 1) for _t, _h, i in lines]
    body = statistics.median(sizes)
    top = max(sizes)
    if top > body * 1.15:
        k = sizes.index(top)
        parts = [lines[k][0]]
        for j in range(k + 1, min(len(lines), k + _HEADING_LINES)):
            if sizes[j] != top:
                break
            parts.append(lines[j][0])
        return " ".join(parts)[:300]
    return ""


def read_pdfium(path: Path) -> tuple[str, list[str], str]:
    """(metadata title, text of each page, first heading) by PDFium."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    try:
        doc = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) == raw.FPDF_ERR_PASSWORD:
            raise PdfUnreadable("the PDF is encrypted with a password; save an unprotected copy") from None
        raise
    try:
        title = str(doc.get_metadata_value("Title") or "")
        pages, heading = [], ""
        for n in range(len(doc)):
            page = doc[n]
            try:
                textpage = page.get_textpage()
                try:
                    lines = _lines(textpage)
                    if n == 0 or (not heading and not any(pages)):
                        heading = _heading(textpage, raw, lines)
                finally:
                    textpage.close()
            finally:
                page.close()
            pages.append("\n".join(t for t, _h, _i in lines))
        return title, pages, heading
    finally:
        doc.close()


_COLUMN_GAP = re.compile(r"(?<=\S) {3,}(?=\S)")


def read_pypdf(path: Path) -> tuple[str, list[str], str]:
    """(metadata title, text of each page, no heading: pypdf gives no font sizes) by pypdf's layout mode, its limits raised
    (:data:`PYPDF_LIMITS`); a column gap of three or more spaces becomes `` | ``."""
    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its repair notes are not the user's business
    with warnings.catch_warnings(), pypdf.apply_configuration(**PYPDF_LIMITS):
        warnings.simplefilter("ignore")
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise PdfUnreadable("the PDF is encrypted with a password; save an unprotected copy")
        pages = []
        for page in reader.pages:
            text = page.extract_text(extraction_mode="layout") or ""
            pages.append("\n".join(_COLUMN_GAP.sub(" | ", line.strip()) for line in text.splitlines()))
        title = (reader.metadata.title if reader.metadata else None) or ""
    return str(title), pages, ""


READERS = {"pdfium": read_pdfium, "pypdf": read_pypdf}
"""The PDF readers by name, fastest first (:func:`read` tries them in this order)."""


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160] or "no detail"


def read(path: Path, readers: tuple[str, ...] = ("pdfium", "pypdf")) -> tuple[str, list[str], dict]:
    """(title, text of each page, meta) of the PDF at ``path``: the first of ``readers`` that
    opens it (the meta's ``reader`` names it). :class:`PdfUnreadable` when none can: the PDF
    is encrypted with a password, or damaged (the first reader's error)."""
    errors = []
    for name in readers:
        try:
            title, pages, heading = READERS[name](path)
        except PdfUnreadable:
            raise
        except ImportError as exc:  # a fallback that is not installed: the first reader's error stands
            errors.append(f"{name} not installed ({exc.name})")
            continue
        except Exception as exc:  # noqa: BLE001 - the readers raise many types on a damaged file
            errors.append(f"{type(exc).__name__}: {_short(exc)}")
            continue
        meta = {"reader": name}
        if looks_like_identifier(title, path):
            if title.strip():
                meta["metadata_title"] = " ".join(title.split())[:300]
            title = heading
        return title, pages, meta
    raise PdfUnreadable(f"not a readable PDF ({errors[0] if errors else 'no reader'})")
