"""Exact match and token F1 (issue 30 item 4): equal to the official SQuAD v1.1 script
(tests/support/squad_v11.py) on hand-checked and random answers, SQuAD v2.0's no-answer rule
for questions marked unanswerable, and the figures' path through the views (Table 15, the
router dataset) on DuckDB and PostgreSQL."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from ragrouter.evaluation.metrics import exact_match, normalize_answer, qa_scores, token_f1
from ragrouter.report import synthetic
from tests.support import squad_v11

# (prediction, gold, exact match, token F1) checked by hand
HAND = [
    ("The Eiffel Tower.", "eiffel tower", 1.0, 1.0),            # case, article, punctuation
    ("5 PM", "5:30 PM", 0.0, 0.5),                             # "5 pm" vs "530 pm": 1 of 2 tokens each side
    ("Paris, France", "Paris", 0.0, 2 * 0.5 * 1.0 / 1.5),      # P = 1/2, R = 1
    ("an apple a day", "the apple", 0.0, 2 * 0.5 * 1.0 / 1.5),  # "apple day" vs "apple"
    ("red red blue", "red blue blue", 0.0, 2 / 3),             # multiset: 1 red + 1 blue shared of 3 each
    ("I cannot answer", "Metformin", 0.0, 0.0),
    ("", "Metformin", 0.0, 0.0),
    ("the", "a", 1.0, 0.0),                                    # both normalise to nothing: EM 1, F1 0 (v1.1)
]


@pytest.mark.parametrize("pred, gold, em, f1", HAND)
def test_hand_checked_values_and_the_official_script(pred, gold, em, f1):
    assert exact_match(pred, gold) == em == float(squad_v11.exact_match_score(pred, gold))
    assert token_f1(pred, gold) == pytest.approx(f1) and token_f1(pred, gold) == pytest.approx(
        squad_v11.f1_score(pred, gold), abs=1e-15)


words = st.sampled_from(["the", "a", "an", "The", "An", "Paris", "paris,", "5:30", "PM", "pm.", "x-ray", "x", "ray",
                         "café", "Café!", "(BCC)", "bcc", "and", "  ", "\t", "—", "it's", "its", "n't", "A.", "the.",
                         "anthem", "theory", "1,000", "1000"])
texts = st.lists(words, max_size=8).map(" ".join)


@settings(max_examples=300, deadline=None, database=None)
@given(pred=texts, gold=texts)
def test_equal_to_the_official_script_on_random_answers(pred, gold):
    assert normalize_answer(pred) == squad_v11.normalize_answer(pred)
    assert exact_match(pred, gold) == float(squad_v11.exact_match_score(pred, gold))
    assert token_f1(pred, gold) == pytest.approx(squad_v11.f1_score(pred, gold), abs=1e-15)


def test_unanswerable_questions_follow_squad_v2_no_answer_rule():
    # the gold of an unanswerable question is "no answer": a refusal scores 1, anything else 0
    assert qa_scores("I cannot answer", "Insufficient information", unanswerable=True) == {
        "exact_match": 1.0, "token_f1": 1.0}
    assert qa_scores("The provided context does not contain this information.", "Insufficient information",
                     unanswerable=True) == {"exact_match": 1.0, "token_f1": 1.0}
    assert qa_scores("Blue.", "Insufficient information", unanswerable=True) == {"exact_match": 0.0, "token_f1": 0.0}
    # an answerable question: the plain metrics (a refusal shares no token with the gold)
    assert qa_scores("Blue.", "blue", unanswerable=False) == {"exact_match": 1.0, "token_f1": 1.0}
    assert qa_scores("I cannot answer", "blue") == {"exact_match": 0.0, "token_f1": 0.0}


def _means(conn, sql):
    return {tuple(r[:-2]): (r[-2], r[-1]) for r in conn.execute(text(sql)).all()}


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_table_15_and_router_dataset_carry_em_and_token_f1(backend, store, pg_store):
    """v_quality's EM / Tok-F1 are the means over the current runs of accepted queries, and the
    router dataset's em__p / token_f1__p are each run's own values (pandas on the same rows)."""
    import pandas as pd

    engine = store if backend == "duckdb" else pg_store
    rows = synthetic.random_rows(11, n_corpora=2, queries_per_corpus=6)
    synthetic.insert_rows(engine, rows)
    f = {k: pd.DataFrame(v) for k, v in rows.items()}
    runs = f["paradigm_runs"].sort_values(["created_at", "id"]).drop_duplicates(
        ["query_id", "paradigm", "generator"], keep="last")
    q = f["queries"].merge(f["corpora"].rename(columns={"id": "corpus_id", "name": "corpus"})[["corpus_id", "corpus"]])
    runs = runs.merge(q.rename(columns={"id": "query_id"})[["query_id", "corpus", "status"]])
    runs = runs[runs["status"] == "accepted"]
    sc = f["answer_scores"]
    qa = sc[sc["scorer"] == "squad-v1.1"].pivot(index="run_id", columns="metric", values="value")
    runs = runs.merge(qa, left_on="id", right_index=True, how="left")
    assert runs["exact_match"].notna().any() and runs["exact_match"].isna().any()  # scored and not yet scored
    exp = runs.groupby(["corpus", "generator", "paradigm"])[["exact_match", "token_f1"]].mean()
    with engine.connect() as conn:
        got = _means(conn, "SELECT DISTINCT corpus, generator, paradigm, exact_match, token_f1 FROM v_quality")
        assert len(got) == len(exp)
        for key, (em, f1) in got.items():
            e_em, e_f1 = exp.loc[key]
            assert (em is None and pd.isna(e_em)) or em == pytest.approx(e_em)
            assert (f1 is None and pd.isna(e_f1)) or f1 == pytest.approx(e_f1)
        wide = conn.execute(text("SELECT query_id, generator, judge, em__naive, token_f1__naive "
                                 "FROM v_router_dataset")).all()
    j = f["judgments"]
    judged = set(zip(j[~j["is_calibration"]]["run_id"], j[~j["is_calibration"]]["judge"]))
    by_run = runs[runs["paradigm"] == "naive"].set_index(["query_id", "generator"])
    checked = 0
    for qid, gen, judge, em, f1 in wide:
        if (qid, gen) in by_run.index and (by_run.loc[(qid, gen)]["id"], judge) in judged:
            e = by_run.loc[(qid, gen)]
            assert (em is None and pd.isna(e["exact_match"])) or em == pytest.approx(e["exact_match"])
            assert (f1 is None and pd.isna(e["token_f1"])) or f1 == pytest.approx(e["token_f1"])
            checked += em is not None
    assert checked > 0
    from ragrouter.report.data import router_dataset

    py = router_dataset(engine)
    assert {"em__naive", "token_f1__naive"} <= set(py.columns)
