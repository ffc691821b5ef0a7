"""An analysts' questions file as it comes: the columns ``Question``, ``Source Docs`` (globs),
``Question Type`` (the team's own labels), ``Source Chunk Type`` and ``Answer``, written by
pandas as Excel would save it (BOM, ``;``). Before, such a file loaded silently wrong (every
question factual, no sources, nothing said); now the columns are recognised, the mapping and
the left-over columns printed, foreign labels refused with their counts until mapped, and a
left-over column that looks like sources or types refused until named."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragrouter.ingest import questions
from ragrouter.ingest.records import LoaderError

try:
    from tests.test_store_cli import fingerprint, one_line, run_fast
except ModuleNotFoundError:  # rootdir-less import mode
    from test_store_cli import fingerprint, one_line, run_fast

COLUMNS = ["Question", "Source Docs", "Question Type", "Source Chunk Type", "Answer"]
ROWS = [
    ("What was ACME's revenue in Q1?", "*ACME*", "Numeric Lookup", "table", "10.2 million"),
    ("How did ACME and Beta grow against each other?", "*ACME*;*Beta*", "Trend Analysis", "text", "ACME grew faster"),
    ("Summarise Gamma's quarter.", "*Gamma*", "Executive Summary", "text", "Revenue grew on cloud"),
    ("What did Beta report for services?", "*Beta*", "Numeric Lookup", "table", "3.1 million"),
    ("Which risk did ACME name?", "*ACME*", "Numeric Lookup", "text", "Supply"),
]
TYPE_MAP = ["--type-map", "Numeric Lookup=factual", "--type-map", "Trend Analysis=reasoning",
            "--type-map", "Executive Summary=summary"]


def _folder(tmp_path, **to_csv):
    docs = tmp_path / "filings"
    docs.mkdir()
    for name in ("ACME", "Beta", "Gamma"):
        (docs / f"{name}-Q1-2024.txt").write_text(f"{name} quarterly report: revenue grew.\n")
    path = tmp_path / "questions.csv"
    pd.DataFrame(ROWS, columns=COLUMNS).to_csv(path, index=False, **to_csv)
    return docs, path


@pytest.mark.parametrize("to_csv", [{}, {"encoding": "utf-8-sig", "sep": ";"}], ids=["pandas", "excel-bom-semicolon"])
def test_the_analysts_csv_as_it_comes(tmp_path, monkeypatch, to_csv):
    monkeypatch.chdir(tmp_path)
    _folder(tmp_path, **to_csv)
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    assert run_fast("--db", db, "db", "upgrade").returncode == 0
    before = fingerprint(db)
    base = ("--db", db, "ingest", "--corpus", "filings", "--format", "files", "filings", "questions.csv")
    line = one_line(run_fast(*base), 2, "questions.csv: column 'Question Type' holds 3 type label(s) that are not "
                    "query types: 'Numeric Lookup' x 3, 'Trend Analysis' x 1, 'Executive Summary' x 1; map each to "
                    "factual, reasoning or summary, e.g. --type-map 'Numeric Lookup=factual' --type-map "
                    "'Trend Analysis=reasoning' --type-map 'Executive Summary=summary'")
    assert "Traceback" not in line
    assert fingerprint(db) == before

    dry = run_fast(*base, *TYPE_MAP, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    table = [ln.split() for ln in dry.stdout.splitlines()]
    assert ["factual", "3", "3", "0"] in table and ["reasoning", "1", "1", "0"] in table
    assert ["summary", "1", "1", "0"] in table and ["all", "5", "5", "0"] in table
    assert "dry run: corpus filings: nothing was written" in dry.stdout
    assert fingerprint(db) == before

    out = run_fast(*base, *TYPE_MAP)
    assert out.returncode == 0, out.stderr
    assert "3 new documents (3 in files), 5 new questions (5 in files)" in out.stdout
    assert ("note: questions.csv: columns question ← 'Question', answer ← 'Answer', type ← 'Question Type', "
            "sources ← 'Source Docs'; not used (kept in each question's meta): 'Source Chunk Type'; type labels "
            "'Numeric Lookup' → factual x 3, 'Trend Analysis' → reasoning x 1, 'Executive Summary' → summary x 1"
            ) in out.stderr.splitlines()
    rows = json.loads(run_fast("--db", db, "sql", "SELECT question, qtype, supporting_doc_ids, meta FROM queries "
                                                  "ORDER BY question", "--format", "json").stdout)
    got = {r["question"]: (r["qtype"], r["supporting_doc_ids"] if isinstance(r["supporting_doc_ids"], list)
                           else json.loads(r["supporting_doc_ids"]),
                           r["meta"] if isinstance(r["meta"], dict) else json.loads(r["meta"])) for r in rows}
    assert got["How did ACME and Beta grow against each other?"] == (
        "reasoning", ["filings/ACME-Q1-2024.txt", "filings/Beta-Q1-2024.txt"],
        {"Source Chunk Type": "text", "type_label": "Trend Analysis"})
    assert got["What was ACME's revenue in Q1?"][:2] == ("factual", ["filings/ACME-Q1-2024.txt"])
    assert got["Summarise Gamma's quarter."][0] == "summary"


def _spellings(word_lists):
    """Ways a header names a column: case, spaces, underscores, dashes, camel case, padding."""
    @st.composite
    def spelled(draw, words):
        sep = draw(st.sampled_from([" ", "_", "-", "  ", "", "camel"]))
        case = draw(st.sampled_from([str.lower, str.upper, str.title, lambda w: w]))
        if sep == "camel":
            name = words[0].lower() + "".join(w.title() for w in words[1:])
        else:
            name = sep.join(case(w) for w in words)
        return draw(st.sampled_from(["", " "])) + name + draw(st.sampled_from(["", " "]))
    return st.tuples(*(spelled(w) for w in word_lists))


@settings(max_examples=60, deadline=None)
@given(_spellings([["Question"], ["Source", "Docs"], ["Question", "Type"], ["Source", "Chunk", "Type"], ["Answer"]]))
def test_header_spellings_map_alike(tmp_path_factory, names):
    tmp = tmp_path_factory.mktemp("spell")
    path = tmp / "q.csv"
    pd.DataFrame(ROWS, columns=list(names)).to_csv(path, index=False)
    catalog = questions.Catalog(["ACME-Q1-2024.txt", "Beta-Q1-2024.txt", "Gamma-Q1-2024.txt"])
    types = questions.parse_type_map(["Numeric Lookup=factual", "Trend Analysis=reasoning",
                                      "Executive Summary=summary"])
    got = questions.load_questions([path], catalog, type_map=types)
    stripped = [n.strip() for n in names]
    assert got.columns[0].used == {"question": stripped[0], "answer": stripped[4], "type": stripped[2],
                                   "sources": stripped[1]}
    assert got.columns[0].unused == [stripped[3]]
    assert [q.qtype for q in got.questions] == ["factual", "reasoning", "summary", "factual", "factual"]
    assert got.questions[1].supporting_doc_ids == ["ACME-Q1-2024.txt", "Beta-Q1-2024.txt"]


def test_a_left_over_column_that_looks_like_sources_or_types_is_refused(tmp_path):
    catalog = questions.Catalog(["docs/a.txt", "docs/b.txt"])
    path = tmp_path / "q.csv"
    path.write_text("Prompt,Gold,Doc Name\nWho?,Anna,a.txt\nWhat?,Money,\"a.txt, b.txt\"\n")
    with pytest.raises(LoaderError, match=r"q\.csv: column 'Doc Name' looks like the questions' sources \(document "
                                          r"ids or globs\) but no sources column is recognised; name it with --map "
                                          r"sources='Doc Name', or keep it in meta only with --map ignore='Doc Name'"):
        questions.load_questions([path], catalog)
    named = questions.load_questions([path], catalog, questions.parse_map(["sources=doc name"]))
    assert [q.supporting_doc_ids for q in named.questions] == [["docs/a.txt"], ["docs/a.txt", "docs/b.txt"]]
    assert [q.qtype for q in named.questions] == ["factual", "reasoning"]
    kept = questions.load_questions([path], catalog, questions.parse_map(["ignore=Doc Name"]))
    assert kept.questions[0].meta == {"Doc Name": "a.txt", "type_from": "default"}  # no type, no sources
    assert kept.questions[0].supporting_doc_ids == []
    path.write_text("question,answer,Kind\nWho?,Anna,lookup\n")
    with pytest.raises(LoaderError, match=r"column 'Kind' looks like the questions' type \(question types\) .* "
                                          r"--map type='Kind'"):
        questions.load_questions([path], catalog)


def test_a_labels_example_type_follows_its_rows_sources_when_its_name_gives_no_cue(tmp_path):
    """'Cross-Contract' says nothing a cue reads; its rows each name two documents, so the
    message's example maps it to reasoning (the rule for a row without a type), not factual."""
    catalog = questions.Catalog(["docs/a.txt", "docs/b.txt"])
    path = tmp_path / "q.csv"
    path.write_text("Question,Answer,Source Docs,Question Type\n"
                    "Which is older?,A,a.txt;b.txt,Cross-Contract\nSame law?,No,a.txt;b.txt,Cross-Contract\n"
                    "Who signed?,Anna,a.txt,Clause Lookup\nWhen?,2003,b.txt,Clause Lookup\n")
    with pytest.raises(LoaderError, match=r"e\.g\. --type-map 'Cross-Contract=reasoning' "
                                          r"--type-map 'Clause Lookup=factual'$"):
        questions.load_questions([path], catalog)


def test_jsonl_keys_are_recognised_alike(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"Prompt": "Who?", "Reference Answer": "Anna", "Category": "Lookup",
                                "SourceDocs": ["a.txt"], "reviewer": "bo"}) + "\n")
    catalog = questions.Catalog(["docs/a.txt"])
    got = questions.load_questions([path], catalog, type_map=questions.parse_type_map(["Lookup=factual"]))
    assert got.columns[0].used == {"question": "Prompt", "answer": "Reference Answer", "type": "Category",
                                   "sources": "SourceDocs"}
    assert got.columns[0].unused == ["reviewer"] and got.questions[0].supporting_doc_ids == ["docs/a.txt"]
