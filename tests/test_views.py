"""The SQL views of the paper's labels and tables (queries/views/1*.sql, 2*.sql) and the
example queries (queries/examples/*.sql).

* v_oracle_label equals a pure-Python reference on randomised stores (hypothesis): majority
  over judge samples with ties toward the worse label, newest config per run triple, accepted
  queries only, highest F1 among correct paradigms with alphabetical ties, cannot_answer.
* Tables 2 / 13 / 16 (and 15, 8/9, 6, router scores) equal pandas computations on the same data.
* Every view is selectable on DuckDB and PostgreSQL and gives the same rows on both.
* Every example query runs in a plain ``duckdb.connect(file)`` session and via ``cli.py sql -f``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.report import synthetic

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "queries" / "examples").glob("*.sql"))
LABEL_RANK = {"incorrect": 1, "incomplete": 2, "correct": 3}


# ---------------------------------------------------------------------------------------------
# Pure-Python references


def ref_majority(rows) -> dict[tuple[int, str], tuple[str, int, float]]:
    """(run, judge) -> (majority label, samples, agreement); ties toward the worse label."""
    votes: dict[tuple[int, str], Counter] = defaultdict(Counter)
    for j in rows["judgments"]:
        if not j["is_calibration"]:
            votes[(j["run_id"], j["judge"])][j["label"]] += 1
    out = {}
    for key, counter in votes.items():
        label = min(counter, key=lambda lab: (-counter[lab], LABEL_RANK.get(lab, 0), lab))
        n = sum(counter.values())
        out[key] = (label, n, counter[label] / n)
    return out


def ref_human(rows) -> dict[int, str]:
    """run id -> the reviewers' label (each reviewer's latest, the majority over reviewers, ties
    toward the worse label): where it exists it is the run's label (v_run_judged.label_source)."""
    latest: dict[tuple[int, str], dict] = {}
    for h in rows.get("human_labels", []):
        if h["kind"] != "run" or h["run_id"] is None:
            continue
        key = (h["run_id"], h["reviewer"])
        if key not in latest or (h["labelled_at"], h["id"]) > (latest[key]["labelled_at"], latest[key]["id"]):
            latest[key] = h
    votes: dict[int, Counter] = defaultdict(Counter)
    for (run_id, _), h in latest.items():
        votes[run_id][h["label"]] += 1
    return {r: min(c, key=lambda lab: (-c[lab], LABEL_RANK.get(lab, 0), lab)) for r, c in votes.items()}


def ref_latest(rows) -> dict[int, dict]:
    """run id -> run, for the newest run (created_at, then id) of each (query, paradigm, generator)."""
    best: dict[tuple, dict] = {}
    for r in rows["paradigm_runs"]:
        key = (r["query_id"], r["paradigm"], r["generator"])
        if key not in best or (r["created_at"], r["id"]) > (best[key]["created_at"], best[key]["id"]):
            best[key] = r
    return {r["id"]: r for r in best.values()}


def ref_f1(rows) -> dict[int, float | None]:
    """run id -> semantic F1 of the alphabetically first scorer."""
    chosen: dict[int, tuple[str, float | None]] = {}
    for s in rows["answer_scores"]:
        if s["metric"] == "semantic_f1":
            if s["run_id"] not in chosen or s["scorer"] < chosen[s["run_id"]][0]:
                chosen[s["run_id"]] = (s["scorer"], s["value"])
    return {k: v for k, (_, v) in chosen.items()}


def ref_reads_graph(run) -> bool:
    """Paper eq. 20: graph, hybrid and iterative over the graph read the graph (an iterative run
    only when it retrieved: iterations > 0)."""
    if run["paradigm"] in ("graph", "hybrid"):
        return True
    if run["paradigm"].startswith("iterative") and run["iterations"] > 0:
        default = "graph" if run["paradigm"] == "iterative" else "naive"
        return (run.get("config") or {}).get("base_retriever", default) == "graph"
    return False


def ref_build(rows) -> dict[int, tuple[float, float, int]]:
    """corpus id -> (build prompt tokens, build completion tokens, answered accepted queries):
    every distinct extract ledger call of the corpus's chunks once."""
    calls = {c["id"]: c for c in rows["llm_calls"] if c["stage"] == "extract"}
    chunk_corpus = {c["id"]: c["corpus_id"] for c in rows["chunks"]}
    seen: set[tuple[int, int]] = set()
    tin: dict[int, float] = defaultdict(float)
    tout: dict[int, float] = defaultdict(float)
    for e in rows["chunk_extractions"]:
        corpus = chunk_corpus[e["chunk_id"]]
        if e["llm_call_id"] in calls and (corpus, e["llm_call_id"]) not in seen:
            seen.add((corpus, e["llm_call_id"]))
            tin[corpus] += calls[e["llm_call_id"]]["prompt_tokens"]
            tout[corpus] += calls[e["llm_call_id"]]["completion_tokens"]
    ran = {r["query_id"] for r in rows["paradigm_runs"]}
    answered: dict[int, int] = defaultdict(int)
    for q in rows["queries"]:
        if q["status"] == "accepted" and q["id"] in ran:
            answered[q["corpus_id"]] += 1
    return {c["id"]: (tin[c["id"]], tout[c["id"]], answered[c["id"]]) for c in rows["corpora"]}


def ref_build_share(rows, run, build=None) -> tuple[float, float]:
    """(amortised construction in, out) that ``run`` carries."""
    build = build or ref_build(rows)
    corpus = {q["id"]: q["corpus_id"] for q in rows["queries"]}[run["query_id"]]
    tin, tout, n = build[corpus]
    if not ref_reads_graph(run) or n == 0:
        return 0.0, 0.0
    return tin / n, tout / n


PARADIGM_RANK = {p: i for i, p in enumerate(("llm_only", "naive", "graph", "hybrid", "iterative", "iterative_naive"))}


def ref_judged(rows) -> list[dict]:
    """One dict per (current run of an accepted query, judge) — the rows of v_run_judged."""
    queries = {q["id"]: q for q in rows["queries"]}
    corpora = {c["id"]: c["name"] for c in rows["corpora"]}
    majority = ref_majority(rows)
    human = ref_human(rows)
    f1 = ref_f1(rows)
    build = ref_build(rows)
    out = []
    for run in ref_latest(rows).values():
        q = queries[run["query_id"]]
        if q["status"] != "accepted":
            continue
        for (run_id, judge), (label, n, agree) in majority.items():
            if run_id != run["id"]:
                continue
            total = run["ret_in_tokens"] + run["ret_out_tokens"] + run["gen_in_tokens"] + run["gen_out_tokens"]
            total += sum(ref_build_share(rows, run, build))
            used = human.get(run["id"], label)
            out.append({"run_id": run["id"], "query_id": q["id"], "corpus": corpora[q["corpus_id"]],
                        "qtype": q["qtype"], "paradigm": run["paradigm"], "generator": run["generator"],
                        "judge": judge, "label": used, "correct": int(used == "correct"), "agreement": agree,
                        "judge_label": label, "human": int(run["id"] in human),
                        "total_tokens": total, "f1": f1.get(run["id"])})
    return out


def ref_oracle(rows) -> dict[tuple[int, str, str], tuple[str | None, int, int]]:
    """(query, generator, judge) -> (label, n_correct, n_paradigms). The one rule: among correct
    runs WITH an F1, the highest F1, then fewest total tokens, then the fixed paradigm order;
    none correct -> cannot_answer; correct runs but none scored -> None (undecided). Correct is
    the reviewers' label where a person reviewed the run (ref_human), else the judge's."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in ref_judged(rows):
        groups[(r["query_id"], r["generator"], r["judge"])].append(r)
    out = {}
    for key, runs in groups.items():
        correct = [r for r in runs if r["correct"]]
        scored = [r for r in correct if r["f1"] is not None]
        if scored:
            best = min(scored, key=lambda r: (-r["f1"], r["total_tokens"], PARADIGM_RANK.get(r["paradigm"], 100),
                                              r["paradigm"]))
            label = best["paradigm"]
        elif correct:
            label = None
        else:
            label = "cannot_answer"
        out[key] = (label, len(correct), len(runs))
    return out


# ---------------------------------------------------------------------------------------------
# Helpers


def fetch(conn, sql: str) -> pd.DataFrame:
    result = conn.execute(text(sql))
    return pd.DataFrame([tuple(r) for r in result.all()], columns=list(result.keys()))


def frames_of(rows) -> dict[str, pd.DataFrame]:
    return {name: pd.DataFrame(data) for name, data in rows.items()}


rows_strategy = st.builds(
    lambda seed, n_corpora, n_q, paradigms, p_correct, f1_values, max_samples, gens, tokens: synthetic.random_rows(
        seed, n_corpora=n_corpora, queries_per_corpus=n_q, paradigms=paradigms, p_correct=p_correct,
        f1_values=f1_values, max_samples=max_samples, generators=gens, with_router=False, token_values=tokens),
    seed=st.integers(0, 2**31),
    n_corpora=st.integers(1, 2),
    n_q=st.integers(1, 5),
    paradigms=st.lists(st.sampled_from(synthetic.PARADIGMS), min_size=1, max_size=6, unique=True),
    p_correct=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    f1_values=st.sampled_from([(0.5,), (0.2, 0.8), (0.1, 0.5, 0.9)]),
    max_samples=st.integers(1, 4),
    gens=st.sampled_from([("gen-a",), ("gen-a", "gen-b")]),
    tokens=st.sampled_from([None, (100,), (100, 200)]),  # token ties: the paradigm order decides
)


# ---------------------------------------------------------------------------------------------
# Property tests (each example inserted in a transaction that is rolled back)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(rows=rows_strategy)
def test_oracle_label_matches_python_reference(store, rows):
    with store.connect() as conn:
        trans = conn.begin()
        try:
            synthetic.insert_rows(conn, rows)
            got = fetch(conn, "SELECT query_id, generator, judge, label, n_correct, n_paradigms FROM v_oracle_label")
            judgment = fetch(conn, "SELECT run_id, judge, label, n_samples, agreement FROM v_judgment")
            outcomes = fetch(conn, "SELECT query_id, generator, judge, paradigm, correct, tokens, f1 FROM v_router_outcomes")
        finally:
            trans.rollback()
    expected = ref_oracle(rows)
    label_of = lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else v  # noqa: E731
    actual = {(int(r.query_id), r.generator, r.judge): (label_of(r.label), int(r.n_correct), int(r.n_paradigms))
              for r in got.itertuples(index=False)}
    assert len(got) == len(actual)  # one row per (query, generator, judge)
    assert actual == expected
    majority = ref_majority(rows)
    assert {(int(r.run_id), r.judge): (r.label, int(r.n_samples), pytest.approx(r.agreement))
            for r in judgment.itertuples(index=False)} == majority

    # The router library's oracle (ragrouter.routers.dataset.oracle_labels, numpy) on the pivoted
    # outcomes (NaN where a paradigm did not run / was not judged / has no F1) equals the view.
    from ragrouter.routers.dataset import oracle_labels

    if outcomes.empty:
        assert got.empty
        return
    wide = outcomes.set_index(["query_id", "generator", "judge", "paradigm"])[["correct", "tokens", "f1"]].unstack("paradigm")
    flat = pd.DataFrame(index=wide.index)
    paradigms = sorted(outcomes["paradigm"].unique())  # any column order: the rule must not depend on it
    for prefix in ("correct", "tokens", "f1"):
        for p in paradigms:
            flat[f"{prefix}__{p}"] = pd.to_numeric(wide[(prefix, p)], errors="coerce")
    py = dict(zip([(int(q), g, j) for q, g, j in flat.index], oracle_labels(flat, paradigms)))
    assert py == {k: v[0] for k, v in actual.items()}


def pandas_judged(rows) -> pd.DataFrame:
    """v_run_judged computed with pandas (independently of the Python reference above)."""
    f = frames_of(rows)
    runs = f["paradigm_runs"].sort_values(["created_at", "id"])
    latest = runs.drop_duplicates(["query_id", "paradigm", "generator"], keep="last")
    q = f["queries"].merge(f["corpora"][["id", "name"]].rename(columns={"id": "corpus_id", "name": "corpus"}),
                           on="corpus_id")
    latest = latest.merge(q[["id", "corpus", "qtype", "status"]].rename(columns={"id": "query_id"}), on="query_id")
    latest = latest[latest["status"] == "accepted"].copy()
    latest["total_tokens"] = latest[["ret_in_tokens", "ret_out_tokens", "gen_in_tokens", "gen_out_tokens"]].sum(axis=1)
    build = ref_build(rows)
    latest["total_tokens"] += [sum(ref_build_share(rows, r, build)) for r in latest.to_dict("records")]
    j = f["judgments"]
    j = j[~j["is_calibration"]]
    counts = j.groupby(["run_id", "judge", "label"]).size().rename("n").reset_index()
    counts["rank"] = counts["label"].map(LABEL_RANK).fillna(0)
    counts = counts.sort_values(["run_id", "judge", "n", "rank", "label"], ascending=[True, True, False, True, True])
    maj = counts.drop_duplicates(["run_id", "judge"], keep="first")[["run_id", "judge", "label"]]
    judged = latest.rename(columns={"id": "run_id"}).merge(maj, on="run_id")
    h = f.get("human_labels", pd.DataFrame())
    if not h.empty:  # the reviewers' label outranks the judge's: latest per reviewer, majority, ties worse
        h = h[(h["kind"] == "run") & h["run_id"].notna()].sort_values(["labelled_at", "id"])
        h = h.drop_duplicates(["run_id", "reviewer"], keep="last")
        votes = h.groupby(["run_id", "label"]).size().rename("n").reset_index()
        votes["rank"] = votes["label"].map(LABEL_RANK).fillna(0)
        votes = votes.sort_values(["run_id", "n", "rank", "label"], ascending=[True, False, True, True])
        human = votes.drop_duplicates("run_id", keep="first").set_index("run_id")["label"]
        judged["label"] = [human.get(r, lab) for r, lab in zip(judged["run_id"], judged["label"])]
    judged["correct"] = (judged["label"] == "correct").astype(int)
    return judged


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(rows=rows_strategy)
def test_tables_2_13_16_equal_pandas(store, rows):
    with store.connect() as conn:
        trans = conn.begin()
        try:
            synthetic.insert_rows(conn, rows)
            by_type = fetch(conn, "SELECT * FROM v_accuracy_by_type")
            overall = fetch(conn, "SELECT * FROM v_accuracy_overall")
            bd = fetch(conn, "SELECT * FROM v_judgment_breakdown")
            tok = fetch(conn, "SELECT * FROM v_token_breakdown")
        finally:
            trans.rollback()
    from ragrouter.report.data import with_totals

    # safe to aggregate: the types hold no total, and their runs add up to the overall view's
    assert "all" not in set(by_type.get("qtype", [])) and "qtype" not in overall.columns
    if not by_type.empty:
        assert by_type["n"].sum() == overall["n"].sum()
    acc = with_totals(by_type, overall)
    if not rows["paradigm_runs"] or not rows["judgments"]:
        assert acc.empty and bd.empty and (tok.empty or bool(rows["paradigm_runs"]))
        return
    judged = pandas_judged(rows)
    keys = ["corpus", "generator", "judge", "paradigm", "qtype"]
    both = pd.concat([judged, judged.assign(qtype="all")], ignore_index=True)

    # Table 2
    exp = both.groupby(keys).agg(n=("correct", "size"), correct_pct=("correct", "mean"),
                                 avg_tokens=("total_tokens", "mean")).reset_index()
    exp["correct_pct"] *= 100
    got = acc.sort_values(keys).reset_index(drop=True)
    exp = exp.sort_values(keys).reset_index(drop=True)
    assert list(got[keys].itertuples(index=False)) == list(exp[keys].itertuples(index=False))
    assert got["n"].tolist() == exp["n"].tolist()
    assert got["correct_pct"].tolist() == pytest.approx(exp["correct_pct"].tolist())
    assert got["avg_tokens"].tolist() == pytest.approx(exp["avg_tokens"].tolist())
    # Every cell's 95 % Wilson interval, computed in SQL, equals statsmodels'.
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(got["n_correct"].to_numpy(), got["n"].to_numpy(), alpha=0.05, method="wilson")
    assert got["ci_low"].tolist() == pytest.approx((100 * lo).tolist(), abs=1e-9)
    assert got["ci_high"].tolist() == pytest.approx((100 * hi).tolist(), abs=1e-9)

    # Table 13
    for lab in ("correct", "incorrect", "incomplete"):
        both[f"is_{lab}"] = (both["label"] == lab) * 100.0
    exp13 = both.groupby(keys)[["is_correct", "is_incorrect", "is_incomplete"]].mean().reset_index().sort_values(keys)
    got13 = bd.sort_values(keys).reset_index(drop=True)
    assert list(got13[keys].itertuples(index=False)) == list(exp13[keys].itertuples(index=False))
    for lab in ("correct", "incorrect", "incomplete"):
        assert got13[f"{lab}_pct"].tolist() == pytest.approx(exp13[f"is_{lab}"].tolist())
    lo, hi = proportion_confint(got13["n_correct"].to_numpy(), got13["n"].to_numpy(), alpha=0.05, method="wilson")
    assert got13["ci_low"].tolist() == pytest.approx((100 * lo).tolist(), abs=1e-9)
    assert got13["ci_high"].tolist() == pytest.approx((100 * hi).tolist(), abs=1e-9)
    assert got13["is_total"].tolist() == (got13["qtype"] == "all").astype(int).tolist()
    sums = got13[["correct_pct", "incorrect_pct", "incomplete_pct"]].sum(axis=1).tolist()
    assert sums == pytest.approx([100.0] * len(sums))

    # Table 16 (no judge needed: every current run of an accepted query)
    f = frames_of(rows)
    runs = f["paradigm_runs"].sort_values(["created_at", "id"]).drop_duplicates(
        ["query_id", "paradigm", "generator"], keep="last")
    q = f["queries"].merge(f["corpora"].rename(columns={"id": "corpus_id", "name": "corpus"})[["corpus_id", "corpus"]])
    runs = runs.merge(q.rename(columns={"id": "query_id"})[["query_id", "corpus", "corpus_id", "status"]])
    runs = runs[runs["status"] == "accepted"].copy()
    runs["total_inference"] = runs[["ret_in_tokens", "ret_out_tokens", "gen_in_tokens", "gen_out_tokens"]].sum(axis=1)
    build = ref_build(rows)
    shares = [ref_build_share(rows, r, build) for r in runs.to_dict("records")]
    runs["ret_in"] = runs["ret_in_tokens"] + [a for a, _ in shares]
    runs["ret_out"] = runs["ret_out_tokens"] + [b for _, b in shares]
    runs["total"] = runs["total_inference"] + [a + b for a, b in shares]
    k16 = ["corpus", "paradigm", "generator"]
    exp16 = runs.groupby(k16 + ["corpus_id"]).agg(
        n=("id", "size"), avg_context_tokens=("context_tokens", "mean"), ret_in=("ret_in", "sum"),
        ret_out=("ret_out", "sum"), gen_in=("gen_in_tokens", "sum"), gen_out=("gen_out_tokens", "sum"),
        total=("total", "sum"), total_inference=("total_inference", "sum"),
        ret_in_inference=("ret_in_tokens", "sum")).reset_index()
    ext = f["chunk_extractions"].merge(f["chunks"][["id", "corpus_id"]].rename(columns={"id": "chunk_id"}))
    calls = f["llm_calls"][f["llm_calls"]["stage"] == "extract"]
    ext = ext.merge(calls.rename(columns={"id": "llm_call_id"})[["llm_call_id", "prompt_tokens", "completion_tokens"]])
    build = ext.drop_duplicates(["corpus_id", "llm_call_id"]).assign(
        t=lambda d: d["prompt_tokens"] + d["completion_tokens"]).groupby("corpus_id")["t"].sum()
    n_answered = q[(q["status"] == "accepted") & q["id"].isin(f["paradigm_runs"]["query_id"])].groupby("corpus_id").size()
    # the construction of the graph a group's runs read: none for a group no run of which read it
    runs["reads"] = [ref_reads_graph(r) for r in runs.to_dict("records")]
    reads = runs.groupby(k16)["reads"].any()
    exp16["reads"] = [bool(reads.loc[tuple(k)]) for k in exp16[k16].itertuples(index=False)]
    exp16["graph_build_tokens"] = exp16["corpus_id"].map(build).fillna(0).where(exp16["reads"], 0)
    exp16["graph_build_per_query"] = (exp16["corpus_id"].map(build).fillna(0) / exp16["corpus_id"].map(n_answered)
                                      ).where(exp16["reads"])
    exp16 = exp16.sort_values(k16).reset_index(drop=True)
    got16 = tok.sort_values(k16).reset_index(drop=True)
    assert list(got16[k16].itertuples(index=False)) == list(exp16[k16].itertuples(index=False))
    for col in ("n", "gen_in", "gen_out", "graph_build_tokens"):
        assert got16[col].astype(int).tolist() == exp16[col].astype(int).tolist(), col
    for col in ("avg_context_tokens", "graph_build_per_query", "ret_in", "ret_out", "total", "total_inference",
                "ret_in_inference"):
        assert got16[col].astype(float).tolist() == pytest.approx(exp16[col].astype(float).tolist(), nan_ok=True), col


# ---------------------------------------------------------------------------------------------
# Hand-made edge cases


def test_judgment_majority_ties_and_latest_config(store):
    base = synthetic.random_rows(3, n_corpora=1, queries_per_corpus=1, paradigms=("naive", "graph", "hybrid"),
                                 generators=("g",), judges=(), with_router=False, p_missing_run=0.0,
                                 p_old_config=0.0)
    runs = {r["paradigm"]: r for r in base["paradigm_runs"]}
    base["queries"][0]["status"] = "accepted"
    t = synthetic.T0

    def j(run, label, s, judge="J", calib=False):
        base["judgments"].append({"id": len(base["judgments"]) + 1, "run_id": run["id"], "judge": judge,
                                  "sample_index": s, "label": label, "is_calibration": calib, "created_at": t})

    # naive: correct vs incorrect tie -> incorrect; graph: correct vs incomplete -> incomplete;
    # hybrid: 2 correct + 1 incomplete -> correct (2/3), and a calibration 'incorrect' is ignored.
    j(runs["naive"], "correct", 0), j(runs["naive"], "incorrect", 1)
    j(runs["graph"], "correct", 0), j(runs["graph"], "incomplete", 1)
    for s, lab in enumerate(("correct", "incomplete", "correct")):
        j(runs["hybrid"], lab, s)
    j(runs["hybrid"], "incorrect", 9, calib=True)
    # A newer config of 'naive' written in the same instant: the higher id wins. Its F1 (0.99)
    # beats every synthetic F1, so it becomes the oracle label among the two correct paradigms.
    newer = dict(runs["naive"], id=1000, config_hash="cfg-new")
    base["paradigm_runs"].append(newer)
    j(newer, "correct", 0)
    base["answer_scores"].append({"id": 10_000, "run_id": 1000, "metric": "semantic_f1", "scorer": "enc-a",
                                  "value": 0.99, "created_at": t})
    synthetic.insert_rows(store, base)
    with store.connect() as conn:
        got = {r.run_id: (r.label, r.n_samples, round(r.agreement, 4))
               for r in conn.execute(text("SELECT * FROM v_judgment"))}
        latest = {r.paradigm: r.run_id for r in conn.execute(text("SELECT * FROM v_run_latest"))}
        oracle = conn.execute(text("SELECT label, n_correct, n_paradigms, label_f1 FROM v_oracle_label")).one()
        cost = {r.run_id: r.is_latest for r in conn.execute(text("SELECT * FROM v_run_cost"))}
    assert got[runs["naive"]["id"]] == ("incorrect", 2, 0.5)
    assert got[runs["graph"]["id"]] == ("incomplete", 2, 0.5)
    assert got[runs["hybrid"]["id"]] == ("correct", 3, round(2 / 3, 4))
    assert latest["naive"] == 1000 and cost[1000] == 1 and cost[runs["naive"]["id"]] == 0
    assert (oracle.label, oracle.n_correct, oracle.n_paradigms, oracle.label_f1) == ("naive", 2, 3, 0.99)


def test_other_views_equal_python(store):
    rows = synthetic.random_rows(11, n_corpora=3, queries_per_corpus=8)
    synthetic.insert_rows(store, rows)
    f = frames_of(rows)
    with store.connect() as conn:
        prof = fetch(conn, "SELECT * FROM v_corpus_profile ORDER BY corpus_id")
        val = fetch(conn, "SELECT * FROM v_query_validation")
        scores = fetch(conn, "SELECT * FROM v_router_scores")
        quality = fetch(conn, "SELECT * FROM v_quality")
        dataset = fetch(conn, "SELECT * FROM v_router_dataset")
        outcomes = fetch(conn, "SELECT * FROM v_router_outcomes")

    # Tables 8/9: the newest value per (corpus, metric); counts of documents and chunks.
    cm = f["corpus_metrics"].sort_values(["created_at", "id"]).drop_duplicates(["corpus_id", "metric"], keep="last")
    for r in prof.itertuples(index=False):
        mine = cm[cm["corpus_id"] == r.corpus_id].set_index("metric")["value"]
        for metric in synthetic.METRICS:
            v = getattr(r, metric)
            assert (v is None or (isinstance(v, float) and math.isnan(v))) if metric not in mine else v == pytest.approx(mine[metric])
        assert r.n_documents == (f["documents"]["corpus_id"] == r.corpus_id).sum()
        assert r.n_chunks == (f["chunks"]["corpus_id"] == r.corpus_id).sum()
        assert r.total_tokens == f["documents"].loc[f["documents"]["corpus_id"] == r.corpus_id, "n_tokens"].sum()

    # Table 6: generated = accepted + rejected, passed = accepted, per type label and 'all'.
    q = f["queries"].merge(f["corpora"][["id", "name"]].rename(columns={"id": "corpus_id", "name": "corpus"}))
    gen = q[q["origin"] == "generated"].copy()
    gen["t"] = [f"{int(h)}-hop" if t == "reasoning" and h == h and h is not None else t
                for t, h in zip(gen["qtype"], gen["hops"])]
    gen = pd.concat([gen, gen.assign(t="all")])
    exp = gen.groupby(["corpus", "t"]).agg(generated=("status", lambda s: s.isin(["accepted", "rejected"]).sum()),
                                            passed=("status", lambda s: (s == "accepted").sum()))
    got = val.set_index(["corpus", "qtype"])[["generated", "passed"]]
    assert got.sort_index().to_dict() == exp.rename_axis(["corpus", "qtype"]).sort_index().to_dict()
    for r in val.itertuples(index=False):
        if r.generated:
            assert r.pass_rate_pct == pytest.approx(100.0 * r.passed / r.generated)

    # Table 15: mean scores over current runs of accepted queries (first scorer); correct % per judge.
    queries = {x["id"]: x for x in rows["queries"]}
    corpora = {c["id"]: c["name"] for c in rows["corpora"]}
    f1 = ref_f1(rows)
    groups = defaultdict(list)
    for run in ref_latest(rows).values():
        qq = queries[run["query_id"]]
        if qq["status"] == "accepted":
            groups[(corpora[qq["corpus_id"]], run["generator"], run["paradigm"])].append(f1.get(run["id"]))
    judged = pd.DataFrame(ref_judged(rows))
    assert set(zip(quality["corpus"], quality["generator"], quality["paradigm"])) == set(groups)
    for r in quality.itertuples(index=False):
        vals = [v for v in groups[(r.corpus, r.generator, r.paradigm)] if v is not None]
        assert r.n_runs == len(groups[(r.corpus, r.generator, r.paradigm)]) and r.n_scored == len(vals)
        if vals:
            assert r.semantic_f1 == pytest.approx(sum(vals) / len(vals))
        else:
            assert r.semantic_f1 is None or math.isnan(r.semantic_f1)
        if r.judge is None:
            continue
        part = judged[(judged["corpus"] == r.corpus) & (judged["generator"] == r.generator)
                      & (judged["paradigm"] == r.paradigm) & (judged["judge"] == r.judge)]
        assert r.n_judged == len(part)
        assert r.correct_pct == pytest.approx(100.0 * part["correct"].mean())

    # Router dataset: the SQL pivot agrees with the long form, and the label with the reference.
    oracle = {k: v for k, v in ref_oracle(rows).items() if v[0] is not None}
    assert len(dataset) == len(oracle)
    for r in dataset.itertuples(index=False):
        assert r.label == oracle[(r.query_id, r.generator, r.judge)][0]
        for o in outcomes[(outcomes["query_id"] == r.query_id) & (outcomes["generator"] == r.generator)
                          & (outcomes["judge"] == r.judge)].itertuples(index=False):
            assert getattr(r, f"correct__{o.paradigm}") == o.correct
            assert getattr(r, f"tokens__{o.paradigm}") == pytest.approx(o.tokens)

    # Router scores: pooled routing accuracy, the training-fold cannot_answer fallback and the
    # routed outcome (no router_fold_metrics here: the fold-mean headline columns are NULL).
    preds = f["router_predictions"]
    out_idx = {(o.query_id, o.generator, o.judge, o.paradigm): o for o in outcomes.itertuples(index=False)}
    judges = sorted(outcomes["judge"].unique())
    for (router, features, encoder, generator, dataset_name), part in preds.groupby(
            ["router", "features", "encoder", "generator", "dataset"]):
        fallback = {}
        for k in part["fold"].unique():
            labels = Counter(x for x in part.loc[part["fold"] != k, "true_label"] if x != "cannot_answer")
            fallback[k] = min(labels, key=lambda lab: (-labels[lab], lab)) if labels else None
        routed = [fallback[k] if p == "cannot_answer" else p for p, k in zip(part["predicted"], part["fold"])]
        ra = (part["predicted"] == part["true_label"]).mean()
        for judge in (judges if dataset_name == "store" else [None]):
            row = scores[(scores["router"] == router) & (scores["features"] == features)
                         & (scores["dataset"] == dataset_name)
                         & ((scores["judge"] == judge) if judge else scores["judge"].isna())]
            assert len(row) == 1
            row = row.iloc[0]
            assert row["n"] == len(part) and row["pooled_routing_accuracy"] == pytest.approx(ra)
            # the routing accuracy's Wilson interval (the view's own SQL copy) equals statsmodels'
            n_hit = int((part["predicted"] == part["true_label"]).sum())
            lo, hi = proportion_confint(n_hit, len(part), method="wilson")
            assert (row["routing_accuracy_ci_low"], row["routing_accuracy_ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
            assert row["routing_accuracy"] is None or math.isnan(row["routing_accuracy"])
            hits = [out_idx.get((qid, generator, judge, p)) for qid, p in zip(part["query_id"], routed)] if judge else []
            hits = [h for h in hits if h is not None]
            assert row["n_outcomes"] == len(hits)
            if hits:
                assert row["pooled_correct_rate"] == pytest.approx(sum(h.correct for h in hits) / len(hits))
                assert row["pooled_avg_tokens"] == pytest.approx(sum(h.tokens for h in hits) / len(hits))
                lo, hi = proportion_confint(sum(h.correct for h in hits), len(hits), method="wilson")
                assert (row["correct_rate_ci_low"], row["correct_rate_ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
            else:
                assert row["pooled_correct_rate"] is None or math.isnan(row["pooled_correct_rate"])


@pytest.mark.parametrize("hit", ["all", "none"])
def test_router_wilson_intervals_at_zero_and_n(store, hit):
    """v_router_scores' routing-accuracy interval at k = 0 and k = n equals statsmodels'
    (Tables 2 / 13 meet these edges in the hypothesis test's one-run cells)."""
    rows = synthetic.random_rows(11, n_corpora=3, queries_per_corpus=8)
    for r in rows["router_predictions"]:
        r["predicted"] = r["true_label"] if hit == "all" else ("naive" if r["true_label"] != "naive" else "graph")
    synthetic.insert_rows(store, rows)
    with store.connect() as conn:
        scores = fetch(conn, "SELECT * FROM v_router_scores")
    assert len(scores) > 0
    for r in scores.itertuples(index=False):
        k = r.n if hit == "all" else 0
        assert r.pooled_routing_accuracy == (1.0 if hit == "all" else 0.0)
        lo, hi = proportion_confint(k, r.n, method="wilson")
        assert (r.routing_accuracy_ci_low, r.routing_accuracy_ci_high) == pytest.approx((lo, hi), abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Portability: every view on DuckDB and PostgreSQL, same rows


def _norm(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "is_finite"):  # Decimal
        value = float(value)
    if isinstance(value, float):
        return round(value, 6)
    return value


def _rows(conn, sql: str) -> tuple[list[str], list[tuple]]:
    result = conn.execute(text(sql))
    cols = list(result.keys())
    rows = sorted((tuple(_norm(v) for v in r) for r in result.all()), key=lambda t: json.dumps(t, default=str))
    return cols, rows


def test_every_view_and_example_portable_to_postgres(store, pg_store):
    rows = synthetic.random_rows(5, n_corpora=2, queries_per_corpus=6)
    synthetic.insert_rows(store, rows)
    synthetic.insert_rows(pg_store, rows)
    names = [migrate.view_name(p.read_text(), p) for p in migrate.view_files()]
    assert {"v_judgment", "v_run_latest", "v_run_cost", "v_oracle_label", "v_accuracy_by_type",
            "v_judgment_breakdown", "v_quality", "v_token_breakdown", "v_corpus_profile", "v_query_validation",
            "v_router_dataset", "v_router_outcomes", "v_router_scores"} <= set(names)
    statements = [(n, f"SELECT * FROM {n}") for n in names]
    statements += [(p.name, p.read_text().strip().rstrip(";")) for p in EXAMPLES]
    with store.connect() as duck, pg_store.connect() as pg:
        for name, sql in statements:
            dcols, drows = _rows(duck, sql)
            pcols, prows = _rows(pg, sql)
            assert dcols == pcols, name
            assert len(drows) == len(prows), name
            assert drows == prows, name
            # v_judge_calibration is checked on both databases in tests/test_calibration.py
            if name.startswith("v_") and name not in ("v_tokens_by_worker_run", "v_judge_calibration"):
                assert drows, f"{name} is empty on the synthetic store"


# ---------------------------------------------------------------------------------------------
# Example queries: plain duckdb and cli.py sql -f


def test_examples_are_commented_questions():
    assert len(EXAMPLES) >= 5
    for path in EXAMPLES:
        first = path.read_text().splitlines()[0]
        assert first.startswith("-- ") and first.rstrip().endswith("?"), path.name


def test_examples_run_in_plain_duckdb_and_cli(tmp_path):
    db = tmp_path / "store.duckdb"
    url = f"duckdb:///{db}"
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    synthetic.insert_rows(engine, synthetic.random_rows(9, n_corpora=2, queries_per_corpus=8))
    eng.dispose_all()  # release the file for other sessions

    plain = {}
    con = duckdb.connect(str(db), read_only=True)
    try:
        for path in EXAMPLES:
            plain[path.name] = con.execute(path.read_text()).fetchall()
    finally:
        con.close()
    assert sum(1 for r in plain.values() if r) >= 5  # the synthetic store exercises them

    # Every file through the real `cli.py sql -f` command (in-process: click's runner) …
    from click.testing import CliRunner

    sys.path.insert(0, str(REPO))
    try:
        import cli as cli_module
    finally:
        sys.path.remove(str(REPO))
    runner = CliRunner()
    outputs = {}
    try:
        for path in EXAMPLES:
            res = runner.invoke(cli_module.cli, ["--db", url, "sql", "-f", str(path), "--format", "json"])
            assert res.exit_code == 0, f"{path.name}: {res.output}"
            outputs[path.name] = json.loads(res.stdout) if res.stdout.strip() else []
            assert len(outputs[path.name]) == len(plain[path.name]), path.name
    finally:
        eng.dispose_all()
    # … and one through a separate `python cli.py` process, as a user runs it.
    path = REPO / "queries" / "examples" / "tokens_per_correct_answer.sql"
    out = subprocess.run([sys.executable, str(REPO / "cli.py"), "sql", "-f", str(path), "--format", "json"],
                         capture_output=True, text=True, env={**os.environ, "RAGROUTER_DB": url}, cwd=REPO,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    # Token sums are DOUBLE (amortised construction): summation order may change the last bit.
    rounded = lambda rows: [{k: round(v, 6) if isinstance(v, float) else v for k, v in r.items()}  # noqa: E731
                            for r in rows]
    assert rounded(json.loads(out.stdout)) == rounded(outputs[path.name])


def test_views_are_safe_to_aggregate_on_duckdb_and_postgres(store, pg_store):
    """Issue 32: no total row beside the rows it totals (or a marker column), no pseudo-paradigm
    among the real ones, one name per concept (qtype) in every view; on both databases."""
    rows = synthetic.random_rows(11, n_corpora=2, queries_per_corpus=6)
    run = dict(rows["paradigm_runs"][0])  # a judge calibration case on a real query
    run.update(id=max(r["id"] for r in rows["paradigm_runs"]) + 1, paradigm="calibration", generator="calib-v1",
               config_hash="gold")
    rows["paradigm_runs"].append(run)
    rows["judgments"].append({**rows["judgments"][0], "id": max(j["id"] for j in rows["judgments"]) + 1,
                              "run_id": run["id"], "is_calibration": True, "label": "correct"})
    names = [migrate.view_name(p.read_text(), p) for p in migrate.view_files()]
    for engine in (store, pg_store):
        synthetic.insert_rows(engine, rows)
        with engine.connect() as conn:
            scalar = lambda sql: conn.execute(text(sql)).scalar()  # noqa: E731
            judged = scalar("SELECT COUNT(*) FROM v_run_judged")
            assert judged > 0
            assert scalar("SELECT COUNT(*) FROM v_accuracy_by_type WHERE qtype = 'all'") == 0
            # a naive sum over the types counts every judged run once, as the totals' view does
            assert scalar("SELECT SUM(n) FROM v_accuracy_by_type") == judged
            assert scalar("SELECT SUM(n) FROM v_accuracy_overall") == judged
            assert scalar("SELECT SUM(n) FROM v_judgment_breakdown WHERE is_total = 0") == judged
            assert scalar("SELECT SUM(n) FROM v_judgment_breakdown WHERE is_total = 1") == judged
            # the calibration case is in paradigm_runs and v_judge_calibration, never among the paradigms
            assert scalar("SELECT COUNT(*) FROM paradigm_runs WHERE paradigm = 'calibration'") == 1
            assert scalar("SELECT COUNT(*) FROM v_run_latest WHERE paradigm = 'calibration'") == 0
            assert scalar("SELECT COUNT(*) FROM v_judge_calibration") == 1
            # one name per concept: the query type is qtype in every view
            cols = {n: list(conn.execute(text(f"SELECT * FROM {n} WHERE 1 = 0")).keys()) for n in names}
            assert not [n for n, c in cols.items() if "query_type" in c]
            for n in ("v_run_latest", "v_accuracy_by_type", "v_router_outcomes", "v_router_dataset",
                      "v_judgment_breakdown", "v_query_validation", "v_query_rejections"):
                assert "qtype" in cols[n], n
            # every view that puts an 'all' total beside its types marks it
            pooled = [migrate.view_name(p.read_text(), p) for p in migrate.view_files()
                      if "'all' AS qtype" in p.read_text()]
            assert "v_query_validation" in pooled
            assert not [n for n in pooled if "is_total" not in cols[n]]
