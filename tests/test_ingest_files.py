"""`ingest --format files`: a folder of documents as users have them (PDF, Markdown, HTML, text,
.docx) and a CSV of questions whose sources are document ids or globs. Documents, chunks and
question-to-document links as expected; an unreadable file named in one line and skipped; a
run that reads nothing, or a source that names no document, changes nothing (DuckDB and
PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fpdf import FPDF
from PIL import Image

from ragrouter.corpus.chunking import chunk_text, num_chunks
from ragrouter.ingest import files, questions
from ragrouter.ingest.records import LoaderError
from ragrouter.llm import tokens

try:
    from tests.test_store_cli import fingerprint, one_line, run_fast
except ModuleNotFoundError:  # rootdir-less import mode
    from test_store_cli import fingerprint, one_line, run_fast

TABLE = [("Segment", "Q1 2024", "Q1 2023"), ("iPhone", "69,702", "65,775"), ("Services", "23,117", "20,766")]
OUTLOOK = ("Apple expects services revenue to keep growing through the year while hardware demand stays "
           "seasonal, and the board approved a further share buyback programme. ")


def make_pdf(path: Path, title: str | None, paragraphs: list[str], table=None, pages: int = 1) -> Path:
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=11)
    for page in range(pages):
        pdf.add_page()
        for text in paragraphs:
            pdf.multi_cell(0, 6, text)
            pdf.ln(2)
        if table and page == 0:
            with pdf.table() as t:
                for row in table:
                    cells = t.row()
                    for cell in row:
                        cells.cell(cell)
    pdf.output(str(path))
    return path


def make_scan(path: Path) -> Path:
    """A PDF whose only page is an image (no text layer), as a scanner writes it."""
    pdf = FPDF()
    pdf.add_page()
    pdf.image(Image.new("RGB", (200, 100), "white"), x=10, y=10, w=100)
    pdf.output(str(path))
    return path


def make_folder(root: Path) -> Path:
    reports = root / "reports"
    (reports / "notes").mkdir(parents=True)
    make_pdf(reports / "AAPL-Q1-2024.pdf", "Apple Q1 2024 report",
             ["Apple Inc. reported record services revenue in the first quarter."], TABLE)
    make_pdf(reports / "AAPL-outlook.pdf", None, [OUTLOOK * 6], pages=3)  # no metadata title: the file name
    (reports / "notes" / "msft.md").write_text("# Microsoft FY24 notes\n\nAzure grew 29 percent.\n\n"
                                               "| metric | value |\n|---|---|\n| Azure growth | 29% |\n")
    (reports / "goog.html").write_text(
        "<html><head><title>Alphabet results</title><style>p {color: red}</style></head><body>"
        "<h1>Alphabet</h1><p>Google Cloud <b>turned</b> a profit.</p><script>var x = 1;</script>"
        "<table><tr><th>Year</th><th>Cloud revenue</th></tr><tr><td>2024</td><td>43.2</td></tr></table>"
        "</body></html>")
    (reports / "tsla.txt").write_text("Tesla delivered 1.8 million vehicles.\n")
    (reports / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\nthis is not a PDF at all")
    (reports / "logo.png").write_bytes(b"\x89PNG\r\n")
    (reports / ".hidden.txt").write_text("not read")
    return reports


QUESTIONS = (
    "id,question,answer,type,sources,analyst\n"
    "q1,What was iPhone revenue in Q1 2024?,\"69,702\",,*AAPL-Q1*,ana\n"
    "q2,How did Apple and Alphabet clouds compare?,both grew,,*AAPL-Q1*;goog.html,bo\n"
    "q3,Summarise Apple's outlook.,growth,summary,reports/AAPL-outlook.pdf,ana\n"
    "q4,How fast did Azure grow?,29%,single-chunk,*msft*,bo\n"
    "q5,What do the filings say together?,a lot,multi-document,\"[\"\"*AAPL*\"\", \"\"tsla.txt\"\"]\",ana\n"
    "q6,What does the broken file say?,nothing,,broken.pdf,bo\n"
)


@pytest.fixture(params=["duckdb", "postgresql"])
def url(request, tmp_path):
    if request.param == "duckdb":
        u = f"duckdb:///{tmp_path / 'store.duckdb'}"
    else:
        u = request.getfixturevalue("pg_url")
    assert run_fast("--db", u, "db", "upgrade").returncode == 0
    return u


def sql(url: str, query: str) -> list[dict]:
    out = run_fast("--db", url, "sql", query, "--format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_folder_and_a_csv_of_questions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_folder(tmp_path)
    (tmp_path / "questions.csv").write_text(QUESTIONS)
    db = f"duckdb:///{tmp_path / 'store.duckdb'}"
    assert run_fast("--db", db, "db", "upgrade").returncode == 0
    args = ("--db", db, "ingest", "--corpus", "reports", "--format", "files",
            "--type-map", "single-chunk=factual", "--type-map", "multi-document=reasoning",
            "reports", "questions.csv")
    out = run_fast(*args)
    assert out.returncode == 0, out.stderr
    assert "5 new documents (5 in files), 5 new questions (5 in files)" in out.stdout
    warnings = [ln for ln in out.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1, out.stderr  # the corrupt PDF, in one line, with the question that needed it
    assert warnings[0].startswith("warning: reports/broken.pdf: not a readable PDF (")
    assert "skipped, and 1 question(s) whose sources name it (line 7 (id 'q6'))" in warnings[0]
    assert "note: 1 files in the folders are not documents" in out.stderr and ".png x 1" in out.stderr

    docs = {d["external_id"]: d for d in sql(db, "SELECT external_id, title, text FROM documents ORDER BY id")}
    assert list(docs) == ["reports/AAPL-Q1-2024.pdf", "reports/AAPL-outlook.pdf", "reports/goog.html",
                          "reports/notes/msft.md", "reports/tsla.txt"]
    assert {k: d["title"] for k, d in docs.items()} == {
        "reports/AAPL-Q1-2024.pdf": "Apple Q1 2024 report", "reports/AAPL-outlook.pdf": "AAPL-outlook",
        "reports/goog.html": "Alphabet results", "reports/notes/msft.md": "Microsoft FY24 notes",
        "reports/tsla.txt": "tsla"}
    apple = docs["reports/AAPL-Q1-2024.pdf"]["text"].splitlines()
    assert apple[0] == "Apple Inc. reported record services revenue in the first quarter."
    for row in TABLE:  # each table row stays together on one line, cells in reading order
        assert " | ".join(row) in apple
    html = docs["reports/goog.html"]["text"].splitlines()
    assert "Google Cloud turned a profit." in html and "Year | Cloud revenue" in html and "2024 | 43.2" in html
    assert "var x" not in docs["reports/goog.html"]["text"] and "color" not in docs["reports/goog.html"]["text"]
    assert "| Azure growth | 29% |" in docs["reports/notes/msft.md"]["text"].splitlines()
    assert docs["reports/tsla.txt"]["text"] == "Tesla delivered 1.8 million vehicles."
    outlook = docs["reports/AAPL-outlook.pdf"]["text"]
    assert outlook.count("buyback") == 18 and outlook.count("Apple expects") == 18  # 6 times on each of 3 pages

    qs = {q["external_id"]: q for q in sql(db, "SELECT external_id, qtype, supporting_doc_ids, answer, meta "
                                                "FROM queries ORDER BY external_id")}
    links = {k: json.loads(q["supporting_doc_ids"]) if isinstance(q["supporting_doc_ids"], str)
             else q["supporting_doc_ids"] for k, q in qs.items()}
    assert links == {
        "q1": ["reports/AAPL-Q1-2024.pdf"],
        "q2": ["reports/AAPL-Q1-2024.pdf", "reports/goog.html"],
        "q3": ["reports/AAPL-outlook.pdf"],
        "q4": ["reports/notes/msft.md"],
        "q5": ["reports/AAPL-Q1-2024.pdf", "reports/AAPL-outlook.pdf", "reports/tsla.txt"],
    }
    assert {k: q["qtype"] for k, q in qs.items()} == {
        "q1": "factual", "q2": "reasoning", "q3": "summary", "q4": "factual", "q5": "reasoning"}
    meta = {k: json.loads(q["meta"]) if isinstance(q["meta"], str) else q["meta"] for k, q in qs.items()}
    assert meta["q1"] == {"analyst": "ana", "type_from": "sources"} and meta["q3"] == {"analyst": "ana"}
    assert meta["q4"] == {"analyst": "bo", "type_label": "single-chunk"} and qs["q1"]["answer"] == "69,702"

    # chunks: the chunk stage cuts each stored document as the paper's sliding window does
    assert run_fast("--db", db, "run", "--stage", "chunk", "--corpus", "reports").returncode == 0
    got = sql(db, "SELECT d.external_id AS doc, c.chunk_index AS i, c.text AS text FROM chunks c "
                  "JOIN documents d ON d.id = c.document_id ORDER BY d.id, c.chunk_index")
    full = sql(db, "SELECT external_id, title, text FROM documents ORDER BY id")
    expected = [(d["external_id"], c.index, c.text) for d in full for c in chunk_text(d["title"], d["text"])]
    assert [(g["doc"], g["i"], g["text"]) for g in got] == expected
    per_doc = {d["external_id"]: sum(1 for g in got if g["doc"] == d["external_id"]) for d in full}
    outlook_tokens = len(tokens.encoding().encode(f"AAPL-outlook\n{outlook}", disallowed_special=()))
    assert per_doc["reports/AAPL-outlook.pdf"] == num_chunks(outlook_tokens) >= 2
    assert all(n == 1 for k, n in per_doc.items() if k != "reports/AAPL-outlook.pdf")

    # the same folder again changes nothing (the same text is read the same way)
    before = fingerprint(db)
    again = run_fast(*args)
    assert again.returncode == 0 and "0 new documents (5 in files), 0 new questions" in again.stdout
    assert fingerprint(db) == before


def test_questions_alone_name_stored_documents(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_folder(tmp_path)
    assert run_fast("--db", url, "ingest", "--corpus", "r", "--format", "files", "reports").returncode == 0
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"question": "Which vehicles?", "answer": "1.8 million", "sources": ["tsla.*"]})
                    + "\n" + json.dumps({"question": "Azure?", "gold": "29%", "docs": "*/msft.md; *.html"}) + "\n")
    out = run_fast("--db", url, "ingest", "--corpus", "r", "--format", "files", str(more))
    assert out.returncode == 0, out.stderr
    assert "0 new documents (0 in files), 2 new questions (2 in files)" in out.stdout
    rows = sql(url, "SELECT question, qtype, supporting_doc_ids FROM queries ORDER BY question")
    ids = [r["supporting_doc_ids"] if isinstance(r["supporting_doc_ids"], list) else json.loads(r["supporting_doc_ids"])
           for r in rows]
    assert [(r["question"], r["qtype"]) for r in rows] == [("Azure?", "reasoning"), ("Which vehicles?", "factual")]
    assert ids == [["reports/notes/msft.md", "reports/goog.html"], ["reports/tsla.txt"]]


def test_nothing_readable_changes_nothing(url, tmp_path):
    folder = tmp_path / "scans"
    folder.mkdir()
    make_scan(folder / "scan.pdf")
    (folder / "broken.pdf").write_bytes(b"not a pdf")
    before = fingerprint(url)
    line = one_line(run_fast("--db", url, "ingest", "--corpus", "c", "--format", "files", str(folder)), 2,
                    "none of the 2 document files could be read", "nothing was stored")
    assert "scans/scan.pdf: no text layer on any of its 1 pages (a scanned PDF?)" in line
    assert "scans/broken.pdf: not a readable PDF" in line
    assert fingerprint(url) == before


def test_a_source_that_names_no_document_changes_nothing(url, tmp_path):
    make_folder(tmp_path)
    qfile = tmp_path / "q.csv"
    qfile.write_text("question,answer,sources\nWhat?,x,*AAPL*\nNetflix?,y,*NFLX*\n")
    before = fingerprint(url)
    one_line(run_fast("--db", url, "ingest", "--corpus", "c", "--format", "files", str(tmp_path / "reports"),
                      str(qfile)), 2, f"{qfile}: line 3 (id 'q-", "source '*NFLX*' matches no document (of 5:")
    assert fingerprint(url) == before


def test_a_scan_among_readable_files_is_one_warning(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    make_scan(folder / "scan.pdf")
    (folder / "a.txt").write_text("alpha")
    got = files.load_files(files.expand([folder]))
    assert [d.external_id for d in got.dataset.documents] == ["docs/a.txt"]
    assert got.skipped == [("docs/scan.pdf", "no text layer on any of its 1 pages (a scanned PDF?); run OCR on it "
                                             "first (e.g. ocrmypdf) and ingest the result")]
    assert got.dataset.dropped == {"unreadable_file": 1}


def test_docx_paragraphs_and_tables_in_order(tmp_path):
    import docx

    doc = docx.Document()
    doc.core_properties.title = "Board minutes"
    doc.add_paragraph("The board met on 3 May.")
    table = doc.add_table(rows=2, cols=3)
    for r, row in enumerate([("Item", "Vote", "Result"), ("Buyback", "7-2", "passed")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    doc.add_paragraph("The meeting closed.")
    doc.save(tmp_path / "minutes.docx")
    d = files.read_document(tmp_path / "minutes.docx", "minutes.docx")
    assert d.title == "Board minutes"
    assert d.text.splitlines() == ["The board met on 3 May.", "Item | Vote | Result", "Buyback | 7-2 | passed", "",
                                   "The meeting closed."]
    (tmp_path / "fake.docx").write_bytes(b"PK not a zip")
    with pytest.raises(files.Unreadable, match=r"not a readable \.docx file"):
        files.read_document(tmp_path / "fake.docx", "fake.docx")


def test_text_that_is_not_utf8_or_empty_is_unreadable(tmp_path):
    (tmp_path / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(files.Unreadable, match=r"not UTF-8 text \(byte 0xe9 at offset 3, line 1\)"):
        files.read_document(tmp_path / "latin.txt", "latin.txt")
    (tmp_path / "blank.md").write_text("  \n\n")
    with pytest.raises(files.Unreadable, match="holds no text"):
        files.read_document(tmp_path / "blank.md", "blank.md")


def test_ids_paths_and_globs(tmp_path, monkeypatch):
    make_folder(tmp_path)
    monkeypatch.chdir(tmp_path / "reports")
    got = files.expand([Path(".")])
    assert [i for _, i in got.documents] == ["AAPL-Q1-2024.pdf", "AAPL-outlook.pdf", "broken.pdf", "goog.html",
                                             "notes/msft.md", "tsla.txt"]
    monkeypatch.chdir(tmp_path)
    pattern = files.expand([Path("reports/**/*.md"), Path("reports/tsla.txt"), Path("reports")])
    assert [i for _, i in pattern.documents][:2] == ["reports/notes/msft.md", "reports/tsla.txt"]
    assert len(pattern.documents) == 6  # the folder adds the rest, each file once
    with pytest.raises(LoaderError, match=r"reports/\*\.xlsx: the pattern matches no document or questions file"):
        files.expand([Path("reports/*.xlsx")])
    with pytest.raises(LoaderError, match=r"reports/logo\.png: not a format --format files reads"):
        files.expand([Path("reports/logo.png")])
    with pytest.raises(LoaderError, match=r"nope: no such file or folder"):
        files.expand([Path("nope")])


def test_column_mapping_and_type_rule(tmp_path):
    qfile = tmp_path / "q.csv"
    qfile.write_text("Frage;Antwort;Dateien;Art\nWer?;Anna;a.txt;\nWas?;Geld;a.txt;b.txt;\n")
    catalog = questions.Catalog(["docs/a.txt", "docs/b.txt"])
    mapping = questions.parse_map(["question=frage", "answer=Antwort", "sources=Dateien", "type=Art"])
    with pytest.raises(LoaderError, match=r"q\.csv: line 3: 5 fields, the header has 4 columns \(a value holding the delimiter"):
        questions.load_questions([qfile], catalog, mapping)
    qfile.write_text('Frage;Antwort;Dateien;Art\nWer?;Anna;a.txt;\nWas?;Geld;"a.txt;b.txt";\nWo?;Bonn;;Summary\n')
    got = questions.load_questions([qfile], catalog, mapping).questions
    assert [(q.question, q.answer, q.qtype, q.supporting_doc_ids) for q in got] == [
        ("Wer?", "Anna", "factual", ["docs/a.txt"]), ("Was?", "Geld", "reasoning", ["docs/a.txt", "docs/b.txt"]),
        ("Wo?", "Bonn", "summary", [])]
    with pytest.raises(LoaderError, match=r"--map sources=Files: no such column \(columns: Frage, Antwort"):
        questions.load_questions([qfile], catalog, {**mapping, "sources": "Files"})
    qfile.write_text("question,answer,type\nQ?,A,multi-chunk\nR?,B,multi-chunk\n")
    with pytest.raises(LoaderError, match=r"q\.csv: column 'type' holds 1 type label\(s\) that are not query types: "
                                          r"'multi-chunk' x 2; .* e\.g\. --type-map 'multi-chunk=reasoning'"):
        questions.load_questions([qfile], catalog)
    qfile.write_text("question,answer\nQ?,\n")
    with pytest.raises(LoaderError, match=r"line 2 .*: the answer is empty \(column 'answer'\)"):
        questions.load_questions([qfile], catalog)
    qfile.write_text("question,answer,unanswerable\nQ?,,yes\n")
    q = questions.load_questions([qfile], catalog).questions[0]
    assert q.unanswerable and q.answer == "Insufficient information"
    for bad, msg in ((["quesiton=Q"], "unknown field 'quesiton'"), (["question"], "expected FIELD=COLUMN")):
        with pytest.raises(ValueError, match=msg):
            questions.parse_map(bad)
    with pytest.raises(ValueError, match="'hard' is not a query type"):
        questions.parse_type_map(["multi-chunk=hard"])


def test_missing_reader_names_the_extra(tmp_path, monkeypatch):
    import sys

    make_pdf(tmp_path / "a.pdf", None, ["text"])
    monkeypatch.setitem(sys.modules, "pypdf", None)  # the fallback missing: PDFium reads it all the same
    assert files.read_document(tmp_path / "a.pdf", "a.pdf").text == "text"
    monkeypatch.setitem(sys.modules, "pypdfium2", None)  # as if the files extra were not installed
    with pytest.raises(files.MissingReader, match=r"a\.pdf: reading \.pdf files needs the pypdfium2 package, which "
                                                  r"is not installed: pip install 'ragrouter\[files\]'"):
        files.read_document(tmp_path / "a.pdf", "a.pdf")


def test_other_formats_point_a_folder_to_files(tmp_path):
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    assert run_fast("--db", db, "db", "upgrade").returncode == 0
    (tmp_path / "notes.txt").write_text("hello")
    one_line(run_fast("--db", db, "ingest", "--corpus", "c", "--format", "jsonl", str(tmp_path)), 2,
             "is a folder; --format jsonl reads dataset files", "--format files")
    one_line(run_fast("--db", db, "ingest", "--corpus", "c", "--format", "ragrouter", str(tmp_path / "notes.txt")),
             2, "a .txt document, not a ragrouter dataset file", "--format files")
    one_line(run_fast("--db", db, "ingest", "--corpus", "c", "--format", "jsonl", "--map", "question=Q",
                      str(tmp_path / "notes.txt")), 2, "--map applies to --format files only")


def test_jsonl_questions_alone_join_a_stored_corpus(url, tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "d1", "text": "alpha"}) + "\n")
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps({"id": "q1", "question": "What?", "answer": "alpha", "type": "factual",
                              "supporting_doc_ids": ["d1"]}) + "\n")
    assert run_fast("--db", url, "ingest", "--corpus", "c", "--format", "jsonl", str(docs)).returncode == 0
    out = run_fast("--db", url, "ingest", "--corpus", "c", "--format", "jsonl", str(qs))
    assert out.returncode == 0, out.stderr
    assert "0 new documents (0 in files), 1 new questions (1 in files)" in out.stdout
    before = fingerprint(url)
    one_line(run_fast("--db", url, "ingest", "--corpus", "other", "--format", "jsonl", str(qs)), 2,
             "corpus 'other'", "not there")
    assert fingerprint(url) == before
