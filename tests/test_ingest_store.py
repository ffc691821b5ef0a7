"""`cli.py ingest` on bad input and changed records (issue 16, item 7), on DuckDB and PostgreSQL:
exit 2, one line naming file and record, no traceback, the store unchanged (row counts and
content hash); --update replaces changed records; questions alone join an existing corpus."""

from __future__ import annotations

import json

import pytest

try:
    from tests.test_store_cli import fingerprint, one_line, run_fast
except ModuleNotFoundError:  # rootdir-less import mode
    from test_store_cli import fingerprint, one_line, run_fast

DOCS = [{"id": "d1", "title": "Alpha", "text": "alpha text"}, {"id": "d2", "title": "Beta", "text": "beta text"}]
QS = [{"id": "q1", "question": "What is alpha?", "answer": "alpha", "type": "single_hop"},
      {"id": "q2", "question": "How do alpha and beta relate?", "answer": "both", "type": "multi_hop", "hops": 2,
       "supporting_doc_ids": ["d1", "d2"]}]


def jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


@pytest.fixture(params=["duckdb", "postgresql"])
def url(request, tmp_path):
    if request.param == "duckdb":
        u = f"duckdb:///{tmp_path / 'store.duckdb'}"
    else:
        u = request.getfixturevalue("pg_url")
    assert run_fast("--db", u, "db", "upgrade").returncode == 0
    corpus, qs = jsonl(tmp_path / "Corpus.jsonl", DOCS), jsonl(tmp_path / "Question.jsonl", QS)
    out = run_fast("--db", u, "ingest", "--corpus", "c", "--format", "ragrouter", corpus, qs)
    assert out.returncode == 0, out.stderr
    return u


# (name, file name, raw text of the file, expected record label, expected problem)
BAD = [
    ("NaN in metadata", "Corpus.json", '[{"id": "d9", "text": "x", "score": NaN}]', "record [0] (id 'd9')",
     "NaN is not a JSON number in key 'score'"),
    ("Infinity in metadata", "Corpus.jsonl", '{"id": "d9", "text": "x"}\n{"id": "d8", "text": "y", "m": {"s": Infinity}}\n',
     "line 2 (id 'd8')", "Infinity is not a JSON number in key 'm.s'"),
    ("number overflowing to infinity", "Corpus.json", '[{"id": "d9", "text": "x", "w": 1e999}]', "record [0] (id 'd9')",
     "number out of range in key 'w'"),
    ("NUL in text", "Corpus.json", '[{"id": "d9", "text": "a\\u0000b"}]', "record [0] (id 'd9')",
     "NUL character (\\u0000) at character 1 in key 'text'"),
    ("NUL in a question", "Question.jsonl",
     '{"id": "q9", "question": "Wh\\u0000at?", "answer": "a", "type": "single_hop"}\n', "line 1 (id 'q9')",
     "NUL character"),
    ("nesting depth (parser)", "Corpus.json",
     '[{"id": "d9", "text": "x"}, {"id": "d8", "text": "y", "m": ' + "[" * 3000 + "]" * 3000 + "}]",
     "record [1]", "nested more than 64 levels deep"),
    ("nesting depth (record)", "Corpus.jsonl", '{"id": "d9", "text": "x", "m": ' + "[" * 80 + "]" * 80 + "}\n",
     "line 1 (id 'd9')", "nested more than 64 levels deep in key 'm'"),
    ("integer range", "Corpus.json", '[{"id": "d9", "text": "x", "n": 99999999999999999999999}]',
     "record [0] (id 'd9')", "integer 99999999999999999999999 in key 'n' is out of range"),
    ("duplicate JSON keys", "Corpus.json", '[{"id": "d9", "text": "x", "text": "y"}]', "record [0] (id 'd9')",
     "duplicate key 'text'"),
    ("negative hops", "Question.jsonl",
     '{"id": "q9", "question": "Q?", "answer": "a", "type": "multi_hop", "hops": -2}\n', "line 1 (id 'q9')",
     "key 'hops' must be between 1 and 100, got -2"),
    ("hops 1e30", "Question.jsonl",
     '{"id": "q9", "question": "Q?", "answer": "a", "type": "multi_hop", "hops": 1e30}\n', "line 1 (id 'q9')",
     "key 'hops' must be an integer"),
    ("hops out of range", "Question.jsonl",
     '{"id": "q9", "question": "Q?", "answer": "a", "type": "multi_hop", "hops": 10000000000000000000000}\n',
     "line 1 (id 'q9')", "integer 10000000000000000000000 in key 'hops' is out of range"),
]


@pytest.mark.parametrize("name,fname,raw,record,problem", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_changes_nothing(url, tmp_path, name, fname, raw, record, problem):
    bad = tmp_path / "bad" / fname
    bad.parent.mkdir()
    bad.write_text(raw)
    before = fingerprint(url)
    one_line(run_fast("--db", url, "ingest", "--corpus", "c", "--format", "ragrouter",
                      jsonl(tmp_path / "bad" / "Corpus0.jsonl", DOCS), str(bad)), 2,
             f"{bad}: {record}: {problem}")
    assert fingerprint(url) == before


def test_changed_records_stop_unless_update(url, tmp_path):
    docs = [dict(DOCS[0], text="alpha text, revised"), DOCS[1]]
    qs = [dict(QS[0], answer="ALPHA"), QS[1]]
    corpus, questions = jsonl(tmp_path / "C2.jsonl", docs), jsonl(tmp_path / "Q2.jsonl", qs)
    before = fingerprint(url)
    line = one_line(run_fast("--db", url, "ingest", "--corpus", "c", "--format", "ragrouter", corpus, questions), 2,
                    "1 documents ('d1' (text))", "1 questions ('q1' (answer))", "--update", "nothing was changed")
    assert str(tmp_path / "C2.jsonl") in line
    assert fingerprint(url) == before
    out = run_fast("--db", url, "ingest", "--update", "--corpus", "c", "--format", "ragrouter", corpus, questions)
    assert out.returncode == 0, out.stderr
    assert "updated 1 documents and 1 questions" in out.stdout
    got = run_fast("--db", url, "sql", "select (select text from documents where external_id = 'd1') as t, "
                   "(select answer from queries where external_id = 'q1') as a", "--format", "json")
    assert json.loads(got.stdout) == [{"t": "alpha text, revised", "a": "ALPHA"}]
    counts = fingerprint(url)[0]
    assert counts["documents"] == 2 and counts["queries"] == 2
    # an identical re-ingest changes nothing
    after = fingerprint(url)
    assert run_fast("--db", url, "ingest", "--corpus", "c", "--format", "ragrouter", corpus, questions).returncode == 0
    assert fingerprint(url) == after


def test_questions_alone_join_an_existing_corpus(url, tmp_path):
    more = jsonl(tmp_path / "More.jsonl", [{"id": "q3", "question": "What is beta?", "answer": "beta",
                                            "type": "single_hop", "supporting_doc_ids": ["d2"]}])
    out = run_fast("--db", url, "ingest", "--corpus", "c", "--format", "ragrouter", more)
    assert out.returncode == 0, out.stderr
    assert "1 new questions" in out.stdout and fingerprint(url)[0]["queries"] == 3
    before = fingerprint(url)
    one_line(run_fast("--db", url, "ingest", "--corpus", "nope", "--format", "ragrouter", more), 2,
             str(tmp_path / "More.jsonl"), "corpus 'nope'", "not there")
    stray = jsonl(tmp_path / "Stray.jsonl", [{"id": "q4", "question": "Q?", "answer": "a", "type": "single_hop",
                                              "supporting_doc_ids": ["d7"]}])
    one_line(run_fast("--db", url, "ingest", "--corpus", "c", "--format", "ragrouter", stray), 2,
             str(tmp_path / "Stray.jsonl"), "question 'q4'", "'d7'")
    assert fingerprint(url) == before
