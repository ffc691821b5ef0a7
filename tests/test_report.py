"""`cli.py report` and `cli.py export` on random stores (ragrouter.report).

* The report writes report.md, one CSV per view and the PNG figures; the PNGs are real images
  (several colours, pixel variance); the heatmap figure has one panel per paradigm; the
  Markdown tables carry the views' numbers in the right cells; an empty store gives a report
  that names the stages without data.
* The Parquet export round-trips row counts and column types through pandas/pyarrow
  (Hugging Face ``datasets`` is not installed here; it reads the same Parquet files).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from PIL import Image
from sqlalchemy import text

from ragrouter.commands.common import Ctx
from ragrouter.commands.export import export_command
from ragrouter.commands.report import report_command
from ragrouter.report import figures, synthetic, tables
from ragrouter.report.build import REPORT_VIEWS, build_report
from ragrouter.report.data import read_view, router_dataset
from ragrouter.report.export import EXPORTS, export_parquet


@pytest.fixture
def filled(store):
    rows = synthetic.random_rows(21, n_corpora=3, queries_per_corpus=8, generators=("gen-a",))
    synthetic.insert_rows(store, rows)
    return store, rows


def parse_md_tables(md: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(the paragraph before it, header, rows) of every Markdown table."""
    out, lines, i = [], md.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("| ") and i + 1 < len(lines) and re.match(r"^\| (:?-{3}:? \| )*:?-{3}:? \|$", lines[i + 1]):
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            before = lines[j] if j >= 0 else ""
            header = [c.strip() for c in lines[i].strip("|").split(" | ")]
            body = []
            i += 2
            while i < len(lines) and lines[i].startswith("| "):
                body.append([c.strip() for c in lines[i].strip().strip("|").split(" | ")])
                i += 1
            out.append((before, header, body))
        else:
            i += 1
    return out


def strip_marks(cell: str) -> str:
    return cell.strip("*")


def assert_real_png(path, min_colours: int = 8) -> np.ndarray:
    img = Image.open(path)
    img.verify()
    arr = np.asarray(Image.open(path).convert("RGB"), dtype=float)
    assert arr.shape[0] > 200 and arr.shape[1] > 300
    assert arr.std() > 10.0, f"{path.name} is nearly one colour"
    colours = len(np.unique(arr.reshape(-1, 3), axis=0))
    assert colours >= min_colours, f"{path.name} has {colours} colours"
    return arr


def test_report_files_figures_and_numbers(filled, tmp_path):
    store, rows = filled
    report = build_report(store, tmp_path / "rep")
    assert report.markdown.is_file()
    md = report.markdown.read_text()
    for name in REPORT_VIEWS:
        csv = tmp_path / "rep" / f"{name}.csv"
        assert csv.is_file()
        assert len(pd.read_csv(csv)) == len(read_view(store, REPORT_VIEWS[name][0]))
    acc = read_view(store, "v_accuracy_by_type")
    judge = report.judge
    assert judge in set(acc["judge"])
    expected = {"fig6_corpus_profile", f"fig4_accuracy__gen-a__{judge}", f"fig7_cost_quality__gen-a__{judge}"}
    assert set(report.figures) == expected
    for path in report.figures.values():
        assert path.is_file()
        assert_real_png(path)
        assert f"]({path.name})" in md

    # Fig. 4 has exactly one heatmap panel per paradigm.
    part = acc[(acc["judge"] == judge) & (acc["generator"] == "gen-a")]
    fig = figures.accuracy_heatmaps(part)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == part["paradigm"].nunique() == 6
    assert sorted(ax.get_title() for ax in panels) == sorted(part["paradigm"].unique())
    figures.save(fig, tmp_path / "f4.png")

    parsed = parse_md_tables(md)

    # Table 2: every (corpus, paradigm, qtype) % and the average tokens.
    for (generator, j), block in acc.groupby(["generator", "judge"]):
        [(_, header, body)] = [t for t in parsed if t[0].startswith(f"**Generator `{generator}`, judge `{j}`** (% correct")]
        by_paradigm = {r[0]: dict(zip(header, r)) for r in body}
        for r in block.itertuples(index=False):
            row = by_paradigm[r.paradigm]
            assert strip_marks(row[f"{r.corpus} {tables.QTYPE_SHORT.get(r.qtype, r.qtype)}"]) == tables.fmt_pct(r.correct_pct)
            if r.qtype == "all":
                assert row[f"{r.corpus} Tok."] == tables.fmt_int(r.avg_tokens)

    # Table 16: token sums in millions, Avg-Ctx in tokens.
    tok = read_view(store, "v_token_breakdown")
    [(_, header, body)] = [t for t in parsed if t[1][:3] == ["Corpus", "Paradigm", "Generator"] and "Ret-In" in t[1]]
    cells = {(r[0], r[1], r[2]): dict(zip(header, r)) for r in body}
    assert len(cells) == len(tok)
    for r in tok.itertuples(index=False):
        row = cells[(r.corpus, r.paradigm, r.generator)]
        assert row["Total"] == tables.fmt_millions(r.total) and row["Gen-In"] == tables.fmt_millions(r.gen_in)
        assert row["Avg-Ctx"] == tables.fmt_int(r.avg_context_tokens) and row["N"] == tables.fmt_int(r.n)

    # Table 13 and Table 6.
    bd = read_view(store, "v_judgment_breakdown")
    for (generator, j), block in bd.groupby(["generator", "judge"]):
        [(_, header, body)] = [t for t in parsed if t[0].startswith(f"**Generator `{generator}`, judge `{j}`** (% of judged")]
        cells = {(r[0], r[1]): dict(zip(header, r)) for r in body}
        for r in block.itertuples(index=False):
            row = cells[(r.paradigm, r.qtype)]
            assert (row[f"{r.corpus} Cor"], row[f"{r.corpus} Inc"], row[f"{r.corpus} No-A"]) == (
                tables.fmt_pct(r.correct_pct), tables.fmt_pct(r.incorrect_pct), tables.fmt_pct(r.incomplete_pct))
    val = read_view(store, "v_query_validation")
    [(_, header, body)] = [t for t in parsed if t[1][:3] == ["Corpus", "Type", "Gen."]]
    cells = {(r[0], r[1]): dict(zip(header, r)) for r in body}
    assert len(cells) == len(val)
    for r in val.itertuples(index=False):
        assert cells[(r.corpus, r.qtype)]["Pass"] == tables.fmt_int(r.passed)
        assert cells[(r.corpus, r.qtype)]["Rate %"] == tables.fmt_pct(r.pass_rate_pct)

    # Oracle label counts add up to the queries of each corpus.
    oracle = read_view(store, "v_oracle_label")
    for (generator, j), block in oracle.groupby(["generator", "judge"]):
        [(_, header, body)] = [t for t in parsed if t[0].startswith(f"**Generator `{generator}`, judge `{j}`** (queries per")]
        totals = {(r[0], r[1]): r[-1] for r in body}
        for corpus, n in block.groupby("corpus").size().items():
            assert totals[(corpus, "all")] == tables.fmt_int(n)


def test_report_on_empty_store_names_missing_stages(store, tmp_path):
    report = build_report(store, tmp_path / "empty")
    md = report.markdown.read_text()
    assert report.figures == {}
    assert set(report.empty_stages) >= {"ingest", "answer", "judge", "score", "routers"}
    assert "Stages with no data yet" in md and "**judge** (`judgments` is empty)" in md
    assert "_No data: this table needs the answer, judge stages" in md
    assert "no judged runs yet" in md and "no corpus metrics yet" in md
    for name in REPORT_VIEWS:
        assert (tmp_path / "empty" / f"{name}.csv").is_file()


def test_report_and_export_commands(filled, duck_url, tmp_path):
    store, _ = filled
    runner = CliRunner()
    ctx = Ctx(db_url=duck_url, config_path=None)
    res = runner.invoke(report_command, ["--out", str(tmp_path / "r"), "--judge", "judge-x"], obj=ctx)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r" / "report.md").is_file()
    assert "figures use judge `judge-x`" in (tmp_path / "r" / "report.md").read_text()
    assert (tmp_path / "r" / "fig4_accuracy__gen-a__judge-x.png").is_file()
    res = runner.invoke(export_command, [str(tmp_path / "x"), "--format", "parquet", "--only", "queries"], obj=ctx)
    assert res.exit_code == 0, res.output
    assert [p.name for p in (tmp_path / "x").glob("*.parquet")] == ["queries.parquet"]
    res = runner.invoke(export_command, [str(tmp_path / "x"), "--only", "nope"], obj=ctx)
    assert res.exit_code != 0 and "unknown export 'nope'" in res.output


def test_export_round_trips_through_pandas(filled, tmp_path):
    store, rows = filled
    counts = export_parquet(store, tmp_path / "exp")
    assert set(counts) == set(EXPORTS)
    manifest = json.loads((tmp_path / "exp" / "manifest.json").read_text())
    assert manifest["files"] == {f"{n}.parquet": c for n, c in counts.items()}
    with store.connect() as conn:
        n = lambda sql: conn.execute(text(sql)).scalar_one()  # noqa: E731
        expected = {"queries": n("SELECT COUNT(*) FROM queries"),
                    "paradigm_runs": n("SELECT COUNT(*) FROM paradigm_runs"),
                    "judgments": n("SELECT COUNT(*) FROM judgments"),
                    "answer_scores": n("SELECT COUNT(*) FROM answer_scores"),
                    "oracle_labels": n("SELECT COUNT(*) FROM v_oracle_label"),
                    "router_dataset": n("SELECT COUNT(*) FROM v_router_dataset"),
                    "corpora": n("SELECT COUNT(*) FROM corpora")}
    assert expected["paradigm_runs"] == len(rows["paradigm_runs"]) > 0
    for name, count in expected.items():
        df = pd.read_parquet(tmp_path / "exp" / f"{name}.parquet")
        assert len(df) == count == counts[name], name

    schema = pq.read_schema(tmp_path / "exp" / "paradigm_runs.parquet")
    assert str(schema.field("id").type) == "int64"
    assert str(schema.field("latency_s").type) == "double"
    assert str(schema.field("created_at").type).startswith("timestamp")
    assert str(schema.field("trace").type) == "string"
    runs = pd.read_parquet(tmp_path / "exp" / "paradigm_runs.parquet").set_index("id")
    for r in rows["paradigm_runs"][:5]:
        assert json.loads(runs.loc[r["id"], "trace"]) == r["trace"]
        assert json.loads(runs.loc[r["id"], "retrieved_chunk_ids"]) == r["retrieved_chunk_ids"]
        assert runs.loc[r["id"], "gen_in_tokens"] == r["gen_in_tokens"]
    judg = pq.read_schema(tmp_path / "exp" / "judgments.parquet")
    assert str(judg.field("is_calibration").type) == "bool"

    # The router dataset file is the Python pivot (all paradigms present, one column each).
    ds = pd.read_parquet(tmp_path / "exp" / "router_dataset.parquet")
    pivot = router_dataset(store)
    assert list(ds.columns) == list(pivot.columns)
    assert [c for c in ds.columns if c.startswith("correct__")] == [f"correct__{p}" for p in
                                                                  ("llm_only", "naive", "graph", "hybrid", "iterative", "iterative_naive")]
    assert ds["label"].tolist() == pivot["label"].tolist()

    export_parquet(store, tmp_path / "notrace", with_trace=False, only=["paradigm_runs"])
    assert "trace" not in pq.read_schema(tmp_path / "notrace" / "paradigm_runs.parquet").names


def test_export_empty_store_has_schemas(store, tmp_path):
    counts = export_parquet(store, tmp_path / "e")
    assert all(v == 0 for v in counts.values())
    df = pd.read_parquet(tmp_path / "e" / "paradigm_runs.parquet")
    assert len(df) == 0 and "answer" in df.columns and "gen_in_tokens" in df.columns


def test_router_dataset_any_paradigm_set(store):
    rows = synthetic.random_rows(4, n_corpora=2, queries_per_corpus=6, paradigms=("naive", "my_new_rag"),
                                 generators=("g",), judges=("J",), p_missing_run=0.0, with_router=False)
    synthetic.insert_rows(store, rows)
    ds = router_dataset(store, judge="J", complete=True)
    assert [c for c in ds.columns if c.startswith("correct__")] == ["correct__naive", "correct__my_new_rag"]
    from ragrouter.routers.dataset import oracle_labels, validate_router_dataset

    assert len(ds) > 0
    clean = validate_router_dataset(ds)
    # Same label as the SQL view, except possible exact F1 ties (the view breaks them by name).
    recomputed = oracle_labels(clean)
    ties = (clean["f1__naive"] == clean["f1__my_new_rag"]) & (clean["correct__naive"] == 1) & (clean["correct__my_new_rag"] == 1)
    assert (recomputed[~ties.to_numpy()] == clean["label"][~ties].to_numpy()).all()


def test_report_and_export_on_postgres(pg_url, tmp_path):
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate

    engine = eng.make_engine(pg_url)
    migrate.upgrade(engine)
    rows = synthetic.random_rows(8, n_corpora=2, queries_per_corpus=5, generators=("gen-a",))
    synthetic.insert_rows(engine, rows)
    report = build_report(engine, tmp_path / "pg")
    assert len(report.figures) == 3
    assert set(report.empty_stages) <= {"embed"}  # synthetic rows have no vectors
    for path in report.figures.values():
        assert_real_png(path)
    counts = export_parquet(engine, tmp_path / "pgx")
    assert counts["paradigm_runs"] == len(rows["paradigm_runs"])
    assert counts["judgments"] == len(rows["judgments"])
    runs = pd.read_parquet(tmp_path / "pgx" / "paradigm_runs.parquet").set_index("id")
    first = rows["paradigm_runs"][0]
    assert json.loads(runs.loc[first["id"], "trace"]) == first["trace"]
