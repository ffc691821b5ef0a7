"""The score stage's batched path (issue 17): the numbers of scoring each run alone, every
distinct text through each model once."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest
from sqlalchemy import text

from ragrouter.config import Config, ConfigError
from ragrouter.evaluation import stages as ev_stages
from ragrouter.evaluation.metrics import QA_SCORER, faithfulness, soft_coverage
from ragrouter.common.sentences import split_sentences
from ragrouter.llm import encoder as encoder_mod
from ragrouter.report.synthetic import insert_rows
from ragrouter.stages.base import Scope
from ragrouter.stages.runner import run_stage
from ragrouter.stages.services import Services
from tests.support import squad_v11

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
COUNTING = "minilm-counting"

CHUNKS = [
    "Basal cell carcinoma (BCC) is the most common type of skin cancer. About 3 million cases are diagnosed "
    "every year in the United States. Treatment usually involves surgery to remove the cancer.",
    "Melanoma is less common but more dangerous. It can spread to other organs if not treated early. "
    "Dermatologists use the ABCDE rule to spot it.",
    "Type 2 diabetes is a chronic condition. The body does not use insulin properly. Metformin is often the "
    "first medicine prescribed.",
    "Regular exercise lowers blood sugar levels. A balanced diet helps too. Patients should check their feet daily.",
    "Hypertension means high blood pressure. It raises the risk of stroke and heart attack. ACE inhibitors are a "
    "common treatment.",
    "Salt intake should be limited for people with hypertension. Weight loss also lowers blood pressure.",
]
# (question, gold, status, {paradigm: (answer, chunk ids)})
QUERIES = [
    ("What is the most common type of skin cancer?",
     "Basal cell carcinoma (BCC) is the most common type of skin cancer.", "accepted", {
         "llm_only": ("The most common skin cancer is basal cell carcinoma.", []),
         "naive": ("Basal cell carcinoma (BCC) is the most common type of skin cancer. It is usually removed by "
                   "surgery.", [1, 2]),
         "graph": ("Melanoma is the most common.\n- It spreads early.\n- Bananas are yellow.", [2, 1, 999]),
         "hybrid": ("BCC, diagnosed about 3 million times a year.", [1, 3]),
         "iterative": ("I cannot answer.", [1]),
     }),
    ("What medicine is first prescribed for type 2 diabetes?",
     "Metformin is usually the first medicine. Diet and exercise also help.", "accepted", {
         "llm_only": ("Insulin injections are always given first.", []),
         "naive": ("Metformin is often the first medicine prescribed. Regular exercise lowers blood sugar levels. "
                   "The moon orbits the earth.", [3, 4]),
         "graph": ("", [3]),
         "hybrid": ("Metformin, together with a balanced diet.", [3, 4, 5]),
         "iterative": ("Doctors usually start with metformin! Exercise helps as well?", [4, 3]),
     }),
    ("How is hypertension treated?",
     "Hypertension is treated with ACE inhibitors. Less salt and weight loss help lower blood pressure.", "accepted", {
         "llm_only": ("With medication and lifestyle changes.", []),
         "naive": ("ACE inhibitors are a common treatment. Salt intake should be limited for people with "
                   "hypertension.", [5, 6]),
         "graph": ("High blood pressure raises the risk of stroke. It is treated with ACE inhibitors.", [5, 1]),
         "hybrid": ("Limit salt, lose weight, take ACE inhibitors.", [6, 5]),
         "iterative": ("Hypertension is treated with drugs such as ACE inhibitors and with less salt.", [5]),
     }),
    ("Which question is rejected?", "This one.", "rejected", {
        "naive": ("Not scored at all.", [1]),
    }),
]


def _rows() -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {"corpora": [], "documents": [], "chunks": [], "queries": [], "paradigm_runs": []}
    rows["corpora"].append(dict(id=1, name="medical", source_format="synthetic", created_at=T0))
    rows["documents"].append(dict(id=1, corpus_id=1, external_id="doc", title="", text=" ".join(CHUNKS),
                                  n_tokens=300, created_at=T0))
    for i, t in enumerate(CHUNKS, start=1):
        rows["chunks"].append(dict(id=i, document_id=1, corpus_id=1, chunker="cl100k:512:100", chunk_index=i - 1,
                                   text=t, n_tokens=40, token_start=0, token_end=40, char_start=0, char_end=len(t),
                                   created_at=T0))
    run_id = 0
    for qi, (question, gold, status, runs) in enumerate(QUERIES, start=1):
        rows["queries"].append(dict(id=qi, corpus_id=1, external_id=f"q{qi}", origin="imported", qtype="factual",
                                    question=question, answer=gold, status=status, created_at=T0))
        for paradigm, (answer, chunk_ids) in runs.items():
            run_id += 1
            # ids interleave queries, as the answer stage writes them (longest paradigms first)
            rows["paradigm_runs"].append(dict(
                id=100 * (list(runs).index(paradigm) + 1) + qi, query_id=qi, paradigm=paradigm, generator="gen",
                config_hash="c", config={}, answer=answer, retrieved_chunk_ids=chunk_ids, context_tokens=0,
                iterations=0, trace={}, ret_in_tokens=0, ret_out_tokens=0, gen_in_tokens=0, gen_out_tokens=0,
                latency_s=0.1, created_at=T0))
    return rows


class CountingEncoder:
    """The real MiniLM encoder, recording every text it is asked to encode."""

    def __init__(self, inner):
        self.inner = inner
        self.name = COUNTING
        self.model_path = inner.model_path
        self.dim = inner.dim
        self.seen: list[str] = []
        self.calls = 0

    def encode(self, texts, batch_size=32):
        self.calls += 1
        self.seen.extend(texts)
        return self.inner.encode(texts, batch_size=batch_size)


@pytest.fixture
def counting():
    enc = CountingEncoder(encoder_mod.get_encoder())
    encoder_mod.register_encoder(COUNTING, lambda: enc)
    yield enc
    encoder_mod.ENCODERS.pop(COUNTING, None)
    encoder_mod._CACHE.pop(COUNTING, None)


def _query_of(run_id: int) -> int:
    return run_id % 100


def _scores(engine) -> dict[int, dict[str, float | None]]:
    out: dict[int, dict[str, float | None]] = {}
    with engine.connect() as conn:
        for rid, metric, scorer, value in conn.execute(text(
                "SELECT run_id, metric, scorer, value FROM answer_scores ORDER BY run_id")).all():
            assert scorer == (QA_SCORER if metric in ("exact_match", "token_f1") else f"bertscore:{COUNTING}:L6")
            out.setdefault(int(rid), {})[metric] = value
    return out


def test_batched_score_stage_equals_each_run_alone_and_encodes_each_text_once(store, counting, monkeypatch):
    from bert_score import BERTScorer

    insert_rows(store, _rows())
    monkeypatch.setattr(ev_stages.ScoreStage, "BATCH", 5)  # one query per unit: contexts shared across units
    config = Config.load(env={"RAGROUTER__scoring__encoder": COUNTING})
    services = Services(config, store)
    stage = ev_stages.ScoreStage()
    scope = Scope(config=config)
    with store.connect() as conn:
        units = stage.pending(conn, scope)
    assert [sorted({_query_of(r["run_id"]) for r in u.payload["runs"]}) for u in units] == [[1], [2], [3]]

    sem, enc = services.memo("score-models", lambda: ev_stages._score_models(config))
    assert enc is counting
    forward_rows: list[int] = []
    hook = sem.scorer._model.register_forward_hook(lambda m, args, out: forward_rows.append(int(args[0].shape[0])))
    try:
        report = run_stage(stage, services, scope, progress=False)
    finally:
        hook.remove()
    assert (report.pending, report.done, report.failed) == (3, 3, 0)

    # each distinct non-empty text of a unit (answers and its gold) through BERTScore's model once
    expected_rows = sum(len({t for r in u.payload["runs"] for t in (r["answer"], r["gold"]) if t.strip()})
                        for u in units)
    assert sum(forward_rows) == expected_rows == 3 * 5 - 1 + 3  # 15 answers (one empty) + 3 golds
    # each distinct sentence through the sentence encoder once, one call per unit
    chunk_text = dict(enumerate(CHUNKS, start=1))
    want: set[str] = set()
    for _, gold, status, runs in QUERIES:
        if status != "accepted":
            continue
        want.update(split_sentences(gold))
        for paradigm, (answer, ids) in runs.items():
            want.update(split_sentences(answer))
            if paradigm in ("naive", "graph") and split_sentences(answer):
                want.update(s for c in ids if c in chunk_text for s in split_sentences(chunk_text[c]))
    assert Counter(counting.seen) == Counter({s: 1 for s in want})
    assert counting.calls == 3  # one per unit; unit 3 found chunk 1's sentences in the stage's memo

    # every number equals scoring the run alone with the reference implementations
    reference = BERTScorer(model_type=str(encoder_mod.minilm_path()), num_layers=6, lang="en")
    real = encoder_mod.get_encoder()
    stored = _scores(store)
    runs = {(qi, p): v for qi, (_, _, status, rs) in enumerate(QUERIES, start=1) if status == "accepted"
            for p, v in rs.items()}
    assert len(stored) == len(runs) == 15
    for (qi, paradigm), (answer, ids) in runs.items():
        gold = QUERIES[qi - 1][1]
        got = stored[100 * (list(QUERIES[qi - 1][3]).index(paradigm) + 1) + qi]
        f1 = float(reference.score([answer], [gold])[2][0]) if answer.strip() else 0.0
        assert got["semantic_f1"] == pytest.approx(f1, abs=1e-6), (qi, paradigm)
        assert got["coverage"] == pytest.approx(soft_coverage(answer, gold, real), abs=1e-6), (qi, paradigm)
        # exact match and token F1 as the official SQuAD v1.1 script computes them
        assert got["exact_match"] == float(squad_v11.exact_match_score(answer, gold)), (qi, paradigm)
        assert got["token_f1"] == pytest.approx(squad_v11.f1_score(answer, gold), abs=1e-12), (qi, paradigm)
        if paradigm in ("naive", "graph"):
            hard, soft = faithfulness(answer, [chunk_text[c] for c in ids if c in chunk_text], real)
            assert got["faith_hard"] == hard, (qi, paradigm)
            assert got["faith_soft"] == pytest.approx(soft, abs=1e-6), (qi, paradigm)
        else:
            assert got["faith_hard"] is None and got["faith_soft"] is None
    assert stored[100 * 3 + 2]["semantic_f1"] == 0.0  # the empty answer
    # the real numbers, not a constant: a paraphrase of the gold beats an unrelated answer
    assert stored[100 * 2 + 1]["semantic_f1"] > stored[100 * 3 + 1]["semantic_f1"] + 0.1
    assert 0 < stored[100 * 2 + 2]["faith_hard"] < 1

    again = run_stage(stage, services, scope, progress=False)
    assert again.pending == 0


def test_sentence_cache_setting_must_be_positive(store):
    config = Config.load(env={"RAGROUTER__scoring__sentence_cache": "0"})
    with pytest.raises(ValueError, match=r"environment RAGROUTER__scoring__sentence_cache: setting "
                                         r"'scoring.sentence_cache' must be an integer >= 1 \(got 0\)"):
        ev_stages.ScoreStage().prepare(Services(config, store), Scope(config=config))
    with pytest.raises(ConfigError, match="sentence_cache"):
        Config.load(env={"RAGROUTER__scoring__sentence_cache": "many"})


def test_graph_faithfulness_is_measured_against_the_context_shown(store, counting):
    """GraphRAG's generator saw triples and a few source sentences, not whole chunks (issue 30
    item 5): its Faith-H/S are computed against the generation request's context (from the
    ledger through run_calls), NaiveRAG's against its chunks; a graph run without a stored
    request falls back to its chunks."""
    from ragrouter.paradigms import prompts

    rows = _rows()
    shown = "Sourced facts:\n1. (melanoma | is | dangerous)\n   Melanoma is less common but more dangerous."
    rows["llm_calls"] = [dict(id=1, request_hash="h" * 64, kind="chat", backend="gen", model="gen", stage="answer",
                              phase="generation", messages=prompts.GENERATION.messages(context=shown, question="q"),
                              prompt_tokens=10, completion_tokens=5, token_source="tiktoken", latency_s=0.1,
                              attempts=1, created_at=T0)]
    graph_run = 100 * 3 + 1  # query 1's graph run: retrieved chunks 2, 1 (and a missing 999)
    rows["run_calls"] = [dict(run_id=graph_run, seq=0, llm_call_id=1, phase="generation", created_at=T0)]
    insert_rows(store, rows)
    config = Config.load(env={"RAGROUTER__scoring__encoder": COUNTING})
    run_stage(ev_stages.ScoreStage(), Services(config, store), Scope(config=config), progress=False)
    got = _scores(store)
    real = encoder_mod.get_encoder()
    answer = QUERIES[0][3]["graph"][0]
    assert prompts.shown_context(prompts.GENERATION.messages(context=shown, question="q")) == shown
    hard, soft = faithfulness(answer, [shown], real)
    assert got[graph_run]["faith_hard"] == hard and got[graph_run]["faith_soft"] == pytest.approx(soft, abs=1e-6)
    whole, whole_soft = faithfulness(answer, [CHUNKS[1], CHUNKS[0]], real)
    assert (hard, round(soft, 6)) != (whole, round(whole_soft, 6))  # the rule changes the number here
    other_graph = 100 * 3 + 3  # no stored request: its chunks
    ans3 = QUERIES[2][3]["graph"][0]
    h3, s3 = faithfulness(ans3, [CHUNKS[4], CHUNKS[0]], real)
    assert got[other_graph]["faith_hard"] == h3 and got[other_graph]["faith_soft"] == pytest.approx(s3, abs=1e-6)


def test_the_score_stage_counts_its_work_in_runs_in_dry_runs_and_stage_timings(store, monkeypatch):
    """A score unit is a batch of runs and its time scales with the runs: the dry run and the
    stage_timings row (what later dry runs learn from) both count the runs, not the batches."""
    from ragrouter.stages.runner import dry_run

    insert_rows(store, _rows())
    monkeypatch.setattr(ev_stages.ScoreStage, "BATCH", 5)
    config = Config.load(env={})
    services = Services(config, store)
    stage, scope = ev_stages.ScoreStage(), Scope(config=config)
    try:
        with store.connect() as conn:
            units = stage.pending(conn, scope)
        runs = sum(len(u.payload["runs"]) for u in units)
        assert len(units) == 3 and runs == 15
        (est,) = dry_run([stage], services, scope)
        assert est.units == runs
        report = run_stage(stage, services, scope, progress=False)
        assert (report.done, report.work) == (3, 15)
    finally:
        services.finish()
    with store.connect() as conn:
        assert conn.execute(text("SELECT units FROM stage_timings WHERE stage = 'score'")).scalar_one() == 15
