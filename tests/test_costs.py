"""Costs as paper eq. 16-20 define them (#14.2): graph construction amortised into every paradigm
that reads the graph (graph, hybrid, iterative over the graph), in v_run_latest, and read from
there by Table 2 (v_accuracy_by_type), Table 16 (v_token_breakdown), the oracle's tie-break and
the router dataset. Every number below is a hand computation on a hand-made fixture."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ragrouter.report import synthetic
from ragrouter.db.frames import read_sql
from ragrouter.report.data import router_dataset

T = synthetic.T0


def fixture_rows() -> dict[str, list[dict]]:
    rows = {name: [] for name in synthetic.TABLE_ORDER}
    rows["corpora"].append(dict(id=1, name="c1", source_format="synthetic", created_at=T))
    rows["corpora"].append(dict(id=2, name="c2", source_format="synthetic", created_at=T))
    rows["worker_runs"].append(dict(id=1, host="h", pid=1, command="run", started_at=T))
    rows["documents"].append(dict(id=1, corpus_id=1, external_id="d1", title="D", text="x", n_tokens=100, created_at=T))
    rows["documents"].append(dict(id=2, corpus_id=1, external_id="d2", title="E", text="y", n_tokens=50, created_at=T))
    for cid in (1, 2, 3):  # chunks 1, 2 of doc 1 and chunk 3 of doc 2 (never processed)
        rows["chunks"].append(dict(id=cid, document_id=1 if cid < 3 else 2, corpus_id=1, chunker="k", chunk_index=cid,
                                   text=f"c{cid}", n_tokens=10, token_start=0, token_end=1, char_start=0, char_end=1,
                                   created_at=T))

    def call(i, stage, pt, ct):
        rows["llm_calls"].append(dict(id=i, request_hash=f"{i:064x}", kind="chat", backend="m", model="m", stage=stage,
                                      phase=None, prompt_tokens=pt, completion_tokens=ct, token_source="usage",
                                      latency_s=0.1, attempts=1, worker_run_id=1, created_at=T))

    # Construction: chunk 1 -> call 1 (500 in, 100 out); chunk 2 -> call 2 (300 in, 60 out) and a
    # second extractor reusing call 1 (a cache hit: paid once). Total 800 in + 160 out = 960.
    call(1, "extract", 500, 100)
    call(2, "extract", 300, 60)
    call(3, "answer", 7, 7)  # not construction
    rows["chunk_extractions"] += [dict(id=1, chunk_id=1, extractor="e1", n_triples=3, llm_call_id=1, created_at=T),
                                  dict(id=2, chunk_id=2, extractor="e1", n_triples=2, llm_call_id=2, created_at=T),
                                  dict(id=3, chunk_id=2, extractor="e2", n_triples=2, llm_call_id=1, created_at=T)]
    # Queries of c1: q1..q3 accepted and answered, q4 accepted but never run, q5 rejected.
    for qid, status in ((1, "accepted"), (2, "accepted"), (3, "accepted"), (4, "accepted"), (5, "rejected")):
        rows["queries"].append(dict(id=qid, corpus_id=1, external_id=f"q{qid}", origin="imported", qtype="factual",
                                    hops=None, question=f"Q{qid}?", answer="A.", status=status, created_at=T))
    rid = 0
    # (paradigm, base retriever in the config) -> ret_in, ret_out, gen_in, gen_out
    plan = [("llm_only", None, 0, 0, 20, 5), ("naive", None, 0, 0, 400, 10), ("graph", None, 30, 6, 300, 10),
            ("hybrid", None, 30, 6, 600, 10), ("iterative", "graph", 80, 20, 200, 10),
            ("iterative_naive", "naive", 80, 20, 200, 10)]
    for qid in (1, 2, 3):
        for paradigm, base, ri, ro, gi, go in plan:
            rid += 1
            config = {"paradigm": paradigm} | ({"base_retriever": base} if base else {})
            rows["paradigm_runs"].append(dict(
                id=rid, query_id=qid, paradigm=paradigm, generator="g", config_hash="h", config=config, answer="a",
                retrieved_chunk_ids=[] if paradigm == "llm_only" else [1], context_tokens=0 if paradigm == "llm_only" else 100,
                iterations=1 if paradigm.startswith("iterative") else 0, trace={}, ret_in_tokens=ri, ret_out_tokens=ro,
                gen_in_tokens=gi, gen_out_tokens=go, latency_s=0.1, created_at=T))
            # every run correct with the same F1: the oracle's tie-break is the tokens
            rows["judgments"].append(dict(id=rid, run_id=rid, judge="J", sample_index=0, label="correct",
                                          reason="", is_calibration=False, created_at=T))
            rows["answer_scores"].append(dict(id=rid, run_id=rid, metric="semantic_f1", scorer="s", value=0.5,
                                              created_at=T))
    return rows


BUILD_IN, BUILD_OUT, ANSWERED = 800, 160, 3
SHARE_IN, SHARE_OUT = BUILD_IN / ANSWERED, BUILD_OUT / ANSWERED  # 266.67, 53.33
INFERENCE = {"llm_only": 25, "naive": 410, "graph": 346, "hybrid": 646, "iterative": 310, "iterative_naive": 310}
READS_GRAPH = {"llm_only": 0, "naive": 0, "graph": 1, "hybrid": 1, "iterative": 1, "iterative_naive": 0}


@pytest.fixture
def costs_store(store):
    synthetic.insert_rows(store, fixture_rows())
    return store


def test_construction_amortised_by_hand(costs_store):
    store = costs_store
    build = read_sql(store, "SELECT * FROM v_graph_build WHERE corpus = 'c1'").iloc[0]
    assert (build.build_in_tokens, build.build_out_tokens, build.graph_build_tokens) == (800, 160, 960)
    assert build.n_queries_answered == 3 and build.n_chunks_extracted == 2 and build.n_build_calls == 2
    assert build.build_per_query == pytest.approx(320.0)
    latest = read_sql(store, "SELECT * FROM v_run_latest")
    assert len(latest) == 18
    for r in latest.itertuples(index=False):
        share = 320.0 if READS_GRAPH[r.paradigm] else 0.0
        assert r.reads_graph == READS_GRAPH[r.paradigm], r.paradigm
        assert r.inference_tokens == INFERENCE[r.paradigm]
        assert r.build_tokens == pytest.approx(share)
        assert r.total_tokens == pytest.approx(INFERENCE[r.paradigm] + share)
    # graph: 346 + 320 = 666; hybrid: 646 + 320 = 966; iterative over the graph: 310 + 320 = 630.
    by_p = latest.groupby("paradigm")["total_tokens"].first()
    assert by_p["graph"] == pytest.approx(666.0) and by_p["hybrid"] == pytest.approx(966.0)
    assert by_p["iterative"] == pytest.approx(630.0) and by_p["iterative_naive"] == pytest.approx(310.0)

    # Table 16: Ret-In / Ret-Out include the construction share, inference-only in its own columns.
    tok = read_sql(store, "SELECT * FROM v_token_breakdown").set_index("paradigm")
    g = tok.loc["graph"]
    assert g.ret_in == pytest.approx(3 * 30 + BUILD_IN) and g.ret_out == pytest.approx(3 * 6 + BUILD_OUT)
    assert g.ret_in_inference == pytest.approx(90) and g.total_inference == pytest.approx(3 * 346)
    assert g.total == pytest.approx(3 * 346 + 960) and g.build == pytest.approx(960)
    assert tok.loc["naive", "total"] == pytest.approx(3 * 410) and tok.loc["naive", "build"] == 0
    assert tok.loc["iterative", "total"] == pytest.approx(3 * 310 + 960)
    assert tok.loc["iterative_naive", "total"] == pytest.approx(3 * 310)
    assert g.graph_build_tokens == 960 and g.graph_build_per_query == pytest.approx(320.0)

    # Table 2's Tok. and Figure 7 read avg_tokens; the inference-only figure is its own column.
    acc = read_sql(store, "SELECT * FROM v_accuracy_overall").set_index("paradigm")
    assert acc.loc["hybrid", "avg_tokens"] == pytest.approx(966.0)
    assert acc.loc["hybrid", "avg_inference_tokens"] == pytest.approx(646.0)
    assert acc.loc["hybrid", "avg_build_tokens"] == pytest.approx(320.0)

    # The router dataset (SQL pivot and Python pivot) carries the amortised costs.
    ds = read_sql(store, "SELECT * FROM v_router_dataset").iloc[0]
    assert ds.tokens__graph == pytest.approx(666.0) and ds.tokens__iterative == pytest.approx(630.0)
    py = router_dataset(store).iloc[0]
    assert py["tokens__hybrid"] == pytest.approx(966.0) and py["tokens__naive"] == pytest.approx(410.0)

    # Oracle: all correct, equal F1 -> fewest total tokens wins: llm_only (25).
    labels = read_sql(store, "SELECT label, label_tokens FROM v_oracle_label")
    assert set(labels["label"]) == {"llm_only"} and set(labels["label_tokens"]) == {25.0}


def test_oracle_token_tiebreak_uses_amortised_cost(costs_store):
    """Without llm_only and naive judged, the cheapest correct paradigm with construction is
    iterative_naive (310; graph 666, iterative 630, hybrid 966)."""
    store = costs_store
    with store.begin() as conn:
        conn.execute(text("DELETE FROM judgments WHERE run_id IN "
                          "(SELECT id FROM paradigm_runs WHERE paradigm IN ('llm_only', 'naive'))"))
    labels = read_sql(store, "SELECT query_id, label, label_tokens FROM v_oracle_label")
    assert set(labels["label"]) == {"iterative_naive"} and set(labels["label_tokens"]) == {310.0}


def test_corpus_profile_describes_what_was_processed(costs_store):
    prof = read_sql(costs_store, "SELECT * FROM v_corpus_profile WHERE corpus = 'c1'").iloc[0]
    assert (prof.n_documents, prof.n_chunks, prof.total_tokens) == (2, 3, 150)
    assert (prof.n_documents_processed, prof.n_chunks_processed, prof.processed_tokens) == (1, 2, 100)
    assert (prof.n_chunks_extracted, prof.n_chunks_embedded) == (2, 0)
    assert (prof.n_queries, prof.n_queries_answered) == (4, 3)


def _latest(store):
    return read_sql(store, "SELECT * FROM v_run_latest").set_index("run_id")


def test_an_iterative_run_that_never_retrieved_carries_no_construction(costs_store):
    """Issue 30 item 5: eq. 20 charges the construction to runs that read the graph; an iterative
    run that answered in round 0 (iterations = 0) never did."""
    store = costs_store
    with store.begin() as conn:
        conn.execute(text("UPDATE paradigm_runs SET iterations = 0 WHERE paradigm = 'iterative' AND query_id = 1"))
    latest = _latest(store)
    it = latest[latest["paradigm"] == "iterative"].sort_values("query_id")
    assert it["reads_graph"].tolist() == [0, 1, 1]
    assert it["build_tokens"].tolist() == pytest.approx([0.0, 320.0, 320.0])
    assert it["total_tokens"].tolist() == pytest.approx([310.0, 630.0, 630.0])
    assert it["extractor"].isna().tolist() == [True, False, False]
    tok = read_sql(store, "SELECT * FROM v_token_breakdown").set_index("paradigm")
    assert tok.loc["iterative", "total"] == pytest.approx(3 * 310 + 2 * 320)
    assert tok.loc["iterative", "n_reads_graph"] == 2


def test_construction_comes_from_the_extraction_variant_the_run_read(costs_store):
    """Each extraction variant is its own graph with its own cost (e1: calls 1 + 2 = 960 tokens;
    e2: call 1 = 600, the shared cache hit counted for each variant that needed it); a run is
    charged the variant it read (trace.extractor), else the corpus's default variant (the one
    with the most extracted chunks, e1). A second extractor no longer adds to the first one's
    share (it had been summed: 099_v_graph_build.sql)."""
    store = costs_store
    build = read_sql(store, "SELECT * FROM v_graph_build WHERE corpus = 'c1'").set_index("extractor")
    assert build.loc["e1", "graph_build_tokens"] == 960 and build.loc["e2", "graph_build_tokens"] == 600
    assert build["is_default"].to_dict() == {"e1": 1, "e2": 0}
    assert read_sql(store, "SELECT extractor, is_default, graph_build_tokens FROM v_graph_build "
                           "WHERE corpus = 'c2'").values.tolist() == [[None, 1, 0]]
    with store.begin() as conn:
        conn.execute(text("UPDATE paradigm_runs SET trace = CAST(:t AS JSON) WHERE paradigm = 'hybrid'"),
                     {"t": '{"extractor": "e2"}'})
    latest = _latest(store)
    hybrid = latest[latest["paradigm"] == "hybrid"]
    assert set(hybrid["extractor"]) == {"e2"}
    assert hybrid["build_tokens"].tolist() == pytest.approx([200.0] * 3)  # 600 / 3 answered queries
    graph = latest[latest["paradigm"] == "graph"]
    assert set(graph["extractor"]) == {"e1"} and graph["build_tokens"].tolist() == pytest.approx([320.0] * 3)
    tok = read_sql(store, "SELECT * FROM v_token_breakdown").set_index("paradigm")
    assert tok.loc["hybrid", "graph_build_tokens"] == 600 and tok.loc["graph", "graph_build_tokens"] == 960
    assert tok.loc["naive", "graph_build_tokens"] == 0  # a paradigm that never read the graph
    assert tok.loc["hybrid", "total"] == pytest.approx(3 * 646 + 600)
