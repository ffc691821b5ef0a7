"""`cli.py report` and `cli.py export` on random stores (ragrouter.report).

* The report writes report.md, report.html, one CSV per view and every figure as PNG and SVG;
  the PNGs are real images (several colours, pixel variance), the SVGs real SVG; the HTML holds
  every figure inline (data: URIs) and opens without any other file; the heatmap figure has one
  panel per paradigm; the Markdown tables carry the views' numbers (with N and the Wilson
  interval) in the right cells; judged tables carry the judge's calibration line; a demo-sized
  store (9 queries) says "n.s." and a separable one names the best paradigm; an empty store
  gives a report that names the stages without data.
* The Parquet export (DuckDB COPY) round-trips row counts and keeps lists / structs typed;
  ``datasets.load_dataset(export_dir, name)`` loads every exported table with nested features.
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
from ragrouter.db.frames import read_view
from ragrouter.report.data import router_dataset, with_totals
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


def assert_real_svg(path) -> None:
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg"), path.name
    assert len(list(root.iter())) > 50, f"{path.name} has almost no elements"


def assert_figures_and_html(report) -> None:
    """Every figure as PNG + SVG with a caption in report.md, and inline in report.html."""
    md = report.markdown.read_text()
    html = report.html.read_text()
    assert report.html.is_file() and html.startswith("<!DOCTYPE html>")
    for name, path in report.figures.items():
        assert path.is_file() and path.suffix == ".png"
        assert_real_png(path)
        assert_real_svg(path.with_suffix(".svg"))
        assert f"]({path.name})" in md and f"]({path.with_suffix('.svg').name})" in md
        assert report.captions[name] and report.captions[name] in md
    # Offline: every image is a data: URI; no script, no remote resource.
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(imgs) == len(report.figures)
    assert all(src.startswith("data:image/png;base64,") for src in imgs)
    assert "<script" not in html and "http://" not in html and "https://" not in html
    separators = [ln for ln in md.splitlines() if re.match(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$", ln)]
    assert len(re.findall(r"<table[ >]", html)) == len(separators) > 0
    # read in a browser: a contents list linking every section, figures at one scale (CSS px
    # = PNG px at its dpi), intervals kept whole outside the widest tables
    sections = re.findall(r'<h2 id="([^"]+)">', html)
    assert len(sections) == len([ln for ln in md.splitlines() if ln.startswith("## ")]) > 1
    toc = re.search(r'<nav class="toc">.*?</nav>', html, re.S).group(0)
    assert re.findall(r'href="#([^"]+)"', toc) == sections and len(set(sections)) == len(sections)
    widths = [int(w) for w in re.findall(r'<img [^>]*style="width: (\d+)px"', html)]
    assert len(widths) == len(report.figures)
    assert sorted(widths) == sorted(round(Image.open(p).size[0] * 96 / Image.open(p).info["dpi"][0])
                                    for p in report.figures.values())


def add_calibration(rows: dict, judge: str, verdicts: dict[str, list[str]], when=None) -> None:
    """Calibration cases for ``judge``: per case kind (gold, refusal, altered, …) the verdicts."""
    import datetime as _dt

    when = when or _dt.datetime(2026, 3, 4, 10, 0)
    queries = rows["queries"]
    rid = max(r["id"] for r in rows["paradigm_runs"]) + 1000
    jid = max(j["id"] for j in rows["judgments"]) + 1000
    n = 0
    for kind, labels in verdicts.items():
        for lab in labels:
            rid += 1
            jid += 1
            q = queries[n % len(queries)]  # one case per (query, kind), as the store's key wants
            n += 1
            rows["paradigm_runs"].append(dict(rows["paradigm_runs"][0], id=rid, query_id=q["id"], paradigm="calibration",
                                              generator="cases-v1", config_hash=kind, created_at=when))
            rows["judgments"].append(dict(id=jid, run_id=rid, judge=judge, sample_index=0, label=lab, reason="c",
                                          is_calibration=True, created_at=when))


def test_report_files_figures_and_numbers(filled, tmp_path):
    store, rows = filled
    report = build_report(store, tmp_path / "rep")
    assert report.markdown.is_file()
    md = report.markdown.read_text()
    for name in REPORT_VIEWS:
        csv = tmp_path / "rep" / f"{name}.csv"
        assert csv.is_file()
        assert len(pd.read_csv(csv)) == len(read_view(store, REPORT_VIEWS[name][0]))
    acc = with_totals(read_view(store, "v_accuracy_by_type"), read_view(store, "v_accuracy_overall"))
    judge = report.judge
    assert judge in set(acc["judge"])
    expected = {"fig6_corpus_profile", f"fig4_accuracy__gen-a__{judge}", f"fig7_cost_quality__gen-a__{judge}",
                f"fig13_breakdown__gen-a__{judge}", "fig5_routing__imported-demo__gen-a__nojudge",
                "fig5_routing__store__gen-a__judge-x", "fig5_routing__store__gen-a__judge-y"}
    assert set(report.figures) == expected
    assert_figures_and_html(report)
    # router_scores.csv holds fractions (MLflow's units), and the report says so beside its link
    scores = pd.read_csv(tmp_path / "rep" / "router_scores.csv")
    rates = [c for c in scores.columns if c.split("_ci_")[0].removesuffix("_std") in
             ("routing_accuracy", "macro_f1", "mrr", "correct_rate", "abstain_rate")
             or c in ("pooled_routing_accuracy", "pooled_correct_rate")]
    assert len(rates) == 16 and scores["pooled_routing_accuracy"].notna().any()
    values = scores[rates].to_numpy(float)
    assert np.nanmin(values) >= -1e-12 and np.nanmax(values) <= 1 + 1e-12  # (Wilson's 0 may round below)
    assert "every rate is a **fraction in [0, 1]**, not percent" in md
    assert all(c in md.split("Units of `router_scores.csv`")[1].split("\n")[0] for c in
               ("routing_accuracy", "correct_rate", "pooled_correct_rate", "_ci_low", "avg_tokens"))
    # No judge is calibrated in this store: every judged table says so.
    assert md.count("**not calibrated**") >= 5

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
        allrows = block[block["qtype"] == "all"]
        div, suffix = tables.token_unit(list(allrows["avg_tokens"]) + list(allrows["avg_inference_tokens"]))
        for r in block.itertuples(index=False):
            row = by_paradigm[r.paradigm]
            cell = strip_marks(row[f"{r.corpus} {tables.QTYPE_SHORT.get(r.qtype, r.qtype)}"])
            assert cell == tables.fmt_ci(r.correct_pct, r.ci_low, r.ci_high, r.n)
            assert cell.endswith(f" n={r.n}") and "[" in cell
            if r.qtype == "all":
                assert row[tables.unit_header(f"{r.corpus} Tok.", suffix)] == tables.fmt_tokens(r.avg_tokens, div)
                assert row[tables.unit_header(f"{r.corpus} Inf. Tok.", suffix)] == tables.fmt_tokens(
                    r.avg_inference_tokens, div)
        assert "Best (McNemar)" in by_paradigm

    # Table 16: token sums in millions, Avg-Ctx in tokens.
    tok = read_view(store, "v_token_breakdown")
    [(_, header, body)] = [t for t in parsed if t[1][:3] == ["Corpus", "Paradigm", "Generator"]
                           and any(h.startswith("Ret-In") for h in t[1])]
    cells = {(r[0], r[1], r[2]): dict(zip(header, r)) for r in body}
    assert len(cells) == len(tok)
    div, suffix = tables.token_unit([v for c in ("ret_in", "ret_out", "gen_in", "gen_out", "total", "total_inference",
                                                 "build", "graph_build_tokens") for v in tok[c]])
    assert suffix == "k" and "Total (k)" in header  # this store's sums are thousands: said in the header
    for r in tok.itertuples(index=False):
        row = cells[(r.corpus, r.paradigm, r.generator)]
        assert row["Total (k)"] == tables.fmt_tokens(r.total, div) and row["Gen-In (k)"] == tables.fmt_tokens(r.gen_in, div)
        assert row["Total inf. (k)"] == tables.fmt_tokens(r.total_inference, div)
        assert row["Avg-Ctx"] == tables.fmt_int(r.avg_context_tokens) and row["N"] == tables.fmt_int(r.n)
        assert row["Empty ctx"] == tables.fmt_int(r.n_empty_context)
        assert row["Total (k)"] not in ("0.0", "0.00")

    # Table 13 and Table 6.
    bd = read_view(store, "v_judgment_breakdown")
    for (generator, j), block in bd.groupby(["generator", "judge"]):
        [(_, header, body)] = [t for t in parsed if t[0].startswith(f"**Generator `{generator}`, judge `{j}`** (% of judged")]
        cells = {(r[0], r[1]): dict(zip(header, r)) for r in body}
        for r in block.itertuples(index=False):
            row = cells[(r.paradigm, r.qtype)]
            assert (row[f"{r.corpus} Cor"], row[f"{r.corpus} Inc"], row[f"{r.corpus} No-A"]) == (
                tables.fmt_ci(r.correct_pct, r.ci_low, r.ci_high, r.n), tables.fmt_pct(r.incorrect_pct),
                tables.fmt_pct(r.incomplete_pct))
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


def demo_rows(seed: int, n_queries: int = 9) -> dict:
    """A demo-sized store: one corpus, ``n_queries`` accepted queries, five paradigms, one judge."""
    rows = synthetic.random_rows(seed, n_corpora=1, queries_per_corpus=n_queries, generators=("gen-a",),
                                 judges=("judge-x",), paradigms=("llm_only", "naive", "graph", "hybrid", "iterative"),
                                 p_missing_run=0.0, p_old_config=0.0, with_router=False)
    for q in rows["queries"]:
        q["status"] = "accepted"
    rows["human_labels"] = []  # the tests set the judge's verdicts; a reviewer's label would replace them
    judged = {j["run_id"] for j in rows["judgments"]}
    for r in rows["paradigm_runs"]:  # every run judged (random_rows leaves ~10 % unjudged)
        if r["id"] not in judged:
            rows["judgments"].append(dict(id=100_000 + r["id"], run_id=r["id"], judge="judge-x", sample_index=0,
                                          label="incorrect", reason="", is_calibration=False, created_at=r["created_at"]))
    return rows


def table2_rows(md: str) -> dict[str, dict[str, str]]:
    [(_, header, body)] = [t for t in parse_md_tables(md) if t[0].startswith("**Generator `gen-a`, judge `judge-x`** (% correct")]
    return {r[0]: dict(zip(header, r)) for r in body}


def test_demo_sized_report_says_ns(store, tmp_path):
    """9 queries cannot separate paradigms: N and intervals in every Table 2 cell, nothing bold,
    the significance row says n.s. in every column — even for a visibly higher rate."""
    rows = demo_rows(5)
    # graph correct on 6 of 9, naive on 3 of 9, the others never: graph leads, but p = 0.25.
    runs = {r["id"]: r for r in rows["paradigm_runs"]}
    qindex = {q["id"]: i for i, q in enumerate(rows["queries"])}
    for j in rows["judgments"]:
        run = runs[j["run_id"]]
        i = qindex[run["query_id"]]
        good = (run["paradigm"] == "graph" and i < 6) or (run["paradigm"] == "naive" and i < 3)
        j["label"] = "correct" if good else "incorrect"
    synthetic.insert_rows(store, rows)
    report = build_report(store, tmp_path / "demo", with_figures=False)
    md = report.markdown.read_text()
    t2 = table2_rows(md)
    corpus = rows["corpora"][0]["name"]
    assert t2["graph"][f"{corpus} Avg."] == "66.7 [35.4, 87.9] n=9"
    assert t2["naive"][f"{corpus} Avg."] == "33.3 [12.1, 64.6] n=9"
    best = t2["Best (McNemar)"]
    assert best[f"{corpus} Avg."] == "n.s. (p=0.25)"
    assert all(v.startswith("n.s.") for k, v in best.items() if k.startswith(corpus) and "Tok." not in k and v)
    assert not any(c.startswith("**") for r in t2.values() for c in r.values())
    assert report.figures == {} and report.html.is_file()


def test_separable_store_names_the_best(store, tmp_path):
    rows = demo_rows(6, n_queries=30)
    runs = {r["id"]: r for r in rows["paradigm_runs"]}
    for j in rows["judgments"]:
        j["label"] = "correct" if runs[j["run_id"]]["paradigm"] == "hybrid" else "incorrect"
    synthetic.insert_rows(store, rows)
    md = build_report(store, tmp_path / "sep", with_figures=False).markdown.read_text()
    t2 = table2_rows(md)
    corpus = rows["corpora"][0]["name"]
    # 30 vs 0 discordant pairs: exact McNemar p = 2 * 0.5**30.
    assert t2["Best (McNemar)"][f"{corpus} Avg."] == f"hybrid (p={2 * 0.5 ** 30:.3g})"
    assert t2["hybrid"][f"{corpus} Avg."].startswith("**100.0 [")


def test_judge_calibration_line_figure_and_empty_context(store, tmp_path):
    rows = demo_rows(7)
    # judge-x calibrated: gold 4/4 correct, refusal 3/4 incomplete, altered 1/4 incorrect (a lenient judge).
    verdicts = {"gold": ["correct"] * 4, "refusal": ["incomplete"] * 3 + ["correct"],
                "altered": ["incorrect"] + ["correct"] * 3}
    add_calibration(rows, "judge-x", verdicts)
    empty_ids = [r["id"] for r in rows["paradigm_runs"] if r["paradigm"] in ("naive", "graph")][:5]
    for r in rows["paradigm_runs"]:
        if r["id"] in empty_ids:
            r["context_tokens"] = 0
    synthetic.insert_rows(store, rows)
    report = build_report(store, tmp_path / "cal")
    md = report.markdown.read_text()
    from ragrouter.evaluation.calibration import kappa_from_confusion

    m = [[4, 0, 0], [3, 1, 0], [1, 0, 3]]  # rows: true correct / incorrect / incomplete; cols: verdicts
    kappa = kappa_from_confusion(m)
    from sklearn.metrics import cohen_kappa_score

    # correct vs. not (the labels the tables use): true correct 4 -> 4 correct; true not 8 -> 4 correct, 4 not
    binary = cohen_kappa_score([1] * 4 + [0] * 8, [1] * 4 + [1] * 4 + [0] * 4)
    assert binary < 0.6
    from ragrouter.evaluation.agreement import kappa_interval
    from ragrouter.common.stats import wilson_interval

    low, high = kappa_interval([[4, 0], [4, 4]])
    wlo, whi = wilson_interval(8, 12)
    line = (f"> Judge `judge-x`: calibrated on 2026-03-04 (case set `cases-v1`, N = 12 cases): Cohen's κ correct vs. "
            f"not = {binary:.2f} [{low:.2f}, {high:.2f}] (95 % bootstrap, agreement 8/12 = 67 % "
            f"[{100 * wlo:.0f}, {100 * whi:.0f}]; 3 labels: {kappa:.2f})")
    # once per section that rests on judgments (paradigm results; oracle labels and routers; figures)
    assert md.count(line) == 3, [ln for ln in md.splitlines() if ln.startswith("> Judge")]
    assert "**Warning: κ < 0.6" in md
    assert "fig_calibration" in report.figures
    assert_figures_and_html(report)
    # Empty-context runs per paradigm.
    [(_, header, body)] = [t for t in parse_md_tables(md) if t[1][:4] == ["Corpus", "Generator", "Paradigm", "Runs"]]
    empty = {r[2]: int(r[4]) for r in body}
    n_naive = sum(1 for r in rows["paradigm_runs"] if r["id"] in empty_ids and r["paradigm"] == "naive")
    assert empty["naive"] == n_naive and empty["graph"] == 5 - n_naive and empty["hybrid"] == 0
    assert "llm_only" not in empty


def test_figure_6_one_corpus_negative_and_missing():
    prof = pd.DataFrame([{"corpus": "only", "lcc_ratio": 0.8, "density": float("nan"), "clustering": -0.25,
                          "avg_degree": 3.0, "intrinsic_dim": 7.5, "hubness": -1.5, "dist_mean": 0.4}])
    fig = figures.corpus_profile(prof)
    assert fig is not None
    texts = {ax.get_title(): [t.get_text() for t in ax.texts] for ax in fig.axes}
    heights = {ax.get_title(): [p.get_height() for p in ax.patches] for ax in fig.axes}
    assert heights["Clustering (structural)"] == [-0.25] and texts["Clustering (structural)"] == ["-0.25"]
    assert heights["Hubness (semantic)"] == [-1.5] and texts["Hubness (semantic)"] == ["-1.5"]
    assert texts["Density (structural)"] == ["n/a"]
    assert heights["LCC ratio (structural)"] == [0.8]  # raw values, not normalised
    lo, _ = [ax for ax in fig.axes if ax.get_title() == "Hubness (semantic)"][0].get_ylim()
    assert lo < -1.5  # the negative bar is inside the axes
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_figure_7_labels_every_point_and_hides_none(filled):
    store, _ = filled
    acc = with_totals(read_view(store, "v_accuracy_by_type"), read_view(store, "v_accuracy_overall"))
    part = acc[(acc["judge"] == "judge-x") & (acc["generator"] == "gen-a")]
    corpus = sorted(part["corpus"].unique())[0]
    routers = pd.DataFrame([{"corpus": corpus, "label": "router lr (qc)",
                             "avg_tokens": float(part[(part["paradigm"] == "graph") & (part["qtype"] == "all")
                                                      & (part["corpus"] == corpus)]["avg_tokens"].iloc[0]),
                             "correct_rate": float(part[(part["paradigm"] == "graph") & (part["qtype"] == "all")
                                                        & (part["corpus"] == corpus)]["correct_pct"].iloc[0])}])
    fig = figures.cost_quality(part, routers)
    ax = [a for a in fig.axes if a.get_title() == corpus][0]
    labels = {t.get_text() for t in ax.texts}
    assert labels == set(part[part["corpus"] == corpus]["paradigm"]) | {"router lr (qc)"}
    lines = [ln for ln in ax.lines if ln.get_marker() not in (None, "None", "", "_")]
    paradigm_markers = [ln for ln in lines if ln.get_marker() != "*"]
    star = [ln for ln in lines if ln.get_marker() == "*"]
    # Paradigm markers are hollow and drawn above the router star that sits on the graph point.
    assert paradigm_markers and all(ln.get_markerfacecolor() == "none" for ln in paradigm_markers)
    assert star and all(ln.get_zorder() < min(p.get_zorder() for p in paradigm_markers) for ln in star)
    import matplotlib.pyplot as plt

    plt.close(fig)


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
                    "judgments": n("SELECT COUNT(*) FROM judgments WHERE NOT is_calibration"),
                    "answer_scores": n("SELECT COUNT(*) FROM answer_scores"),
                    "oracle_labels": n("SELECT COUNT(*) FROM v_oracle_label"),
                    "router_dataset": n("SELECT COUNT(*) FROM v_router_dataset"),
                    "corpora": n("SELECT COUNT(*) FROM corpora")}
    assert expected["paradigm_runs"] == len(rows["paradigm_runs"]) > 0
    for name, count in expected.items():
        df = pd.read_parquet(tmp_path / "exp" / f"{name}.parquet")
        assert len(df) == count == counts[name], name

    schema = pq.read_schema(tmp_path / "exp" / "paradigm_runs.parquet")
    assert str(schema.field("id").type).startswith("int")
    assert str(schema.field("latency_s").type) == "double"
    assert str(schema.field("created_at").type).startswith("timestamp")
    # Nested columns keep their types (DuckDB COPY): lists of ids, structs for config / trace.
    assert str(schema.field("retrieved_chunk_ids").type) == "list<element: int64>"
    assert str(schema.field("trace").type).startswith("struct<steps: list<element: double>")
    assert str(schema.field("config").type).startswith("struct<")
    qschema = pq.read_schema(tmp_path / "exp" / "queries.parquet")
    assert str(qschema.field("supporting_doc_ids").type) == "list<element: string>"
    runs = pd.read_parquet(tmp_path / "exp" / "paradigm_runs.parquet").set_index("id")
    for r in rows["paradigm_runs"][:5]:
        assert list(runs.loc[r["id"], "trace"]["steps"]) == pytest.approx(r["trace"]["steps"])
        assert list(runs.loc[r["id"], "retrieved_chunk_ids"]) == r["retrieved_chunk_ids"]
        assert runs.loc[r["id"], "config"]["paradigm"] == r["config"]["paradigm"]
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


def test_export_loads_with_hf_datasets(filled, tmp_path):
    """The dataset card's configs: datasets.load_dataset(export_dir, name) loads every table,
    nested columns typed as Hugging Face features (offline, local files only)."""
    import datasets
    import yaml

    store, rows = filled
    counts = export_parquet(store, tmp_path / "hf")
    card = (tmp_path / "hf" / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in meta["configs"]] == list(EXPORTS)
    assert "| `retrieved_chunk_ids` | `INTEGER[]`" in card or "| `retrieved_chunk_ids` | `BIGINT[]`" in card
    assert "Chunk ids put in the context, in order." in card  # the ORM column docs are the field descriptions
    for name in EXPORTS:
        if counts[name] == 0:  # no judge calibration in this store: datasets loads no empty split
            assert name == "judge_calibration"
            continue
        ds = datasets.load_dataset(str(tmp_path / "hf"), name, cache_dir=str(tmp_path / "hf-cache"))["train"]
        assert ds.num_rows == counts[name], name
    runs = datasets.load_dataset(str(tmp_path / "hf"), "paradigm_runs", cache_dir=str(tmp_path / "hf-cache"))["train"]
    f = runs.features
    assert isinstance(f["retrieved_chunk_ids"], datasets.List) and f["retrieved_chunk_ids"].feature.dtype == "int64"
    assert isinstance(f["config"], dict) and f["config"]["paradigm"].dtype == "string"
    assert isinstance(f["trace"]["steps"], datasets.List) and f["trace"]["steps"].feature.dtype == "float64"
    first = {r["id"]: r for r in rows["paradigm_runs"]}[runs[0]["id"]]
    assert runs[0]["retrieved_chunk_ids"] == first["retrieved_chunk_ids"]
    assert runs[0]["trace"]["steps"] == pytest.approx(first["trace"]["steps"])


def test_export_card_and_manifest_carry_provenance(store, tmp_path):
    """Issue 32: an exported dataset names what it rests on (store id, ragrouter version and
    commit, config hash, judge keys, paradigm config hashes, each corpus' licence), and carries
    no calibration pseudo-paradigm among the real ones."""
    import ragrouter
    from ragrouter.paths import git_commit
    from ragrouter.config import Config

    rows = synthetic.random_rows(5, n_corpora=3, queries_per_corpus=4, generators=("gen-a",))
    run = dict(rows["paradigm_runs"][0])
    run.update(id=max(r["id"] for r in rows["paradigm_runs"]) + 1, paradigm="calibration", generator="calib-v1",
               config_hash="gold")
    rows["paradigm_runs"].append(run)
    synthetic.insert_rows(store, rows)
    names = sorted(c["name"] for c in rows["corpora"])
    with store.begin() as conn:
        ids = {r[1]: r[0] for r in conn.execute(text("SELECT id, name FROM corpora"))}
        conn.execute(text("UPDATE corpora SET meta = '{\"license\": \"CC-BY-4.0\"}' WHERE id = :c"),
                     {"c": ids[names[0]]})
        conn.execute(text("UPDATE documents SET meta = '{\"license\": \"MIT\"}' WHERE corpus_id = :c"),
                     {"c": ids[names[1]]})
        sid = conn.execute(text("SELECT store_id FROM store_info")).scalar_one()
        judges = [r[0] for r in conn.execute(text("SELECT DISTINCT judge FROM judgments WHERE NOT is_calibration "
                                                  "ORDER BY judge"))]
        hashes = sorted({(r["paradigm"], r["config_hash"]) for r in rows["paradigm_runs"] if r["paradigm"] != "calibration"})
    cfg = Config.load()
    counts = export_parquet(store, tmp_path / "p", config=cfg)
    prov = json.loads((tmp_path / "p" / "manifest.json").read_text())["provenance"]
    assert prov["store_id"] == sid and len(sid) == 36
    assert prov["ragrouter_version"] == ragrouter.__version__
    assert prov["git_commit"] == git_commit() and prov["git_commit"] != "unknown"
    assert prov["config_hash"] == cfg.full_hash()
    assert [j["judge"] for j in prov["judges"]] == judges and all(j["n_judgments"] > 0 for j in prov["judges"])
    assert [(c["paradigm"], c["config_hash"]) for c in prov["config_hashes"]] == hashes
    assert {c["corpus"]: c["licence"] for c in prov["corpora"]} == {names[0]: "CC-BY-4.0", names[1]: "MIT",
                                                                      names[2]: "unknown"}
    card = (tmp_path / "p" / "README.md").read_text()
    for needle in (f"store id: `{sid}`", f"ragrouter version: `{ragrouter.__version__}`",
                   f"git commit: `{prov['git_commit']}`", f"config hash (the exporting config): `{prov['config_hash']}`",
                   *(f"`{j}` (" for j in judges), f"| {names[0]} | ", "| CC-BY-4.0 |", "| MIT |", "| unknown |"):
        assert needle in card, needle
    # the calibration case is not a paradigm run of the export; the judges' calibration is its own file
    runs = pd.read_parquet(tmp_path / "p" / "paradigm_runs.parquet")
    assert "calibration" not in set(runs["paradigm"]) and counts["paradigm_runs"] == len(rows["paradigm_runs"]) - 1
    assert not pd.read_parquet(tmp_path / "p" / "judgments.parquet")["is_calibration"].any()
    assert "judge_calibration" in counts


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
    # The same label as the SQL view, ties included (one rule: F1, then tokens, then a fixed order).
    assert list(oracle_labels(ds)) == list(ds["label"])


def test_report_and_export_on_postgres(pg_url, tmp_path):
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate

    engine = eng.make_engine(pg_url)
    migrate.upgrade(engine)
    rows = synthetic.random_rows(8, n_corpora=2, queries_per_corpus=5, generators=("gen-a",))
    synthetic.insert_rows(engine, rows)
    report = build_report(engine, tmp_path / "pg")
    assert {n.split("__")[0] for n in report.figures} == {"fig4_accuracy", "fig5_routing", "fig6_corpus_profile",
                                                          "fig7_cost_quality", "fig13_breakdown"}
    assert_figures_and_html(report)
    assert set(report.empty_stages) <= {"embed"}  # synthetic rows have no vectors
    for path in report.figures.values():
        assert_real_png(path)
    counts = export_parquet(engine, tmp_path / "pgx")
    assert counts["paradigm_runs"] == len(rows["paradigm_runs"])
    assert counts["judgments"] == len([j for j in rows["judgments"] if not j["is_calibration"]])
    runs = pd.read_parquet(tmp_path / "pgx" / "paradigm_runs.parquet").set_index("id")
    first = rows["paradigm_runs"][0]
    assert list(runs.loc[first["id"], "trace"]["steps"]) == pytest.approx(first["trace"]["steps"])
    assert list(runs.loc[first["id"], "retrieved_chunk_ids"]) == first["retrieved_chunk_ids"]
    # The same types as from DuckDB.
    schema = pq.read_schema(tmp_path / "pgx" / "paradigm_runs.parquet")
    assert str(schema.field("retrieved_chunk_ids").type) == "list<element: int64>"
    assert str(schema.field("config").type).startswith("struct<")


def test_html_table_cells_keep_names_and_intervals_whole(tmp_path):
    """In report.html a cell's model name, ``mean ± std`` and ``[lo, hi]`` never break inside
    (they did: "local-qwen-" / "0.5b", "[0.0," / "79.3]"); a table too wide for the page gets a
    smaller font, and past VERY_WIDE_COLUMNS may break them to fit."""
    from ragrouter.report.html import VERY_WIDE_COLUMNS, WIDE_COLUMNS, to_html

    row = "| local-qwen-1.5b/judge-v2 | 20.8 ± 21.7 | [6.3, 54.7] | -1,551 [-1,720, -1,425] p<0.001 | [SVG](a-b.svg) |"
    html = to_html("## A\n\n| J | R.A | CI | Δ | link |\n|---|---:|---:|---:|---|\n" + row + "\n\n## B\n", tmp_path)
    cells = re.findall(r"<td [^>]*>(.*?)</td>", html)
    assert cells[0] == '<span class="nw">local-qwen-1.5b/judge-v2</span>'
    assert cells[1] == '<span class="nw">20.8 ± 21.7</span>'
    assert cells[2] == '<span class="nw">[6.3, 54.7]</span>'
    assert cells[3] == '-1,551 <span class="nw">[-1,720, -1,425]</span> p&lt;0.001'
    assert cells[4] == '<a href="a-b.svg">SVG</a>'  # a link is left alone
    assert re.search(r"\.nw \{ white-space: nowrap; \}", html) and "<table>" in html
    assert [a for a in re.findall(r'href="#([^"]+)"', html)] == ["a", "b"]

    def table(n):
        return "| " + " | ".join(f"c{i}" for i in range(n)) + " |\n|" + "---|" * n + "\n"

    assert '<table class="wide">' in to_html(table(WIDE_COLUMNS + 1), tmp_path)
    assert '<table class="wide vwide">' in to_html(table(VERY_WIDE_COLUMNS + 1), tmp_path)
    assert "<table>" in to_html(table(WIDE_COLUMNS), tmp_path)


def test_router_not_beating_the_majority_class_says_so(store, tmp_path):
    """Routing accuracy set against the majority-class baseline (exact McNemar on hits): a router
    that always says the majority label is named in the warning; one that is right on every query
    beats it (12 discordant pairs, p = 2 * 0.5**12) and is not."""
    from ragrouter.report.build import router_tests

    rows = demo_rows(11, n_queries=60)
    queries = [q for q in rows["queries"] if q["status"] == "accepted"]
    truth = {q["id"]: ("naive" if i % 5 else "graph") for i, q in enumerate(queries)}  # 48 naive, 12 graph
    pid = 0
    for router, guess in (("majority-only", lambda qid: "naive"), ("perfect", lambda qid: truth[qid])):
        for q in queries:
            pid += 1
            rows.setdefault("router_predictions", []).append(dict(
                id=pid, router=router, features="qc", encoder="onehot", generator="gen-a", dataset="store",
                fold=q["id"] % 5, query_key=str(q["id"]), query_id=q["id"], predicted=guess(q["id"]),
                true_label=truth[q["id"]], created_at=synthetic.T0))
    synthetic.insert_rows(store, rows)
    t = router_tests(store).set_index("router")
    assert t.loc["majority-only", "majority_label"] == "naive"
    assert t.loc["majority-only", "routing_accuracy"] == pytest.approx(80.0)
    assert t.loc["majority-only", "majority_accuracy"] == pytest.approx(80.0)
    assert t.loc["majority-only", "vs_majority"] == "n.s." and t.loc["majority-only", "p_vs_majority"] == 1.0
    assert t.loc["perfect", "routing_accuracy"] == pytest.approx(100.0)
    assert t.loc["perfect", "p_vs_majority"] == pytest.approx(2 * 0.5 ** 12)
    assert t.loc["perfect", "vs_majority"] == "better"
    md = build_report(store, tmp_path / "maj", with_figures=False).markdown.read_text()
    [warning] = [ln for ln in md.splitlines() if ln.startswith("**Not significantly better than the majority-class baseline**")]
    assert "`majority-only` (qc, onehot; R.A 80.0 vs. always `naive` 80.0, n.s.)" in warning
    assert "`perfect`" not in warning
    [(_, header, body)] = [tb for tb in parse_md_tables(md) if "vs. majority" in tb[1]]
    cells = {r[0]: dict(zip(header, r)) for r in body}
    assert cells["perfect"]["vs. majority"] == f"better (p={2 * 0.5 ** 12:.3g})"
    assert cells["majority-only"]["Majority-class R.A %"] == "naive 80.0"


def test_report_describes_what_ran(store, tmp_path):
    """Issue 30 item 6: imported questions are not counted as generated; querygen and validate are
    not 'missing' where the questions came with the dataset; the Corpora section lists the
    corpora the tables rest on and names the one stored but never processed."""
    rows = demo_rows(12)
    for q in rows["queries"]:
        q["origin"] = "imported"
    rows["query_checks"] = []
    rows["corpora"].append(dict(rows["corpora"][0], id=999, name="whole-corpus"))
    rows["documents"].append(dict(rows["documents"][0], id=99_999, corpus_id=999, external_id="w-1"))
    synthetic.insert_rows(store, rows)
    report = build_report(store, tmp_path / "ran", with_figures=False)
    md = report.markdown.read_text()
    n = len(rows["queries"])
    [(_, header, body)] = [t for t in parse_md_tables(md) if t[1] == ["Stage", "Table", "Rows"]]
    by_stage = {r[0]: r for r in body}
    assert by_stage["querygen"][1:] == ["queries (generated)", "0"]
    assert by_stage["ingest (questions)"][1:] == ["queries (imported)", f"{n:,}"]
    assert "querygen" not in report.empty_stages and "validate" not in report.empty_stages
    assert f"querygen and validate did not run: the {n:,} questions came with the dataset (ingest)." in md
    corpus = rows["corpora"][0]["name"]
    [(_, header, body)] = [t for t in parse_md_tables(md) if t[1][:2] == ["Corpus", "Docs processed"]]
    assert [r[0] for r in body] == [corpus]  # not the corpus nothing was processed of
    cells = dict(zip(header, body[0]))
    assert cells["Questions imported"] == str(n) and cells["Queries generated"] == "0"
    assert "Stored but not processed (in no table below): `whole-corpus` (1 documents, 0 accepted queries)." in md
    # the judge line once per judged section, not above every table
    line = "> Judge `judge-x`: **not calibrated**"
    heads = [ln for ln in md.splitlines() if ln.startswith("## ")]
    assert "## Paradigm results (judged)" in heads and "## Oracle labels and routers (judged)" in heads
    assert sum(ln.startswith(line) for ln in md.splitlines()) == 2


def test_report_progress_section_by_section_and_quiet_off_a_terminal(filled, duck_url, tmp_path, monkeypatch):
    """Issue 32: `report` shows a bar, one step per view, section and figure (like `routers
    train`), and draws nothing when stderr is not a terminal."""
    from ragrouter import console

    made = []

    class Bar:
        def __init__(self, total, desc, enabled=True, unit="run"):
            self.total, self.desc, self.enabled, self.unit, self.n, self.seen, self.closed = total, desc, enabled, unit, 0, [], False
            made.append(self)

        def set_postfix_str(self, s, refresh=True):
            self.seen.append(s)

        def update(self, n=1):
            self.n += n

        def close(self):
            self.closed = True

    monkeypatch.setattr(console, "bar", Bar)
    store, _ = filled
    report = build_report(store, tmp_path / "bar", show_progress=True)
    (b,) = made
    assert b.enabled and b.closed and b.unit == "step" and b.n == b.total
    assert b.total == len(REPORT_VIEWS) + 9 + 1 + len(report.figures)
    assert b.seen[:len(REPORT_VIEWS)] == [v for v, _, _ in REPORT_VIEWS.values()]
    assert {"Accuracy by query type (Table 2)", "Routers", "report.html"} <= set(b.seen)
    assert set(report.figures) <= set(b.seen)
    made.clear()
    res = CliRunner().invoke(report_command, ["--out", str(tmp_path / "cli"), "--judge", "judge-x"],
                             obj=Ctx(db_url=duck_url, config_path=None))
    assert res.exit_code == 0, res.output
    (b,) = made
    assert not b.enabled  # CliRunner's stderr is no terminal: no bar
