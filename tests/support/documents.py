"""Documents as other tools write them, for the ingest tests and benchmarks/bench_ingest.py.

* :func:`filing_pdf`: a quarterly filing by ReportLab (a heading, paragraphs and a table on
  every page), its metadata title an accession number, as filings' often is;
* :func:`big_array_pdf`: a hand-written PDF whose catalog holds an array of more than pypdf's
  100,000 elements (a tagged filing's structure tree holds such arrays);
* :func:`encrypt`: a copy encrypted by qpdf (pikepdf), AES-256, with an empty or a real user
  password;
* :func:`docx_bomb`: a .docx whose ``word/document.xml`` unpacks to 4 GiB from about 4 MiB (a
  raw deflate block, full-flushed, repeated: what a zip bomb is);
* :func:`nested_html`: 5 MB of elements nested 500,000 deep.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

SEGMENTS = ("Cloud", "Devices", "Services", "Licensing", "Hardware", "Consulting", "Advertising", "Payments")


def table_rows(seed: int, page: int, years: int = 2, regions: int = 1) -> list[tuple[str, ...]]:
    """The segments table of a page: a row per segment (and region), a column per year."""
    head = ("Segment",) + tuple(f"Q{page % 4 + 1} {2020 + seed % 5 - y}" for y in range(years))
    rows = [head]
    names = [f"{n} {r + 1}" if regions > 1 else n for r in range(regions) for n in SEGMENTS[: 4 + (seed + page) % 4]]
    for k, name in enumerate(names):
        a = 1000 + (seed * 7919 + page * 104729 + k * 1299709) % 90000
        rows.append((name,) + tuple(f"{a * (10 - y) // 10:,}" for y in range(years)))
    return rows


def filing_pdf(path: Path, company: str, seed: int = 0, pages: int = 6,
               title: str | None = "0000320193-24-000123", paragraphs: int = 4, years: int = 2,
               regions: int = 1) -> Path:
    """A multi-page filing by ReportLab: a heading, ``paragraphs`` paragraphs and a table of
    :func:`table_rows` per page."""
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table

    styles = getSampleStyleSheet()
    story = [Paragraph(f"{company} Quarterly Report", styles["Title"])]
    for page in range(pages):
        story.append(Paragraph(f"Part {page + 1}: results by segment", styles["Heading2"]))
        for k in range(paragraphs):
            story.append(Paragraph(
                f"{company} reported that revenue in part {page + 1} grew in {SEGMENTS[(seed + k) % 8].lower()} "
                f"while costs of {SEGMENTS[(seed + page + k) % 8].lower()} stayed flat; management expects the "
                f"trend of paragraph {k + 1} to hold through the next quarter, subject to the risks described "
                "in the annual report and the seasonal demand of the holiday quarter.", styles["Normal"]))
        story.append(Spacer(1, 10))
        story.append(Table([list(r) for r in table_rows(seed, page, years, regions)]))
        story.append(PageBreak())
    doc = SimpleDocTemplate(str(path), pagesize=letter, title=title or "", author=company)
    doc.build(story)
    return path


def big_array_pdf(path: Path, elements: int = 150_000, text: str = "Quarterly filing of ACME Corp") -> Path:
    """A one-page PDF written by hand whose catalog holds an array of ``elements`` integers."""
    content = b"BT /F1 12 Tf 72 720 Td (" + text.encode("latin-1") + b") Tj ET"
    big = b"[" + b" ".join(b"%d" % i for i in range(elements)) + b"]"
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R /PieceInfo << /Filing << /Private " + big + b" >> >> >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def encrypt(src: Path, dst: Path, user: str = "", owner: str = "owner-secret") -> Path:
    """``src`` encrypted by qpdf (AES-256) with user password ``user`` (empty: opens without one)."""
    import pikepdf

    with pikepdf.open(src) as pdf:
        pdf.save(dst, encryption=pikepdf.Encryption(owner=owner, user=user, R=6))
    return dst


def _deflate(data: bytes, mode: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(mode)


def docx_bomb(path: Path, base_docx: Path, gib: float = 4.0) -> int:
    """A copy of ``base_docx`` whose document part unpacks to about ``gib`` GiB (declared
    honestly in the archive); returns that size."""
    unit = b"<w:p><w:r><w:t>" + b"a" * 2**20 + b"</w:t></w:r></w:p>"
    head = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w='
            b'"http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>')
    tail = b"</w:body></w:document>"
    reps = min(int(gib * 2**30 / len(unit)), (2**32 - 1 - len(head) - len(tail)) // len(unit))
    pre, block, post = _deflate(head, zlib.Z_FULL_FLUSH), _deflate(unit, zlib.Z_FULL_FLUSH), _deflate(tail, zlib.Z_FINISH)
    crc = zlib.crc32(head)
    for _ in range(reps):
        crc = zlib.crc32(unit, crc)
    crc = zlib.crc32(tail, crc) & 0xFFFFFFFF
    size = len(head) + reps * len(unit) + len(tail)
    with zipfile.ZipFile(base_docx) as z:
        members = [(i.filename, None if i.filename == "word/document.xml" else z.read(i.filename)) for i in z.infolist()]
    central = []
    with open(path, "wb") as out:
        for name, raw in members:
            offset, nb = out.tell(), name.encode()
            if raw is None:
                csize, c32, usize = len(pre) + len(block) * reps + len(post), crc, size
            else:
                comp = _deflate(raw, zlib.Z_FINISH)
                csize, c32, usize = len(comp), zlib.crc32(raw) & 0xFFFFFFFF, len(raw)
            out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, c32, csize, usize, len(nb), 0) + nb)
            if raw is None:
                out.write(pre)
                for _ in range(reps):
                    out.write(block)
                out.write(post)
            else:
                out.write(comp)
            central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, c32, csize, usize,
                                       len(nb), 0, 0, 0, 0, 0, offset) + nb)
        start = out.tell()
        for entry in central:
            out.write(entry)
        out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), out.tell() - start, start, 0))
    return size


def nested_html(path: Path, depth: int = 500_000) -> Path:
    """A page whose ``<div>`` elements nest ``depth`` deep (5.5 MB at the default)."""
    path.write_text("<html><head><title>Deep</title></head><body>" + "<div>" * depth + "deep text"
                    + "</div>" * depth + "</body></html>")
    return path
