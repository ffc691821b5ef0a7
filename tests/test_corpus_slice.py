"""``corpus slice``: slices that keep their questions, say why they dropped the others, refuse
to keep none, and a proposal for a budget in hours.

The "filing" is one long document (47 chunks at the test's 64-token window) ingested with
``--format files`` and a questions CSV naming it as the source: some questions record an
evidence sentence, some only the document. ``--chunks 8`` kept 0 questions with exit 0 and
an unexplained warning; it now keeps the questions whose evidence lies in the first 8 chunks.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml
from sqlalchemy import create_engine, text

from ragrouter.corpus.slicing import requirements, slice_dataset
from ragrouter.ingest.records import Dataset, Document, Question

WINDOW, OVERLAP = 64, 8


def _filing_text(items: int = 139) -> str:
    return " ".join(f"Item {i}: segment{i} reported revenue{i} of {i * 13} million dollars in region "
                    f"{chr(65 + i % 26)}{chr(65 + (i * 7) % 26)}." for i in range(items))


def _cli(args: list[str], cwd: Path | None = None):
    import os

    from click.testing import CliRunner

    import cli as cli_module
    from ragrouter.db import engine as eng

    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        return CliRunner().invoke(cli_module.cli, args, catch_exceptions=False)
    finally:
        os.chdir(old)
        eng.dispose_all()


def _config(tmp_path: Path, **extra) -> Path:
    data = {"chunking": {"window": WINDOW, "overlap": OVERLAP}, **extra}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _filing_store(tmp_path: Path, db: str, evidence_items=(3, 5, 100), doc_only: int = 4):
    """The filing and its questions: one with an evidence sentence per item of
    ``evidence_items``, ``doc_only`` that name only the filing."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "filing.txt").write_text(_filing_text())
    rows = [{"id": f"ev{i}", "question": f"What revenue did segment {i} report?", "answer": f"{i * 13} million",
             "type": "factual", "sources": "filing.txt",
             "evidence": f"Item {i}: segment{i} reported revenue{i} of {i * 13} million"}
            for i in evidence_items]
    rows += [{"id": f"doc{k}", "question": f"Summarise the filing's part {k}.", "answer": "Revenues by segment.",
              "type": "summary", "sources": "filing.txt", "evidence": ""} for k in range(doc_only)]
    with open(folder / "questions.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    cfg = _config(tmp_path)
    out = _cli(["--db", db, "--create", "--config", str(cfg), "ingest", "--corpus", "filing", "--format", "files",
                "filing.txt", "questions.csv"], cwd=folder)
    assert out.exit_code == 0, out.output
    return cfg


def _counts(db: str) -> dict:
    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            return {n: conn.execute(text(f"SELECT COUNT(*) FROM {n}")).scalar() for n in ("corpora", "documents",
                                                                                        "queries", "worker_runs")}
    finally:
        engine.dispose()


def test_chunks_of_a_long_filing_keep_the_questions_whose_evidence_lies_inside(tmp_path):
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    cfg = _filing_store(tmp_path, db)
    from ragrouter.corpus.chunking import chunk_text

    assert len(chunk_text("filing", _filing_text(), WINDOW, OVERLAP)) == 47
    out = _cli(["--db", db, "--config", str(cfg), "corpus", "slice", "filing", "filing-8", "--chunks", "8"])
    assert out.exit_code == 0, out.output
    # items 3 and 5 lie in the first 8 chunks; item 100 and the document-only questions do not
    assert "2 questions (2 new)" in out.output
    assert ("kept 2 of 7 questions (factual 2, reasoning 0, summary 0); left out 5: only its document is recorded "
            "as evidence and the slice cuts that document: 4, evidence outside the slice: 1") in out.output
    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            got = conn.execute(text("SELECT q.external_id FROM queries q JOIN corpora c ON c.id = q.corpus_id "
                                    "WHERE c.name = 'filing-8' ORDER BY q.external_id")).scalars().all()
    finally:
        engine.dispose()
    assert got == ["ev3", "ev5"]


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_a_slice_that_keeps_no_question_is_refused_and_changes_nothing(tmp_path, backend, request):
    db = f"duckdb:///{tmp_path / 's.duckdb'}" if backend == "duckdb" else request.getfixturevalue("pg_url")
    cfg = _filing_store(tmp_path, db, evidence_items=(100, 120))
    before = _counts(db)
    out = _cli(["--db", db, "--config", str(cfg), "corpus", "slice", "filing", "filing-8", "--chunks", "8"])
    assert out.exit_code == 2, out.output
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1, out.output
    # why, how many per reason, and the smallest slice that keeps one
    assert lines[0].startswith("Error: the slice keeps no question of 'filing' (6 questions; only its document is "
                               "recorded as evidence and the slice cuts that document: 4, evidence outside the "
                               "slice: 2); nothing was made: --chunks 33 keeps at least one"), lines[0]
    assert _counts(db) == before
    # the suggestion holds
    out = _cli(["--db", db, "--config", str(cfg), "corpus", "slice", "filing", "filing-33", "--chunks", "33"])
    assert out.exit_code == 0 and "kept 1 of 6 questions (factual 1," in out.output, out.output


def test_reasons_tokens_chunk_evidence_and_no_evidence():
    docs = [Document("a", "", _filing_text(40)), Document("b", "", _filing_text(40).replace("segment", "unit").replace("revenue", "income"))]
    qs = [Question("q-sent", "Revenue of 3?", "39", "factual", evidence=["Item 3: segment3 reported revenue3"]),
          Question("q-doc", "About b?", "units", "summary", supporting_doc_ids=["b"]),
          Question("q-none", "Anything?", "x", "factual"),
          Question("q-chunk", "Generated", "y", "reasoning", supporting_doc_ids=["b"],
                   meta={"source_chunks": [["b", 0, 40]]}),
          Question("q-chunk-late", "Generated late", "z", "reasoning", supporting_doc_ids=["b"],
                   meta={"source_chunks": [["b", 500, 560]]})]
    ds = Dataset(documents=docs, questions=qs)
    n_a = len(__import__("ragrouter.llm.tokens", fromlist=["count"]).encoding().encode(docs[0].text))
    # all of a, the first 100 tokens of b
    part = slice_dataset(ds, tokens=n_a + 100, window=WINDOW, overlap_tokens=OVERLAP)
    assert [d.external_id for d in part.documents] == ["a", "b[:100tokens]"]
    assert [q.external_id for q in part.questions] == ["q-sent", "q-chunk"]
    assert part.questions[1].meta["source_chunks"] == [["b[:100tokens]", 0, 40]]
    assert part.dropped == {"document_cut": 1, "no_evidence": 1, "evidence_outside": 1}
    whole = slice_dataset(ds, docs=2, per_type=1, window=WINDOW, overlap_tokens=OVERLAP)
    assert [q.external_id for q in whole.questions] == ["q-sent", "q-doc", "q-chunk"]
    assert whole.dropped == {"no_evidence": 1, "over_quota": 1}
    req = requirements(ds, WINDOW, OVERLAP)
    assert req.need_docs == [1, 2, None, 2, 2]
    assert req.kept(docs=1) == {"factual": 1, "reasoning": 0, "summary": 0}
    assert req.need_chunks[1] == sum(req.doc_chunks)  # the whole of b


def test_for_budget_proposes_a_slice_and_makes_it_on_request(tmp_path):
    """The fake endpoint's stated time prior: 2 s a call plus token rates; the filing's
    proposal within an hour is smaller than the whole, printed with the command that
    makes it, and --make makes exactly that."""
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    gen = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "fake-model", "concurrency": 1}
    cfg = _config(tmp_path, backends={"fake": gen, "fake-embed": {**gen, "model": "fake-embed"}},
                  roles={"generators": ["fake"], "extractor": "fake", "judge": "fake", "query_generator": "fake",
                         "embedder": "fake-embed"},
                  paradigms={"enabled": ["llm_only", "naive"]},
                  dry_run={"timing": {"priors": {"openai": {"overhead_s": 2.0, "prompt_tps": 1000,
                                                            "gen_tps": 50, "parallel": 1}}}})
    _filing_store(tmp_path, db, evidence_items=(3, 5, 40, 60, 100, 120), doc_only=2)
    before = _counts(db)
    args = ["--db", db, "--config", str(cfg), "corpus", "slice", "filing", "filing-b", "--for-budget", "1"]
    out = _cli(args)
    assert out.exit_code == 0, out.output
    assert _counts(db) == before  # a proposal makes nothing
    lines = out.output.splitlines()
    head = next(ln for ln in lines if ln.startswith("within 1 h on 'filing': "))
    cmd = next(ln for ln in lines if ln.startswith("make it with: "))
    assert f"python cli.py --db {db} --config {cfg} corpus slice filing filing-b --chunks " in cmd
    n = int(cmd.split("--chunks ")[1].split()[0])
    # the filing is one document: a slice of its chunks, not all of them (items 3, 5 and 40 lie in
    # the first 14 chunks, item 60 in the 21st)
    assert 14 <= n < 21 and "→ 3 questions (factual 3, reasoning 0, summary 0)" in head, out.output
    expected = head.split("expected ")[1].split()[0]
    h, m, s = map(int, expected.split(":"))
    assert 0 < h * 3600 + m * 60 + s <= 3600
    assert "(the whole corpus: 1 document, 47 chunks, 8 questions: expected " in out.output
    whole = out.output.split("(the whole corpus: ")[1].split("expected ")[1].split(";")[0]
    hh, mm, ss = map(int, whole.split(":"))
    assert hh * 3600 + mm * 60 + ss > 3600
    made = _cli(args + ["--make"])
    assert made.exit_code == 0, made.output
    assert "corpus filing-b: 1 documents (1 new)" in made.output and "kept " in made.output
    again = _cli(cmd.removeprefix("make it with: python cli.py ").split())
    assert again.exit_code == 0 and "(0 new)" in again.output, again.output  # the printed command is the same slice
    more = _cli(args[:-1] + ["4"])  # four times the budget: more of the filing, more questions
    assert more.exit_code == 0, more.output
    m = int(more.output.split("--chunks ")[1].split()[0])
    assert m > n and "→ 3 questions" not in more.output, more.output
    tiny = _cli(["--db", db, "--config", str(cfg), "corpus", "slice", "filing", "filing-t", "--for-budget", "0.25"])
    assert tiny.exit_code == 2, tiny.output
    assert "no slice of 'filing' fits in 0.25 h: the smallest that keeps a question (--chunks 11, 1 question)" \
        in tiny.output



def _library_store(tmp_path: Path, db: str) -> Path:
    """Six documents of one size in stored order: the first carries 2 questions, the fourth 13,
    the third 3 summaries, the fifth and sixth together 4 reasoning questions (each names
    both), the second none; the fake endpoint's stated time prior."""
    folder = tmp_path / "lib"
    folder.mkdir()
    names = ["d1-first", "d2-none", "d3-summary", "d4-rich", "d5-pair", "d6-pair"]
    for k, name in enumerate(names):
        (folder / f"{name}.txt").write_text(_filing_text(15).replace("segment", f"seg{k}x"))
    rows = [("first", 2, "factual", "d1-first.txt"), ("rich", 13, "factual", "d4-rich.txt"),
            ("sum", 3, "summary", "d3-summary.txt"), ("pair", 4, "reasoning", "d5-pair.txt;d6-pair.txt")]
    with open(folder / "questions.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "question", "answer", "type", "sources"])
        for stem, n, qtype, sources in rows:
            for j in range(n):
                w.writerow([f"{stem}{j}", f"What does {stem} say about item {j}?", "x", qtype, sources])
    gen = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "fake-model", "concurrency": 1}
    cfg = _config(tmp_path, backends={"fake": gen, "fake-embed": {**gen, "model": "fake-embed"}},
                  roles={"generators": ["fake"], "extractor": "fake", "judge": "fake", "query_generator": "fake",
                         "embedder": "fake-embed"},
                  paradigms={"enabled": ["llm_only", "naive"]},
                  dry_run={"timing": {"priors": {"openai": {"overhead_s": 2.0, "prompt_tps": 1000,
                                                            "gen_tps": 50, "parallel": 1}}}})
    out = _cli(["--db", db, "--create", "--config", str(cfg), "ingest", "--corpus", "lib", "--format", "files",
                ".", "questions.csv"], cwd=folder)
    assert out.exit_code == 0, out.output
    return cfg


def test_for_budget_picks_the_question_rich_documents_and_says_what_they_decide(tmp_path):
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    cfg = _library_store(tmp_path, db)
    before = _counts(db)
    base = ["--db", db, "--config", str(cfg), "corpus", "slice", "lib"]
    out = _cli(base + ["lib-half", "--for-budget", "0.5"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    head = next(ln for ln in lines if ln.startswith("within 0.5 h on 'lib': "))
    # the first three documents in stored order keep 5 questions; the pick keeps the rich one first
    assert "3 documents (18 chunks) chosen by the questions they carry per hour of build" in head, out.output
    assert "→ 18 questions (factual 15, reasoning 0, summary 3)" in head
    docs_line = next(ln for ln in lines if ln.startswith("documents: "))
    assert docs_line.startswith("documents: d4-rich.txt (13 questions, build ") and "d2-none" not in docs_line
    assert ("what it can decide (run --until-decided, 2 paradigms, plan's power 0.8, stated rates): a smoke test, "
            "not a decision (factual 15, summary 3; the rule needs about 30 questions of a type for even a "
            "50-point gap)") in lines
    cmd = next(ln for ln in lines if ln.startswith("make it with: "))
    assert cmd.endswith("corpus slice lib lib-half --doc d1-first.txt --doc d3-summary.txt --doc d4-rich.txt")
    assert _counts(db) == before
    # an hour: the two documents of the reasoning questions come in together, and the slice keeps them
    hour = _cli(base + ["lib-hour", "--for-budget", "1", "--make"])
    assert hour.exit_code == 0, hour.output
    assert "d5-pair.txt + d6-pair.txt (4 questions, build " in hour.output
    assert "kept 22 of 22 questions (factual 15, reasoning 4, summary 3)" in hour.output, hour.output
    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            pairs = conn.execute(text("SELECT COUNT(*) FROM queries q JOIN corpora c ON c.id = q.corpus_id "
                                      "WHERE c.name = 'lib-hour' AND q.qtype = 'reasoning'")).scalar()
    finally:
        engine.dispose()
    assert pairs == 4
    # nothing fits this config: the budget that would, and the profile that fits
    tiny = _cli(base + ["lib-t", "--for-budget", "0.2"])
    assert tiny.exit_code == 2, tiny.output
    line = tiny.output.strip()
    assert "\n" not in line and line.startswith("Error: no slice of 'lib' fits in 0.2 h: the smallest that keeps a "
                                                "question (")
    assert "--for-budget 0.3 fits it; with profile: local in your config it fits: " in line, line


def test_slice_names_and_budgets_are_checked(tmp_path):
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    cfg = _library_store(tmp_path, db)
    base = ["--db", db, "--config", str(cfg), "corpus", "slice", "lib"]
    before = _counts(db)
    for hours in ("nan", "inf", "-1", "0", "half"):
        out = _cli(base + ["lib-x", "--for-budget", hours])
        assert out.exit_code == 2 and out.output.strip() == (
            f"Error: --for-budget {hours}: the hours must be a positive number, e.g. --for-budget 0.5"), out.output
    for name, needle in (("", "a corpus name cannot be blank"), (" x", "no leading or trailing spaces")):
        out = _cli(base + [name, "--docs", "2"])
        assert out.exit_code == 2 and needle in out.output and len(out.output.strip().splitlines()) == 1, out.output
    assert _counts(db) == before
    made = _cli(base + ["lib-2", "--doc", "d4-rich.txt", "--doc", "d1-first.txt"])
    assert made.exit_code == 0 and "kept 15 of 22 questions" in made.output, made.output
    again = _cli(base + ["lib-2", "--doc", "d1-first.txt", "--doc", "d4-rich.txt"])
    assert again.exit_code == 0 and "(0 new)" in again.output  # the same slice: nothing changes
    middle = _counts(db)
    other = _cli(base + ["lib-2", "--docs", "3"])
    assert other.exit_code == 2 and ("corpus 'lib-2' holds another slice of 'lib' (2 documents, 15 questions; this "
                                     "one: 3 and 5): a slice is never merged into it") in other.output, other.output
    own = _cli(["--db", db, "--config", str(cfg), "corpus", "slice", "lib-2", "lib", "--docs", "1"])
    assert own.exit_code == 2 and "corpus 'lib' is a corpus of its own (not a slice of 'lib-2')" in own.output
    unknown = _cli(base + ["lib-3", "--doc", "nope.txt"])
    assert unknown.exit_code == 2 and "--doc 'nope.txt': no such document in the corpus" in unknown.output
    assert _counts(db) == middle


def test_the_pick_balances_types_and_keeps_questions_over_several_documents():
    from ragrouter.decisions.slicepick import best_pick

    need = [frozenset([0])] * 2 + [frozenset([1])] * 13 + [frozenset([2, 3])] * 3 + [frozenset([3])]
    qtypes = ["factual"] * 15 + ["reasoning"] * 3 + ["summary"]
    pick = best_pick([600, 600, 300, 300], need, qtypes, 30, 100, 1800, [5, 5, 3, 3], 3)
    # the pair (3 reasoning + 1 summary) first, then the rich document capped at 8, not the first
    assert pick.bundles == [([2, 3], 4), ([1], 13)] and pick.cap == 8
    assert pick.counts == {"reasoning": 3, "summary": 1, "factual": 8}
    assert best_pick([600] * 4, need, qtypes, 30, 100, 500, [5] * 4, 3) is None


def test_a_proposal_under_the_indicators_chunks_says_so(tmp_path):
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    cfg = _library_store(tmp_path, db)
    from ragrouter.corpus.indicators import HUBNESS_K

    out = _cli(["--db", db, "--config", str(cfg), "corpus", "slice", "lib", "lib-r", "--doc", "d4-rich.txt"])
    assert out.exit_code == 0, out.output
    small = _cli(["--db", db, "--config", str(cfg), "corpus", "slice", "lib-r", "lib-r2", "--for-budget", "2"])
    assert small.exit_code == 0, small.output
    assert (f"note: 6 chunks in all: the corpus indicators the routers read need at least {HUBNESS_K + 1} (the "
            "metrics stage fails on fewer); add documents to the corpus") in small.output.splitlines(), small.output
    big = _cli(["--db", db, "--config", str(cfg), "corpus", "slice", "lib", "lib-b", "--for-budget", "2"])
    assert big.exit_code == 0 and "note: " not in big.output, big.output
