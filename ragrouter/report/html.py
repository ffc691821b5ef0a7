"""``report.html``: the Markdown report as one self-contained HTML page, viewable offline.

A small converter for exactly the Markdown that :mod:`ragrouter.report.build` writes (headings,
paragraphs, block quotes, bullet lists, GitHub tables, ``**bold**``, ``_italic_``, ``code``,
links and images). Every image is inlined as a ``data:`` URI (PNG), so the file needs nothing
beside it; links to the CSV and SVG files stay relative.

Read in a browser (``benchmarks/report_screenshot.sh`` shows it as headless Chromium renders
it): a contents list of the sections at the top; every figure drawn at one scale — its PNG's
size at its dpi as CSS inches (a small figure is not blown up, its fonts match the others'),
at most the page width; in table cells the 95 % intervals ``[lo, hi]``, ``mean ± std`` and
hyphenated names (``local-qwen-1.5b/judge-v2``) do not break inside; a table of more than
:data:`WIDE_COLUMNS` columns is set smaller, and one of more than :data:`VERY_WIDE_COLUMNS`
may break them to fit the page.
"""

from __future__ import annotations

import base64
import html as _html
import re
from pathlib import Path

_IMG = re.compile(r"!\[([^\]]*)\]\(([^)]+)\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_ITAL = re.compile(r"(?<![\w*])_([^_]+)_(?![\w*])")
_INTERVAL = re.compile(r"\[(-?[\d.,]+[kM]?, -?[\d.,]+[kM]?)\]")
_PLUS_MINUS = re.compile(r"(-?[\d.,]+ ± [\d.,]+)")
_NAME = re.compile(r"(?<![\w./-])([A-Za-z][\w.]*(?:[-/][\w.]+)+)(?![\w/-])")  # local-qwen-1.5b/judge-v2
CSS_DPI = 96.0  # CSS pixels per inch
WIDE_COLUMNS = 12  # a table with more columns gets a smaller font …
VERY_WIDE_COLUMNS = 16  # … and one with more than this may break its intervals and names to fit

STYLE = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1320px;
       padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.85em; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 3px 7px; }
th { background: #f3f3f3; }
td.r, th.r { text-align: right; }
blockquote { border-left: 4px solid #e0a800; background: #fff8e1; margin: 0.6em 0; padding: 0.3em 0.8em; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
code { background: #f5f5f5; padding: 0 3px; }
.nw { white-space: nowrap; }
table.wide { font-size: 0.75em; }
table.vwide .nw { white-space: normal; }
nav.toc { background: #f8f8f8; border: 1px solid #e4e4e4; padding: 0.3em 1em; margin: 1em 0; }
nav.toc ul { columns: 3; margin: 0.3em 0; }
"""


def _inline(text: str, base: Path, cell: bool = False) -> str:
    parts: list[str] = []
    pos = 0
    for m in _IMG.finditer(text):
        parts.append(_fmt(text[pos:m.start()], cell))
        alt, src = m.group(1), m.group(2)
        path = base / src
        if path.is_file() and path.suffix.lower() == ".png":
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            width = _css_width(path)
            size = f' style="width: {width}px"' if width else ""
            parts.append(f'<img alt="{_html.escape(alt)}"{size} src="data:image/png;base64,{data}">')
        else:
            parts.append(f'<img alt="{_html.escape(alt)}" src="{_html.escape(src)}">')
        pos = m.end()
    parts.append(_fmt(text[pos:], cell))
    return "".join(parts)


def _css_width(path: Path) -> int | None:
    """The PNG's width in CSS pixels at its dpi (``None`` when it says no dpi)."""
    try:
        from PIL import Image

        with Image.open(path) as img:
            dpi = img.info.get("dpi")
            width = img.size[0]
    except Exception:  # noqa: BLE001 - not readable as an image: let the browser size it
        return None
    if not dpi or not dpi[0]:
        return None
    return round(width * CSS_DPI / float(dpi[0]))


def _slug(text: str, seen: dict[str, int]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", re.sub(r"<[^>]+>", "", text).lower()).strip("-") or "section"
    seen[base] = seen.get(base, 0) + 1
    return base if seen[base] == 1 else f"{base}-{seen[base]}"


def _fmt(text: str, cell: bool = False) -> str:
    """Inline Markdown → HTML; in a table ``cell`` also keep ``a ± b`` and hyphenated names
    (models, corpora) on one line."""
    codes: list[str] = []

    def keep(m):
        codes.append(f"<code>{_html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    t = _CODE.sub(keep, text)
    t = _html.escape(t, quote=False)
    t = _LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', t)
    t = _INTERVAL.sub(r'<span class="nw">[\1]</span>', t)
    if cell and "<a " not in t:
        t = _PLUS_MINUS.sub(r'<span class="nw">\1</span>', t)
        t = _NAME.sub(r'<span class="nw">\1</span>', t)
    t = _BOLD.sub(r"<strong>\1</strong>", t)
    t = _ITAL.sub(r"<em>\1</em>", t)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], t)


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def to_html(md: str, base: Path, title: str = "ragrouter report") -> str:
    """The HTML page of ``md``; images under ``base`` are inlined."""
    lines = md.splitlines()
    out = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_html.escape(title)}</title>"
           f"<style>{STYLE}</style></head><body>"]
    i = 0
    para: list[str] = []
    sections: list[tuple[str, str]] = []  # (id, heading html) of every h2, for the contents
    seen: dict[str, int] = {}
    toc_at: int | None = None

    def flush():
        if para:
            out.append("<p>" + _inline(" ".join(para), base) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            flush()
            i += 1
            continue
        m = re.match(r"^(#{1,6})\s+(.*)$", line)
        if m:
            flush()
            n = len(m.group(1))
            head = _inline(m.group(2), base)
            anchor = _slug(head, seen)
            if n == 2:
                sections.append((anchor, head))
                if toc_at is None:
                    toc_at = len(out)
            out.append(f'<h{n} id="{anchor}">{head}</h{n}>')
            i += 1
            continue
        if line.startswith("| ") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$", lines[i + 1]):
            flush()
            header = _cells(line)
            align = ["r" if c.strip().endswith(":") else "l" for c in _cells(lines[i + 1])]
            wide = (' class="wide vwide"' if len(header) > VERY_WIDE_COLUMNS
                    else ' class="wide"' if len(header) > WIDE_COLUMNS else "")
            out.append(f"<table{wide}><thead><tr>" + "".join(f'<th class="{a}">{_inline(h, base)}</th>'
                                                     for h, a in zip(header, align)) + "</tr></thead><tbody>")
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                out.append("<tr>" + "".join(f'<td class="{a}">{_inline(c, base, cell=True)}</td>'
                                            for c, a in zip(_cells(lines[i]), align)) + "</tr>")
                i += 1
            out.append("</tbody></table>")
            continue
        if line.startswith(">"):
            flush()
            quote = []
            while i < len(lines) and lines[i].startswith(">"):
                quote.append(lines[i][1:].strip())
                i += 1
            out.append("<blockquote>" + "<br>".join(_inline(q, base) for q in quote if q) + "</blockquote>")
            continue
        if line.startswith("- "):
            flush()
            out.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                out.append(f"<li>{_inline(lines[i][2:], base)}</li>")
                i += 1
            out.append("</ul>")
            continue
        para.append(line.strip())
        i += 1
    flush()
    if len(sections) > 1:  # the contents, before the first section
        out.insert(toc_at, '<nav class="toc"><strong>Contents</strong><ul>'
                   + "".join(f'<li><a href="#{a}">{h}</a></li>' for a, h in sections) + "</ul></nav>")
    out.append("</body></html>")
    return "\n".join(out)


def write_html(md: str, base: Path, path: Path) -> Path:
    """Write ``to_html(md, base)`` to ``path``."""
    path = Path(path)
    path.write_text(to_html(md, Path(base)), encoding="utf-8")
    return path
