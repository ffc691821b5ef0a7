"""PDFs as filings come (ReportLab's tables, an array over pypdf's safety limit, qpdf's
encryption), titles that are identifiers, and archives and markup that would take the machine:
read with PDFium, else pypdf with its limits raised; a .docx zip bomb and deeply nested HTML
skipped in one warning line each, within seconds and well under 500 MB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragrouter.ingest import files, pdf

try:
    from tests.support import documents
    from tests.test_store_cli import REPO, run_fast
except ModuleNotFoundError:  # rootdir-less import mode
    from support import documents
    from test_store_cli import REPO, run_fast


def _table_lines(text: str) -> set[str]:
    return {line for line in text.splitlines() if " | " in line}


def test_an_array_over_pypdfs_limit_is_read(tmp_path):
    import pypdf
    from pypdf.errors import LimitReachedError

    path = documents.big_array_pdf(tmp_path / "0000320193-24-000123.pdf")
    with pytest.raises(LimitReachedError, match="maximum array element count"):
        pypdf.PdfReader(str(path)).pages[0]  # pypdf's defaults: what the ingest raised before
    doc = files.read_document(path, "filing.pdf")
    assert doc.text == "Quarterly filing of ACME Corp" and doc.meta["reader"] == "pdfium"
    title, pages, meta = pdf.read(path, readers=("pypdf",))  # the fallback reads it too, its limits raised
    assert pages == ["Quarterly filing of ACME Corp"] and meta == {"reader": "pypdf"}


def test_a_filing_with_tables_and_an_accession_number_for_a_title(tmp_path):
    path = documents.filing_pdf(tmp_path / "acme-10q.pdf", "ACME Corp", seed=3, pages=4)
    doc = files.read_document(path, "acme-10q.pdf")
    assert doc.title == "ACME Corp Quarterly Report"
    assert doc.meta["metadata_title"] == "0000320193-24-000123" and doc.meta["pages"] == 4
    lines = doc.text.splitlines()
    for page in range(4):  # every table row on one line, its cells in order
        for row in documents.table_rows(3, page):
            assert " | ".join(row) in lines, (row, doc.text[:800])
    assert "Part 2: results by segment" in lines
    # pypdf's layout mode finds the same rows
    _t, pages, _m = pdf.read(path, readers=("pypdf",))
    assert _table_lines("\n".join(pages)) == _table_lines(doc.text)
    # a real title stays
    named = documents.filing_pdf(tmp_path / "named.pdf", "Beta", seed=1, pages=1, title="Beta Inc. results, Q2 2024")
    assert files.read_document(named, "named.pdf").title == "Beta Inc. results, Q2 2024"


def test_encrypted_with_an_empty_and_with_a_real_user_password(tmp_path):
    plain = documents.filing_pdf(tmp_path / "plain.pdf", "Gamma", seed=2, pages=2)
    expected = files.read_document(plain, "plain.pdf").text
    opens = documents.encrypt(plain, tmp_path / "owner-only.pdf", user="")
    assert files.read_document(opens, "owner-only.pdf").text == expected
    assert "\n".join(pdf.read(opens, readers=("pypdf",))[1]).count(" | ") == expected.count(" | ")
    locked = documents.encrypt(plain, tmp_path / "locked.pdf", user="letmein")
    for readers in (("pdfium", "pypdf"), ("pypdf",)):
        with pytest.raises(pdf.PdfUnreadable, match="encrypted with a password; save an unprotected copy"):
            pdf.read(locked, readers=readers)


def test_the_fallback_reads_what_pdfium_cannot(tmp_path, monkeypatch):
    path = documents.filing_pdf(tmp_path / "delta.pdf", "Delta", seed=5, pages=2)

    def refuse(_path):
        raise ValueError("PDFium refused it")

    monkeypatch.setitem(pdf.READERS, "pdfium", refuse)
    doc = files.read_document(path, "delta.pdf")
    assert doc.meta["reader"] == "pypdf" and doc.title == "delta"  # pypdf has no font sizes: the file name
    assert " | ".join(documents.table_rows(5, 1)[1]) in doc.text.splitlines()
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7\nnot a PDF at all")
    with pytest.raises(files.Unreadable, match=r"not a readable PDF \(ValueError: PDFium refused it\)"):
        files.read_document(tmp_path / "broken.pdf", "broken.pdf")


@settings(max_examples=150, deadline=None)
@given(st.one_of(
    st.from_regex(r"\A\d{10}-\d{2}-\d{6}\Z"),                    # SEC accession numbers
    st.from_regex(r"\A\d{4}-\d{2}-\d{2}\Z"),                      # dates
    st.from_regex(r"\A[a-z0-9][a-z0-9_-]{0,20}\.(pdf|docx|htm)\Z"),  # file names
    st.from_regex(r"\A[A-Za-z]{1,6}[_-]\d{1,4}[A-Za-z]?[_-]\d{4}\Z"),  # ACME_10Q_2024
))
def test_identifiers_are_not_titles(title):
    assert pdf.looks_like_identifier(title)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.from_regex(r"\A[A-Z][a-z]{2,9}\Z"), min_size=2, max_size=6), st.sampled_from(["", " 2024", " Q3"]))
def test_words_are_titles(words, tail):
    assert not pdf.looks_like_identifier(" ".join(words) + tail)


_PROBE = """
import json, resource, sys, time
from pathlib import Path
t = time.perf_counter()
from ragrouter.ingest import files
out = {}
for name in sys.argv[1:]:
    t = time.perf_counter()
    try:
        files.read_document(Path(name), name)
        out[name] = ["read", time.perf_counter() - t]
    except files.Unreadable as why:
        out[name] = [str(why), time.perf_counter() - t]
# VmHWM: this program's own peak; ru_maxrss keeps the peak of the process it was forked from
# (a pytest worker of a gigabyte) across exec
hwm = [line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:")]
out["maxrss_mib"] = int(hwm[0].split()[1]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    import docx

    folder = tmp_path_factory.mktemp("hostile")
    base = folder / "base.docx"
    d = docx.Document()
    d.add_paragraph("base")
    d.save(base)
    docs = folder / "docs"
    docs.mkdir()
    unpacked = documents.docx_bomb(docs / "bomb.docx", base)
    base.unlink()
    documents.nested_html(docs / "nested.html")
    (docs / "notes.txt").write_text("The board met in May.\n")
    return docs, unpacked


def test_a_zip_bomb_and_nested_html_are_refused_in_seconds_and_little_memory(hostile):
    docs, unpacked = hostile
    assert unpacked > 3.9 * 2**30 and (docs / "bomb.docx").stat().st_size < 5 * 2**20
    assert (docs / "nested.html").stat().st_size > 5_000_000
    names = [str(docs / "bomb.docx"), str(docs / "nested.html")]
    # its own process, so the memory is this reading's; the timeout is the bound (it ran for minutes before)
    done = subprocess.run([sys.executable, "-c", _PROBE, *names], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got[names[0]][0].startswith("its parts unpack to 4,096 MiB (4,096 MiB of XML) from 4 MiB, over the limits "
                                       "of a .docx (256 MiB, 64 MiB of XML): a zip bomb or a damaged file")
    assert got[names[1]][0] == ("its HTML elements nest more than 200 deep (a damaged or generated page); "
                                "save its text")
    assert got["maxrss_mib"] < 500, got


def test_ingest_names_each_refused_file_in_one_warning(hostile, tmp_path):
    docs, _ = hostile
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    out = run_fast("--db", db, "--create", "ingest", "--corpus", "c", "--format", "files", str(docs))
    assert out.returncode == 0, out.stderr
    assert "1 new documents (1 in files)" in out.stdout
    warnings = [ln for ln in out.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 2, out.stderr
    assert warnings[0].startswith("warning: docs/bomb.docx: its parts unpack to 4,096 MiB")
    assert warnings[1].startswith("warning: docs/nested.html: its HTML elements nest more than 200 deep")
