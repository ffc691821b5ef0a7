"""Judge calibration (ragrouter/evaluation/calibration.py) and repeated judging (JudgeStage).

* The calibration set's construction: every case has the label its kind says, each rule does
  what it claims (and skips a gold it cannot use), and no case leaks its kind or label into
  the judge prompt (the prompt is exactly a real run's prompt).
* The store: cases live on mirror queries, idempotently, out of every benchmark table.
* Figures: Cohen's kappa equals sklearn's; judges scripted on the fake OpenAI-compatible
  endpoint give the figures they must (a lenient judge: kappa 0; an oracle: kappa 1); the view
  ``v_judge_calibration`` agrees with the Python figures on DuckDB and PostgreSQL.
* Majority voting through the real JudgeStage + run_stage: ties go to the worse label, k = 1
  is exactly the single-judge request, more samples reuse the cached ones.
* ``cli.py judge calibrate`` end to end on the fake endpoint, and its one-line errors.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
from collections import defaultdict

import pytest
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import insert, text

from ragrouter.config import Config
from ragrouter.db import models
from ragrouter.evaluation import calibration as cal
from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.stages import JudgeStage, ScoreStage
from ragrouter.stages.base import Scope
from ragrouter.stages.runner import run_stage
from ragrouter.stages.services import Services

try:
    from tests.fake_openai import FakeOpenAI, last_user_text
except ModuleNotFoundError:  # rootdir-less import mode
    from fake_openai import FakeOpenAI, last_user_text

KEY_ENV = "RAGROUTER_TEST_CALIB_KEY"

# (external id, type, question, gold). q-single has a one-clause gold: it yields no
# first_clause case and is never selected.
SOURCES = [
    ("q-organs", "factual", "Which organs does disease X affect?",
     "Disease X affects the liver, the kidneys, and the lungs."),
    ("q-survival", "factual", "What is the five-year survival rate of stage 2 melanoma?",
     "The five-year survival rate for stage 2 melanoma is 80%, which is much higher than for stage 3 disease."),
    ("q-single", "factual", "What is the most common skin cancer?",
     "Basal cell carcinoma is the most common skin cancer."),
    ("q-surgery", "reasoning", "When is surgery preferred over radiation for tumor T?",
     "Surgery is preferred for early tumors, while radiation is used for patients who cannot have surgery."),
    ("q-smoking", "reasoning", "Why does smoking raise the risk of lung cancer?",
     "Smoking increases the risk of lung cancer because tobacco smoke damages the airway lining."),
    ("q-stages", "summary", "How is disease Z treated at its different stages?",
     "Treatment of Z depends on the stage. Early Z is treated with surgery alone. Advanced Z requires "
     "chemotherapy and radiation. Follow-up visits occur every 3 months for 2 years."),
    ("q-screening", "summary", "How is colon cancer screening organised?",
     "Screening for colon cancer starts at age 45. Colonoscopy is the preferred test, and stool tests "
     "are an alternative for people who decline it."),
    ("q-tower", "factual", "When was the Eiffel Tower completed?",
     "The Eiffel Tower was completed in 1889 in Paris, and it was the tallest structure in the world."),
]
LEAK_WORDS = {*jd.LABELS, *cal.KINDS, "calibration", "paraphrase", "refusal", "altered", "gold_answer",
              "true_label", "kind", "case"}


def sources(corpus_id: int = 1) -> list[cal.Source]:
    return [cal.Source(i + 1, ext, corpus_id, t, q, a) for i, (ext, t, q, a) in enumerate(SOURCES)]


def all_cases() -> list[tuple[cal.Source, cal.Case]]:
    srcs = sources()
    pool = cal.Pool(srcs)
    return [(s, c) for s in srcs for c in cal.build_cases(s, pool)]


# ---------------------------------------------------------------------------------------------
# Construction: labels by construction


def test_the_kinds_cover_each_label():
    by_label = defaultdict(list)
    for kind in cal.KINDS.values():
        if not kind.unanswerable:
            by_label[kind.true_label].append(kind.kind)
    assert {k: sorted(v) for k, v in by_label.items()} == {
        "correct": ["extra_clause", "gold", "paraphrase"], "incomplete": ["coarsened", "first_clause", "refusal"],
        "incorrect": ["altered", "other_gold"]}


def test_every_case_has_its_intended_label_and_each_rule_does_what_it_says():
    srcs = sources()
    golds = {s.answer for s in srcs}
    swap_words = set().union(*(cal.content_words(a) | cal.content_words(b) for a, b in cal.SWAPS))
    seen = defaultdict(int)
    for src, case in all_cases():
        assert case.true_label == cal.KINDS[case.kind].true_label
        assert case.source_id == src.id and case.answer.strip() and case.answer != "" and case.rule
        seen[case.kind] += 1
        gold = src.answer
        if case.kind == "gold":
            assert case.answer == gold
        elif case.kind == "paraphrase":
            lead = next(p for p in cal.PARAPHRASE_LEADS if case.answer.startswith(p))
            body = case.answer[len(lead):]
            # Same content words up to the phrasing swaps; the same numbers; no negation added.
            assert (cal.content_words(body) ^ cal.content_words(gold)) <= swap_words
            assert re.findall(r"\d+", body) == re.findall(r"\d+", gold)
            assert sorted(re.findall(r"\b(?:not|no|never|cannot)\b", body.lower())) == \
                sorted(re.findall(r"\b(?:not|no|never|cannot)\b", gold.lower()))
        elif case.kind == "refusal":
            assert case.answer in cal.REFUSALS
            assert not (cal.content_words(case.answer) & cal.content_words(gold) - {"question", "answer"})
        elif case.kind == "first_clause":
            kept = case.answer.rstrip(".")
            assert gold.startswith(kept) and len(kept) < len(gold.rstrip("."))
            assert len(cal.content_words(gold) - cal.content_words(case.answer)) >= 2
        elif case.kind == "other_gold":
            assert case.answer in golds and case.answer != gold
            assert cal.jaccard(cal.content_words(case.answer),
                               cal.content_words(gold) | cal.content_words(src.question)) < cal.OTHER_GOLD_MAX_JACCARD
        elif case.kind == "altered":
            assert case.answer != gold
        elif case.kind == "coarsened":
            assert case.answer != gold and re.findall(r"\d+", case.answer) != re.findall(r"\d+", gold)
    # q-single has no first clause; no source has evidence text (no extra_clause); two golds have a
    # figure to blur (age 45, 1889); every source yields the other five kinds.
    assert seen["first_clause"] == len(SOURCES) - 1
    assert seen["coarsened"] == 2 and seen["extra_clause"] == 0
    assert all(seen[k] == len(SOURCES) for k in ("gold", "paraphrase", "refusal", "other_gold", "altered"))
    assert not any(seen[k] for k, kind in cal.KINDS.items() if kind.unanswerable)


def test_paraphrase_rules():
    text_, made = cal.paraphrase("Surgery is preferred for early tumors, while radiation is used for "
                                 "patients who cannot have surgery.", "k")
    body = text_.split(": ", 1)[1]
    assert body == "Radiation is employed for patients who cannot have surgery, while surgery is preferred for early tumors."
    assert made == ["clauses reordered around 'while'", "is used for → is employed for"]
    text_, _ = cal.paraphrase("Smoking increases the risk because smoke damages the airway lining.", "k")
    assert text_.split(": ", 1)[1] == "Because smoke damages the airway lining, smoking raises the risk."
    text_, _ = cal.paraphrase("BCC is Typically seen on the face.", "k")
    assert text_.split(": ", 1)[1] == "BCC is Usually seen on the face."  # case kept, acronym untouched
    # The lead-in depends on the key only (deterministic) and is one of the documented ones.
    assert cal.paraphrase("x y z", "a")[0] == cal.paraphrase("x y z", "a")[0]
    assert {cal.paraphrase("x y z", str(i))[0].split(":")[0] + ": " for i in range(40)} == set(cal.PARAPHRASE_LEADS)


@pytest.mark.parametrize("gold, expected", [
    ("Disease X affects the liver, the kidneys, and the lungs.", "Disease X affects the liver."),
    ("Tests can help determine malignancy and need for surgery.", "Tests can help determine malignancy."),
    ("Surgery is preferred for early tumors, while radiation is used for others.", "Surgery is preferred for early tumors."),
    ("Treatment depends on the stage. Early disease is treated with surgery alone.", "Treatment depends on the stage."),
    ("Repeat MRI, eye exam, blood tests, and status assessment are recommended.", "Repeat MRI, eye exam."),
])
def test_first_clause_cuts(gold, expected):
    cut, rule = cal.first_clause(gold)
    assert cut == expected and "drops" in rule


@pytest.mark.parametrize("gold", [
    "Basal cell carcinoma is the most common skin cancer.",   # one clause
    "It is X, Y.",                                              # cut keeps < 3 words
    "The cost is 1,000 dollars.",                              # a thousands separator is no boundary
    "Aspirin and ibuprofen, both.",                             # drops < 2 content words
    "",
])
def test_first_clause_skips_golds_whose_cut_drops_nothing(gold):
    assert cal.first_clause(gold) is None


@pytest.mark.parametrize("sentence, expected, rule", [
    ("Follow-up lasts 5 years.", "Follow-up lasts 10 years.", "number"),
    ("The response rate is 80% in trials.", "The response rate is 40% in trials.", "number"),
    ("The rate is 2.5 percent.", "The rate is 5.0 percent.", "number"),
    ("It was described in 1990 by Smith.", "It was described in 1965 by Smith.", "number"),
    ("Fair skin increases the risk.", "Fair skin decreases the risk.", "antonym"),
    ("Most cases are found early.", "Least cases are found early.", "antonym"),
    ("Surgery is preferred.", "Surgery is not preferred.", "negation"),
    ("The lesion does not heal.", "The lesion does heal.", "negation"),
    ("Tests can detect it.", "Tests cannot detect it.", "negation"),
    ("Basal cell carcinoma arises from basal cells.",
     "It is not true that basal cell carcinoma arises from basal cells.", "wrap"),
    ("BCC arises from basal cells.", "It is not true that BCC arises from basal cells.", "wrap"),
])
def test_alteration_rules(sentence, expected, rule):
    assert cal.contradict(sentence) == (expected, rule)


def test_altered_contradicts_every_sentence():
    gold = "Treatment depends on the stage. Early Z is treated with surgery. Visits occur every 3 months."
    out, rule = cal.altered(gold)
    assert out == ("It is not true that treatment depends on the stage. Late Z is treated with surgery. "
                   "Visits occur every 6 months.")
    assert rule == "per sentence: wrap ×1, antonym ×1, number ×1"
    assert cal.altered("") is None


def test_other_gold_prefers_the_same_type_and_skips_overlapping_golds():
    srcs = sources()
    pool = cal.Pool(srcs)
    organs = srcs[0]
    donor = pool.donor(organs)
    assert donor.qtype == organs.qtype and donor.id != organs.id
    # A pool whose only other gold overlaps heavily gives no donor.
    twin = cal.Source(99, "twin", 1, "factual", "Which organs?", "Disease X affects the liver and the kidneys.")
    assert cal.Pool([organs, twin]).donor(organs) is None
    # Another corpus's queries are never donors.
    other = cal.Source(98, "far", 2, "factual", "Q?", "Paris is the capital of France.")
    assert cal.Pool([organs, other]).donor(organs) is None


def test_no_case_leaks_its_label_or_kind_into_the_prompt():
    cases = all_cases()
    systems = set()
    for src, case in cases:
        msgs = cal.case_messages(src, case)
        assert msgs == jd.messages(src.question, src.answer, case.answer)  # exactly a real run's prompt
        systems.add(msgs[0]["content"])
        user = msgs[1]["content"]
        assert user == (f"Question: {src.question}\n\nGold answer: {src.answer}\n\n"
                        f"Answer to grade: {case.answer}\n\nReturn the JSON now.")
        for word in LEAK_WORDS:
            pattern = re.compile(rf"\b{re.escape(word)}\b", re.I)
            if pattern.search(case.answer):
                assert pattern.search(src.question + " " + src.answer), (case.kind, word)
        assert case.rule not in user
    assert len(systems) == 1  # one system prompt for every case, whatever its label


def test_no_leak_on_the_real_medical_questions():
    from tests.conftest import SHARED_DATA

    path = SHARED_DATA / "medical" / "medical_questions.json"  # found as the demo finds it (also from a clone elsewhere)
    if not path.exists():
        pytest.skip(f"{path} is not here")
    rows = json.loads(path.read_text())
    srcs = [cal.Source(i, r["id"], 1, "factual", r["question"], r["answer"]) for i, r in enumerate(rows[:400])
            if r["question_type"] != "Creative Generation"]
    pool = cal.Pool(srcs)
    chosen = cal.select_sources(srcs, 30, pool)
    assert len(chosen) == 30 and all(cal.usable(cases) and len(cases) >= 5 for _, cases in chosen)
    for src, cases in chosen:
        for case in cases:
            assert case.true_label == cal.KINDS[case.kind].true_label
            # Another query's gold is quoted as is; every other case is made from this query's gold.
            origin = case.answer if case.kind == "other_gold" else src.question + " " + src.answer
            if case.kind == "other_gold":
                assert case.answer in {s.answer.strip() for s in srcs if s.id != src.id}
            for word in LEAK_WORDS:
                pattern = re.compile(rf"\b{re.escape(word)}\b", re.I)
                if pattern.search(case.answer):
                    assert pattern.search(origin), (case.kind, word, case.answer)
            assert (case.answer == src.answer) == (case.kind == "gold")


def test_selection_is_deterministic_interleaves_types_and_extends():
    srcs = sources()
    first = cal.select_sources(srcs, 3)
    assert [s.qtype for s, _ in first] == ["factual", "reasoning", "summary"]
    assert [s.id for s, _ in cal.select_sources(srcs, 3)] == [s.id for s, _ in first]
    more = cal.select_sources(srcs, 6)
    assert [s.id for s, _ in more][:3] == [s.id for s, _ in first]
    # a one-clause gold still yields a correct and a not-correct case: it is selected too
    assert "q-single" in {s.external_id for s, _ in cal.select_sources(srcs, 100)}
    assert len(cal.select_sources(srcs, 100)) == len(SOURCES)
    with pytest.raises(cal.CalibrationError, match="at least 1"):
        cal.select_sources(srcs, 0)


# ---------------------------------------------------------------------------------------------
# Kappa and figures


def test_cohen_kappa_equals_sklearn():
    rng = random.Random(7)
    for trial in range(40):
        n = rng.randint(2, 60)
        y_true = [rng.choice(jd.LABELS) for _ in range(n)]
        skew = rng.random()
        y_pred = [t if rng.random() < skew else rng.choice(jd.LABELS) for t in y_true]
        ours = cal.cohen_kappa(y_true, y_pred)
        ref = cohen_kappa_score(y_true, y_pred, labels=list(jd.LABELS))
        assert ours == pytest.approx(ref, abs=1e-12), trial
    y = ["correct", "incorrect", "incomplete"] * 4
    assert cal.cohen_kappa(y, y) == pytest.approx(1.0)
    assert cal.cohen_kappa(y, ["correct"] * len(y)) == pytest.approx(
        cohen_kappa_score(y, ["correct"] * len(y), labels=list(jd.LABELS))) == pytest.approx(0.0)
    assert math.isnan(cal.cohen_kappa(["correct"] * 3, ["correct"] * 3))  # undefined, like sklearn
    with pytest.raises(ValueError, match="not one of"):
        cal.cohen_kappa(["correct"], ["fine"])


def test_figures_from_case_rows():
    rows = []
    truth = {"gold": "correct", "paraphrase": "correct", "refusal": "incomplete", "first_clause": "incomplete",
             "other_gold": "incorrect", "altered": "incorrect"}
    verdicts = {"gold": ["correct"], "paraphrase": ["correct", "incomplete", "incomplete"],
                "refusal": ["incomplete"], "first_clause": ["correct"], "other_gold": ["incorrect"],
                "altered": ["correct", "incorrect"]}  # tie -> incorrect
    for i, (kind, labels) in enumerate(verdicts.items()):
        label, agree = jd.majority(labels)
        rows.append({"judge": "j", "run_id": i, "kind": kind, "true_label": truth[kind], "labels": labels,
                     "label": label, "agreement": agree, "seconds": 2.0 * len(labels), "calls": len(labels)})
    fig = cal.figures(rows, "j")
    # rows: true correct / incorrect / incomplete; columns: judged the same order.
    assert fig.confusion == [[1, 0, 1], [0, 2, 0], [1, 0, 1]]
    assert fig.agreement == {"correct": 0.5, "incorrect": 1.0, "incomplete": 0.5}
    assert fig.by_kind == {"gold": 1.0, "paraphrase": 0.0, "refusal": 1.0, "first_clause": 0.0,
                           "other_gold": 1.0, "altered": 1.0}
    assert fig.accuracy == pytest.approx(4 / 6)
    y_true = [r["true_label"] for r in rows]
    y_pred = [r["label"] for r in rows]
    assert fig.kappa == pytest.approx(cohen_kappa_score(y_true, y_pred, labels=list(jd.LABELS)))
    b = fig.binary  # correct vs. not correct
    assert b["confusion"] == [[1, 1], [1, 3]] and b["accuracy"] == pytest.approx(4 / 6)
    assert b["false_correct"] == pytest.approx(1 / 4) and b["missed_correct"] == pytest.approx(1 / 2)
    assert b["kappa"] == pytest.approx(cohen_kappa_score([t == "correct" for t in y_true],
                                                         [p == "correct" for p in y_pred]))
    assert fig.calls == 9 and fig.seconds_per_call == pytest.approx(2.0) and fig.samples == 3
    text_ = cal.render(fig, "m")
    assert "judge j (model m): 6 cases" in text_ and "by case kind: gold (correct) 100%" in text_


# ---------------------------------------------------------------------------------------------
# The store


def add_corpus(engine, name: str = "toy", with_run: bool = True) -> int:
    with engine.begin() as conn:
        cid = conn.execute(insert(models.Corpus).values(name=name).returning(models.Corpus.id)).scalar_one()
        for ext, qtype, q, a in SOURCES:
            qid = conn.execute(insert(models.Query).values(
                corpus_id=cid, external_id=ext, origin="imported", qtype=qtype, question=q, answer=a,
                status="accepted").returning(models.Query.id)).scalar_one()
            if with_run and ext == "q-organs":
                conn.execute(insert(models.ParadigmRun).values(
                    query_id=qid, paradigm="naive", generator="gen", config_hash="h", answer="The liver.",
                    context_tokens=10, iterations=0, ret_in_tokens=1, ret_out_tokens=0, gen_in_tokens=5,
                    gen_out_tokens=3))
    return cid


def scalar(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def test_set_is_built_idempotently_on_mirror_queries_and_stays_out_of_the_benchmark(store):
    add_corpus(store)
    config = cfg({"j": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": KEY_ENV}})
    scope = Scope(config=config)
    with store.connect() as conn:
        before = (JudgeStage().counts(conn, scope), ScoreStage().counts(conn, scope))
    cset = cal.ensure_set(store, n=3, corpus="toy")
    assert len(cset.sources) == 3 and len(cset.run_ids) == 18 and cset.new_cases == 18
    assert cset.cases_by_label == {"correct": 6, "incorrect": 6, "incomplete": 6}
    again = cal.ensure_set(store, n=3, corpus="toy")
    assert again.run_ids == cset.run_ids and again.new_cases == 0
    bigger = cal.ensure_set(store, n=5)
    assert bigger.run_ids[:18] == cset.run_ids and bigger.new_cases == 12
    # Mirror queries carry the source's question and gold, unchanged; the cases sit on them.
    with store.connect() as conn:
        rows = conn.execute(text(
            "SELECT m.question, m.answer, s.question, s.answer, m.status, m.origin, r.paradigm, r.generator, "
            "r.config_hash, r.config FROM paradigm_runs r JOIN queries m ON m.id = r.query_id "
            "JOIN queries s ON s.external_id = REPLACE(m.external_id, 'calib:', '') AND s.origin = 'imported' "
            "WHERE r.paradigm = 'calibration'")).all()
        assert len(rows) == 30
        for mq, ma, sq, sa, status, origin, paradigm, gen, kind, config in rows:
            config = json.loads(config) if isinstance(config, str) else config
            assert (mq, ma, status, origin, gen) == (sq, sa, "calibration", "calibration", cal.VERSION)
            assert config["kind"] == kind and config["true_label"] == cal.KINDS[kind].true_label
        # Nothing of the benchmark sees them: judge/score stages, current runs of accepted queries.
        assert (JudgeStage().counts(conn, scope), ScoreStage().counts(conn, scope)) == before
        assert JudgeStage().pending(conn, scope)[0].payload["answer"] == "The liver."
        assert conn.execute(text("SELECT COUNT(*) FROM v_run_latest WHERE query_status = 'accepted' "
                                 "AND paradigm = 'calibration'")).scalar() == 0
        assert conn.execute(text("SELECT COUNT(*) FROM v_quality WHERE paradigm = 'calibration'")).scalar() == 0
        assert conn.execute(text("SELECT COUNT(*) FROM v_token_breakdown WHERE paradigm = 'calibration'")).scalar() == 0
        assert conn.execute(text("SELECT n_queries FROM v_corpus_profile")).scalar() == len(SOURCES)


def test_an_empty_store_is_a_clear_error(store):
    with pytest.raises(cal.CalibrationError, match="no imported queries with gold answers"):
        cal.ensure_set(store, n=3)


# ---------------------------------------------------------------------------------------------
# Judging on the scripted endpoint

_PROMPT = re.compile(r"Gold answer: (?P<gold>.*)\n\nAnswer to grade: (?P<answer>.*)\n\nReturn the JSON now\.\Z", re.S)


class ScriptedJudges:
    """Responder for several judge 'models' on one fake endpoint.

    lenient: always 'correct'; oracle: the true label (looked up from the cases); by-kind: a
    fixed verdict per kind; script:<name>: per (gold, answer), the next label of a scripted
    sequence (sample i gets the i-th label — a unit's samples are asked in order)."""

    def __init__(self, cases=(), scripts=None):
        self.truth = {(s.answer, c.answer): c for s, c in cases}
        self.by_kind = {"gold": "correct", "paraphrase": "incomplete", "refusal": "incomplete",
                        "first_clause": "correct", "other_gold": "incorrect", "altered": "correct",
                        "extra_clause": "incorrect", "coarsened": "correct"}
        self.scripts = scripts or {}
        self.calls = defaultdict(int)
        self.lock = threading.Lock()

    def __call__(self, request: dict):
        m = _PROMPT.search(last_user_text(request))
        key = (m.group("gold"), m.group("answer"))
        model = request["model"]
        if model == "lenient":
            label = "correct"
        elif model == "oracle":
            label = self.truth[key].true_label
        elif model == "by-kind":
            label = self.by_kind[self.truth[key].kind]
        elif model == "broken":  # an unusable verdict for refusals
            label = "fine" if self.truth[key].kind == "refusal" else self.truth[key].true_label
        else:
            with self.lock:
                i = self.calls[(model, key[1])]
                self.calls[(model, key[1])] += 1
            label = self.scripts[model][key[1]][i]
        return {"label": label, "reason": f"scripted {model}"}


def fake(srv, model: str, **kw) -> dict:
    return {"kind": "openai", "base_url": srv.base_url, "model": model, "api_key_env": KEY_ENV,
            "concurrency": 3, "timeout_s": 5, "retries": 0, **kw}


def cfg(backends: dict, judge: str | None = None, samples: int = 1, temperature: float = 0.1) -> Config:
    first = judge or next(iter(backends))
    return Config({"backends": backends,
                   "roles": {"generators": [first], "extractor": first, "judge": first, "query_generator": first,
                             "embedder": first},
                   "judge": {"temperature": temperature, "samples": samples}, "worker": {"batch_size": 50},
                   "scoring": {"encoder": "all-MiniLM-L6-v2", "bertscore_layers": 6}},
                  source="test-config")


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-key")


def store_cases(engine, run_ids) -> list[tuple[cal.Source, cal.Case]]:
    """(source, case) of stored case runs, rebuilt from the store for the scripted oracle."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT r.id, q.question, q.answer, r.config_hash, r.answer FROM paradigm_runs r "
            f"JOIN queries q ON q.id = r.query_id WHERE r.id IN ({','.join(map(str, run_ids))})")).all()
    return [(cal.Source(0, "", 0, "", q, g), cal.Case(0, kind, cal.KINDS[kind].true_label, a, ""))
            for _, q, g, kind, a in rows]


def calibrate(engine, cset, judges: list[str], srv_backends: dict, samples: int = 1):
    services = Services(cfg(srv_backends, judge=judges[0]), engine)
    try:
        return cal.judge_set(services, judges, cset, samples=samples, progress=False)
    finally:
        services.finish()


def test_scripted_judges_give_the_figures_they_must(store):
    add_corpus(store)
    cset = cal.ensure_set(store, n=4)
    cases = store_cases(store, cset.run_ids)
    responder = ScriptedJudges(cases)
    with FakeOpenAI(responder=responder) as srv:
        backends = {name: fake(srv, name) for name in ("lenient", "oracle", "by-kind")}
        out = calibrate(store, cset, ["lenient", "oracle", "by-kind"], backends)
        n_requests = srv.stats()["total"]
        n = len(cset.run_ids)
        assert n_requests == 3 * n  # every case of an answerable question is put to the model, refusals too
        # A second run is all done: no request.
        again = calibrate(store, cset, ["lenient", "oracle", "by-kind"], backends)
        assert srv.stats()["total"] == n_requests and all(rep.pending == 0 for rep, _ in again.values())
    lenient, oracle, by_kind = (out[j][1] for j in ("lenient", "oracle", "by-kind"))
    per = cset.cases_by_label
    refusals = sum(c.kind == "refusal" for _, c in cases)
    assert refusals == 4  # one per source; the judge stage's rule labels them incomplete whatever the model says
    # lenient says "correct" to all; the rules over the verdict make refusals and answers that
    # lack a figure of the gold (a coarsened time, an altered number) incomplete
    ruled = [("incomplete" if c.kind == "refusal" else jd.apply_gate(jd.Gate(), "correct", src.question,
                                                                    src.answer, c.answer)) for src, c in cases]
    order = ["correct", "incorrect", "incomplete"]
    expected = [[sum(c.true_label == t and r == p for r, (_, c) in zip(ruled, cases)) for p in order] for t in order]
    assert lenient.confusion == expected
    assert lenient.agreement == {t: expected[i][i] / per[t] for i, t in enumerate(order)}
    not_correct = [r for r, (_, c) in zip(ruled, cases) if c.true_label != "correct"]
    assert lenient.binary["false_correct"] == pytest.approx(not_correct.count("correct") / (n - per["correct"]))
    assert lenient.binary["missed_correct"] == 0.0
    assert oracle.kappa == pytest.approx(1.0) and oracle.accuracy == 1.0
    assert oracle.confusion == [[per["correct"], 0, 0], [0, per["incorrect"], 0], [0, 0, per["incomplete"]]]
    # by-kind: paraphrase -> incomplete, first_clause -> correct, altered -> correct (refusals: the rule).
    said = {k: ("incomplete" if k == "refusal" else v) for k, v in responder.by_kind.items()}
    assert by_kind.by_kind == {k: float(said[k] == cal.KINDS[k].true_label) for k in {c.kind for _, c in cases}}
    assert by_kind.by_kind["altered"] == 0.0 and by_kind.by_kind["refusal"] == 1.0
    y_true = [c.true_label for _, c in cases]
    y_pred = [said[c.kind] for _, c in cases]
    assert by_kind.kappa == pytest.approx(cohen_kappa_score(y_true, y_pred, labels=list(jd.LABELS)))
    assert by_kind.calls == n and by_kind.call_seconds > 0
    # Judgments: flagged, one per case and judge; v_judgment ignores them; the view agrees.
    assert scalar(store, "SELECT COUNT(*) FROM judgments WHERE is_calibration") == 3 * n
    assert scalar(store, "SELECT COUNT(*) FROM judgments WHERE NOT is_calibration") == 0
    assert scalar(store, "SELECT COUNT(*) FROM v_judgment") == 0
    assert scalar(store, "SELECT COUNT(*) FROM llm_calls WHERE stage = 'calibrate'") == 3 * n
    check_view_matches(store, {out[j][1].judge: out[j][1] for j in out})
    assert out["oracle"][1].judge == jd.judge_key("oracle")  # backend/prompt version: the judgment key


def check_view_matches(engine, figs: dict) -> None:
    from ragrouter.report import calibration as rc

    df = rc.frame(engine)
    for judge, fig in figs.items():
        block = df[df["judge"] == judge]
        assert set(block["case_set"]) == {cal.VERSION}
        assert rc.confusion(block) == fig.confusion
        for lab in jd.LABELS:
            assert float(block[block["true_label"] == lab]["agreement"].iloc[0]) == pytest.approx(fig.agreement[lab])
        summ = rc.summary(df).set_index("judge")
        expected = None if math.isnan(fig.kappa) else fig.kappa
        assert summ.loc[judge, "kappa"] == pytest.approx(expected)


def test_repeated_calibration_samples_take_the_majority(store):
    add_corpus(store)
    cset = cal.ensure_set(store, n=1)  # 6 cases of one source
    cases = store_cases(store, cset.run_ids)
    seqs = [["correct", "correct", "incorrect"], ["incomplete", "correct", "incorrect"],  # 3-way tie -> incorrect
            ["incomplete", "incomplete", "incomplete"], ["correct", "incomplete", "incomplete"],
            ["incorrect", "correct", "incorrect"], ["correct", "incorrect", "correct"]]
    script = {c.answer: seqs[i] for i, (_, c) in enumerate(cases)}
    with FakeOpenAI(responder=ScriptedJudges(cases, {"voter": script})) as srv:
        out = calibrate(store, cset, ["voter"], {"voter": fake(srv, "voter")}, samples=3)
        assert srv.stats()["total"] == 18
    rows = {r["kind"]: r for r in cal.case_labels(store, [jd.judge_key("voter")], cset.run_ids)}
    for i, (_, c) in enumerate(cases):
        assert rows[c.kind]["raw_labels"] == seqs[i]  # the model's verdicts, sample by sample
        if c.kind == "refusal":  # labelled by the judge stage's rule, whatever the model said
            assert rows[c.kind]["labels"] == ["incomplete"] * 3 and rows[c.kind]["label"] == "incomplete"
            seqs[i] = ["incomplete"] * 3
            continue
        assert rows[c.kind]["labels"] == seqs[i]
        assert (rows[c.kind]["label"], rows[c.kind]["agreement"]) == jd.majority(seqs[i])
    assert rows[cases[1][1].kind]["label"] == "incorrect"
    fig = out["voter"][1]
    assert fig.samples == 3
    assert fig.mean_sample_agreement == pytest.approx(sum(jd.majority(s)[1] for s in seqs) / 6)
    check_view_matches(store, {fig.judge: fig})
    from ragrouter.report import calibration as rc

    view = rc.frame(store)
    expected = sum(jd.majority(s)[1] for s in seqs) / 6
    got = sum(view["avg_sample_agreement"] * view["n_cases"]) / view["n_cases"].sum()
    assert got == pytest.approx(expected)


def test_cases_without_a_usable_verdict_are_counted_and_retried(store):
    add_corpus(store)
    cset = cal.ensure_set(store, n=3)
    responder = ScriptedJudges(store_cases(store, cset.run_ids))
    with FakeOpenAI(responder=responder) as srv:
        (rep, fig), = calibrate(store, cset, ["broken"], {"broken": fake(srv, "broken")}).values()
        assert (rep.done, rep.failed) == (15, 3)
        assert fig.n_cases == 15 and fig.unjudged == 3 and fig.kappa == pytest.approx(1.0)
        assert "3 case(s) without a verdict" in cal.render(fig)
        assert scalar(store, "SELECT COUNT(*) FROM unit_failures WHERE stage = 'calibrate'") == 3
        # The next run retries exactly the failed cases.
        before = srv.stats()["total"]
        (rep, fig), = calibrate(store, cset, ["broken"], {"broken": fake(srv, "broken")}).values()
        assert rep.pending == 3 and srv.stats()["total"] == before + 3


def test_calibration_on_postgres(pg_url):
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate

    engine = eng.make_engine(pg_url)
    try:
        migrate.upgrade(engine)
        add_corpus(engine)
        cset = cal.ensure_set(engine, n=2)
        assert cal.ensure_set(engine, n=2).new_cases == 0
        cases = store_cases(engine, cset.run_ids)
        with FakeOpenAI(responder=ScriptedJudges(cases)) as srv:
            out = calibrate(engine, cset, ["by-kind"], {"by-kind": fake(srv, "by-kind")})
        check_view_matches(engine, {out["by-kind"][1].judge: out["by-kind"][1]})
        assert out["by-kind"][1].n_cases == 12
    finally:
        eng.dispose_all()


def test_report_section(store, tmp_path):
    from ragrouter.report import calibration as rc

    assert "No data" in rc.section(store)
    add_corpus(store)
    cset = cal.ensure_set(store, n=2)
    with FakeOpenAI(responder=ScriptedJudges(store_cases(store, cset.run_ids))) as srv:
        calibrate(store, cset, ["oracle", "lenient"], {"oracle": fake(srv, "oracle"), "lenient": fake(srv, "lenient")})
    md = rc.section(store, tmp_path)
    assert md.startswith("## Judge calibration")
    assert ("**Judge `oracle/judge-v4/figures`** (case set `calib-v2`, N = 12 cases): accuracy 100%, Cohen's kappa 1.00 "
            "[1.00, 1.00]; correct vs. not correct: accuracy 100%, kappa 1.00 [1.00, 1.00], wrong or incomplete "
            "answers judged correct 0%") in md
    # lenient: every case judged correct, except the two refusals the judge stage's rule labels incomplete
    from ragrouter.evaluation.agreement import kappa_interval

    low, high = kappa_interval([[4, 0], [6, 2]])
    assert ("**Judge `lenient/judge-v4/figures`** (case set `calib-v2`, N = 12 cases): accuracy 50%, Cohen's kappa 0.25 "
            f"[0.00, 0.58]; correct vs. not correct: accuracy 50%, kappa 0.18 [{low:.2f}, {high:.2f}], wrong or "
            "incomplete answers judged correct 75%") in md
    assert "| incorrect | 4 | 4 | 0 | 0 | 0% |" in md and "| incomplete | 4 | 2 | 0 | 2 | 50% |" in md
    assert (tmp_path / "judge_calibration.csv").read_text().startswith("judge,case_set,true_label,n_cases")
    # A store migrated before the view existed says what to do instead of failing.
    with store.begin() as conn:
        conn.execute(text("DROP VIEW v_judge_calibration"))
    assert "run 'python cli.py db upgrade'" in rc.section(store)


# ---------------------------------------------------------------------------------------------
# Repeated judging in the judge stage (majority voting, ties, k = 1)


def add_runs(engine, answers: list[str]) -> list[int]:
    with engine.begin() as conn:
        cid = conn.execute(insert(models.Corpus).values(name="runs").returning(models.Corpus.id)).scalar_one()
        qid = conn.execute(insert(models.Query).values(
            corpus_id=cid, external_id="q1", origin="imported", qtype="factual", question="Which organs?",
            answer="The liver and the lungs.", status="accepted").returning(models.Query.id)).scalar_one()
        ids = []
        for i, a in enumerate(answers):
            ids.append(conn.execute(insert(models.ParadigmRun).values(
                query_id=qid, paradigm=f"p{i}", generator="gen", config_hash="h", answer=a, context_tokens=0,
                iterations=0, ret_in_tokens=0, ret_out_tokens=0, gen_in_tokens=0, gen_out_tokens=0)
                .returning(models.ParadigmRun.id)).scalar_one())
    return ids


def judge_stage(engine, config) -> None:
    services = Services(config, engine)
    try:
        rep = run_stage(JudgeStage(), services, Scope(config=config), progress=False)
        assert rep.failed == 0, rep.errors
    finally:
        services.finish()


def v_judgment(engine) -> dict[int, tuple]:
    with engine.connect() as conn:
        return {int(r[0]): (r[1], int(r[2]), float(r[3])) for r in conn.execute(text(
            "SELECT run_id, label, n_samples, agreement FROM v_judgment"))}


@pytest.mark.parametrize("k, scripts, expected", [
    (4, {"a": ["correct", "correct", "correct", "incorrect"],       # clear majority
         "b": ["correct", "incorrect", "correct", "incorrect"],     # tie -> the worse label
         "c": ["incomplete", "correct", "correct", "incomplete"],   # tie -> incomplete beats correct
         "d": ["correct", "incomplete", "incorrect", "incorrect"]},
     {"a": ("correct", 0.75), "b": ("incorrect", 0.5), "c": ("incomplete", 0.5), "d": ("incorrect", 0.5)}),
    (3, {"a": ["correct", "incomplete", "incorrect"],                # three-way tie -> incorrect
         "b": ["incomplete", "correct", "incomplete"],
         "c": ["correct", "correct", "correct"]},
     {"a": ("incorrect", 1 / 3), "b": ("incomplete", 2 / 3), "c": ("correct", 1.0)}),
])
def test_judge_stage_keeps_the_majority_of_k_samples(store, k, scripts, expected):
    ids = dict(zip(scripts, add_runs(store, list(scripts))))
    with FakeOpenAI(responder=ScriptedJudges(scripts={"voter": scripts})) as srv:
        judge_stage(store, cfg({"voter": fake(srv, "voter")}, samples=k))
        assert srv.stats()["total"] == k * len(scripts)
        sent = [r["body"] for r in srv.requests]
    assert {b["temperature"] for b in sent} == {0.1}  # sampled judging: temperature > 0
    got = v_judgment(store)
    with store.connect() as conn:
        stored = defaultdict(list)
        for run_id, _, label in conn.execute(text(
                "SELECT run_id, sample_index, label FROM judgments ORDER BY run_id, sample_index")):
            stored[int(run_id)].append(label)
    for name, run_id in ids.items():
        assert stored[run_id] == scripts[name]  # sample i = the i-th verdict
        assert got[run_id] == (expected[name][0], k, pytest.approx(expected[name][1]))
        assert jd.majority(stored[run_id]) == (expected[name][0], pytest.approx(expected[name][1]))


def test_k1_is_the_single_judge_path_and_more_samples_reuse_it(store):
    from ragrouter.llm.gateway import Gateway

    answers = ["The liver.", "The liver and the lungs.", "The kidneys."]
    ids = add_runs(store, answers)
    scripts = {a: ["incomplete", "correct", "incorrect"] for a in answers}
    scripts["The liver and the lungs."] = ["correct", "incorrect", "incorrect"]
    with FakeOpenAI(responder=ScriptedJudges(scripts={"voter": scripts})) as srv:
        config = cfg({"voter": fake(srv, "voter")}, samples=1)
        judge_stage(store, config)
        assert srv.stats()["total"] == 3
        with store.connect() as conn:
            first = {int(r[0]): (r[1], int(r[2])) for r in conn.execute(text(
                "SELECT run_id, label, llm_call_id FROM judgments WHERE sample_index = 0"))}
        assert v_judgment(store) == {ids[0]: ("incomplete", 1, 1.0), ids[1]: ("correct", 1, 1.0),
                                     ids[2]: ("incomplete", 1, 1.0)}
        # k = 1 is exactly one plain judge call: the same request (no sample index) is a cache hit
        # with the same ledger row and label.
        gw = Gateway(config, store)
        try:
            for run_id, answer in zip(ids, answers):
                res = gw.chat("judge", jd.messages("Which organs?", "The liver and the lungs.", answer),
                              temperature=0.1, max_tokens=300, json_schema=jd.SCHEMA, stage="judge", phase="judge")
                assert res.cached and res.call_id == first[run_id][1]
                assert jd.parse_label(res.data)[0] == first[run_id][0]
        finally:
            gw.close()
        assert srv.stats()["total"] == 3
        # Raising k to 3 asks only samples 1 and 2; sample 0 stays as it was.
        judge_stage(store, cfg({"voter": fake(srv, "voter")}, samples=3))
        assert srv.stats()["total"] == 3 + 2 * 3
    with store.connect() as conn:
        again = {int(r[0]): (r[1], int(r[2])) for r in conn.execute(text(
            "SELECT run_id, label, llm_call_id FROM judgments WHERE sample_index = 0"))}
    assert again == first
    assert v_judgment(store) == {ids[0]: ("incorrect", 3, pytest.approx(1 / 3)),
                                 ids[1]: ("incorrect", 3, pytest.approx(2 / 3)),
                                 ids[2]: ("incorrect", 3, pytest.approx(1 / 3))}


@pytest.mark.parametrize("k", [1, 3])
def test_refusals_are_incomplete_without_a_judge_call(store, k):
    answers = ["I cannot answer", "", "I don't know.", "The liver."]
    ids = add_runs(store, answers)
    scripts = {a: ["correct"] * k for a in answers}
    with FakeOpenAI(responder=ScriptedJudges(scripts={"voter": scripts})) as srv:
        judge_stage(store, cfg({"voter": fake(srv, "voter")}, samples=k))
        assert srv.stats()["total"] == k  # only the real answer was sent to the judge
    with store.connect() as conn:
        stored = {(int(r[0]), int(r[1])): (r[2], r[3], r[4]) for r in conn.execute(text(
            "SELECT run_id, sample_index, label, llm_call_id, reason FROM judgments"))}
    assert len(stored) == k * len(answers)
    for run_id in ids[:3]:
        for i in range(k):
            label, call_id, reason = stored[(run_id, i)]
            assert (label, call_id) == ("incomplete", None) and "refusal" in reason
    assert all(stored[(ids[3], i)][:1] == ("correct",) and stored[(ids[3], i)][1] is not None for i in range(k))


# ---------------------------------------------------------------------------------------------
# Command line


@pytest.fixture
def cli_main():
    import cli as cli_module

    from ragrouter.commands.judge import judge_group

    if "judge" not in cli_module.cli.commands:
        cli_module.cli.add_command(judge_group)
    return cli_module.main


def write_config(path, srv, names) -> str:
    import yaml

    path.write_text(yaml.safe_dump({
        "backends": {name: fake(srv, name) for name in names},
        "roles": {"judge": names[0]}, "judge": {"samples": 1}}))
    return str(path)


def test_cli_judge_calibrate(store, duck_url, tmp_path, cli_main, capsys):
    add_corpus(store)
    from ragrouter.db import engine as eng

    eng.dispose_all()  # the CLI opens the file itself
    responder = ScriptedJudges()
    with FakeOpenAI(responder=responder) as srv:
        config = write_config(tmp_path / "c.yaml", srv, ["oracle", "lenient"])
        # The oracle needs the truth: build the set first (the command reuses it).
        assert cli_main(["--db", duck_url, "--config", config, "judge", "cases", "--n", "2", "--format", "json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert len(listed) == 12 and {r["kind"] for r in listed} <= set(cal.KINDS)
        for r in listed:
            assert r["true_label"] == cal.KINDS[r["kind"]].true_label
        gold_of = {q: a for _, _, q, a in SOURCES}
        responder.truth = {(gold_of[r["question"]], r["answer"]): cal.Case(0, r["kind"], r["true_label"], r["answer"], "")
                           for r in listed}
        code = cli_main(["--db", duck_url, "--config", config, "judge", "calibrate", "--judge", "judge",
                         "--judge", "lenient", "--n", "2", "--format", "json", "--quiet"])
        out = capsys.readouterr()
        assert code == 0, out.err
        data = json.loads(out.out)
        assert data["cases"] == 12 and [j["backend"] for j in data["judges"]] == ["oracle", "lenient"]
        assert [j["judge"] for j in data["judges"]] == ["oracle/judge-v4/figures", "lenient/judge-v4/figures"]
        oracle, lenient = data["judges"]
        assert oracle["kappa"] == pytest.approx(1.0) and oracle["model"] == "oracle" and oracle["failed"] == 0
        # lenient: correct to everything but the two refusals, which the judge stage's rule labels incomplete
        assert lenient["kappa"] == pytest.approx(0.25) and lenient["agreement"]["correct"] == 1.0
        assert lenient["binary"]["false_correct"] == 0.75 and oracle["binary"]["kappa"] == pytest.approx(1.0)
        assert lenient["binary"]["n"] == 12 and lenient["binary"]["kappa_low"] <= lenient["binary"]["kappa"]
        assert oracle["confusion"] == [[4, 0, 0], [0, 4, 0], [0, 0, 4]]
        code = cli_main(["--db", duck_url, "--config", config, "judge", "calibrate", "--judge", "oracle", "--n", "2",
                         "--quiet"])
        out = capsys.readouterr().out
        assert code == 0
        assert "judge oracle/judge-v4/figures (model oracle): 12 cases, 1 sample(s) each; accuracy 100%, Cohen's kappa 1.00" in out
        assert "N = 12, accuracy 100%, kappa 1.00 [1.00, 1.00] (95 % bootstrap interval)" in out
        assert "this run: 0 case(s) judged" in out  # all cached / done
        # One-line errors naming the setting.
        code = cli_main(["--db", duck_url, "--config", config, "judge", "calibrate", "--judge", "nowhere"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code != 0 and len(err) == 1 and "backend 'nowhere'" in err[0]
        code = cli_main(["--db", duck_url, "--config", config, "judge", "calibrate", "--corpus", "absent"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code != 0 and len(err) == 1 and "corpus 'absent'" in err[0]


# ---------------------------------------------------------------------------------------------
# The evidence gate (judge.gate): a rule over the verdict, recorded in the judgment key


def test_gate_rule_and_judge_key():
    gate = jd.Gate(enabled=True, min_semantic_f1=0.5)
    q, gold = "Which organs does the drug harm?", "The liver and the lungs."
    assert jd.evidence_words(q, gold) == {"liver", "lungs"}
    # Only "correct" verdicts are gated; a shared evidence word keeps them without an F1.
    assert jd.apply_gate(gate, "correct", q, gold, "Mainly the liver.", lambda: pytest.fail("F1 not needed")) == "correct"
    assert jd.apply_gate(gate, "incomplete", q, gold, "Contract.", 0.0) == "incomplete"
    # A word the question already gives is no evidence (the gate alone, without the rules of judge.figures).
    only_gate = jd.Gate(enabled=True, min_semantic_f1=0.5, figures=False)
    assert jd.apply_gate(only_gate, "correct", q, gold, "The drug harms organs.", 0.2) == "incorrect"
    assert jd.apply_gate(only_gate, "correct", q, gold, "The drug harms organs.", 0.5) == "correct"
    # with the rules on (judge.figures) an answer that only restates the question is not correct, whatever its F1
    assert jd.apply_gate(gate, "correct", q, gold, "The drug harms organs.", 0.5) == "incomplete"
    assert jd.apply_gate(jd.Gate(enabled=False), "correct", q, gold, "Contract.", 0.0) == "correct"
    # A gold whose every content word is in the question: all of them count.
    assert jd.evidence_words("Is it the liver?", "The liver.") == {"liver"}
    assert jd.judge_key("b") == f"b/{jd.PROMPT_VERSION}/figures"
    assert jd.judge_key("b", gate=gate) == f"b/{jd.PROMPT_VERSION}/figures/gate-f1-0.5"
    assert jd.key_backend(jd.judge_key("b", gate=gate)) == "b"
    config = Config({"judge": {"gate": {"enabled": True, "min_semantic_f1": 0.7}}}, source="t.yaml")
    assert jd.gate_from_config(config) == jd.Gate(True, 0.7)
    from ragrouter.config import ConfigError

    with pytest.raises(ConfigError, match="t.yaml: setting 'judge.gate.min_semantic_f1'"):
        jd.gate_from_config(Config({"judge": {"gate": {"min_semantic_f1": 2}}}, source="t.yaml"))


def test_judge_stage_gate_relabels_from_the_cache(store):
    from ragrouter.evaluation.metrics import SemanticF1

    answers = ["The liver and the lungs.", "The name of the contract is Contract.", "Hepatic and pulmonary tissue.",
               "I cannot answer"]
    ids = add_runs(store, answers)
    f1 = SemanticF1(num_layers=6).score([answers[2]], ["The liver and the lungs."])[0]
    thr = round(float(f1) - 0.01, 3)  # the synonym answer passes by its F1 alone
    with FakeOpenAI(responder=ScriptedJudges()) as srv:
        plain = cfg({"lenient": fake(srv, "lenient")})
        judge_stage(store, plain)
        assert srv.stats()["total"] == 3  # the refusal needs no call
        gated = Config({**plain.data, "judge": {**plain.data["judge"],
                                                "gate": {"enabled": True, "min_semantic_f1": thr}}}, source="g")
        judge_stage(store, gated)
        assert srv.stats()["total"] == 3  # a new gate asks nothing again: the calls are cache hits
    with store.connect() as conn:
        rows = {(r[0], int(r[1])): (r[2], r[3]) for r in conn.execute(text(
            "SELECT judge, run_id, label, raw_label FROM judgments"))}
    key_plain, key_gated = jd.judge_key("lenient"), jd.judge_key("lenient", gated)
    assert key_gated == f"lenient/{jd.PROMPT_VERSION}/figures/gate-f1-{thr:g}"
    assert [rows[(key_plain, i)] for i in ids] == [("correct", "correct")] * 3 + [("incomplete", None)]
    assert [rows[(key_gated, i)] for i in ids] == [("correct", "correct"), ("incorrect", "correct"),
                                                  ("correct", "correct"), ("incomplete", None)]
    # The figures' judge follows the configured gate (what routing and the report prefer).
    from ragrouter.report.data import choose_judge

    assert choose_judge(store, jd.judge_key("lenient", gated)) == key_gated


def test_calibration_variants_from_the_same_verdicts(store):
    add_corpus(store)
    cset = cal.ensure_set(store, n=2)
    with FakeOpenAI(responder=ScriptedJudges(store_cases(store, cset.run_ids))) as srv:
        (rep, fig), = calibrate(store, cset, ["lenient"], {"lenient": fake(srv, "lenient")}).values()
        n = srv.stats()["total"]
    rows = cal.case_labels(store, [fig.judge], cset.run_ids)
    f1_calls = []

    def sem(answer, gold):
        f1_calls.append(answer)
        return 0.0

    figs = {v: cal.figures(cal.relabel(rows, v, jd.Gate(True, 0.5), sem), fig.judge) for v in cal.VARIANTS}
    assert n == len(cset.run_ids) == 12 and figs["model"].confusion == [[4, 0, 0], [4, 0, 0], [4, 0, 0]]
    assert fig.confusion == figs["stage"].confusion == [[4, 0, 0], [4, 0, 0], [2, 0, 2]]  # stored: the rules
    # stage: the two refusals become incomplete; gated: other golds share no evidence word.
    by = {k: v for k, v in zip(cal.VARIANTS, (figs[v].by_kind for v in cal.VARIANTS))}
    refusals = [r for r in rows if r["kind"] == "refusal"]
    caught = sum(jd.is_refusal(r["answer"]) for r in refusals) / len(refusals)
    assert by["model"]["refusal"] == 0.0 and by["stage"]["refusal"] == by["gated"]["refusal"] == caught
    # the gate makes the refusals the rule misses "incorrect": not correct either way
    assert all(r["label"] != "correct" for r in cal.relabel(refusals, "gated", jd.Gate(True, 0.5), lambda a, g: 0.0))
    other = [r for r in rows if r["kind"] == "other_gold"]
    assert all(not jd.shares_evidence(r["question"], r["gold"], r["answer"]) for r in other)
    assert by["stage"]["other_gold"] == 0.0 and by["gated"]["other_gold"] == 1.0
    # F1 only where a "correct" verdict shares no evidence word (once per case)
    need = [r["answer"] for r in rows if not jd.is_refusal(r["answer"])
            and not jd.shares_evidence(r["question"], r["gold"], r["answer"])]
    assert sorted(f1_calls) == sorted(need) and set(r["answer"] for r in other) <= set(need)
    # a lenient judge keeps "correct" exactly where the answer carries an evidence word
    kept = [r for r in rows if r["true_label"] != "correct" and not jd.is_refusal(r["answer"])
            and jd.shares_evidence(r["question"], r["gold"], r["answer"])]
    assert {r["kind"] for r in kept} <= {"first_clause", "altered"} and len(kept) >= 2
    assert figs["gated"].binary["false_correct"] == pytest.approx(len(kept) / 8)
    assert figs["gated"].binary["missed_correct"] == 0.0  # golds and paraphrases share their words
    assert figs["model"].binary["false_correct"] == 1.0


def test_cached_subset_needs_no_call(store):
    add_corpus(store)
    small, big = cal.ensure_set(store, n=1), cal.ensure_set(store, n=2)
    with FakeOpenAI(responder=ScriptedJudges(store_cases(store, big.run_ids))) as srv:
        calibrate(store, small, ["oracle"], {"oracle": fake(srv, "oracle")})
        n = srv.stats()["total"]
        services = Services(cfg({"oracle": fake(srv, "oracle"), "lenient": fake(srv, "lenient")}), store)
        try:
            part = cal.cached_subset(services, "oracle", big, 1)
            assert part.run_ids == small.run_ids and cal.cached_subset(services, "lenient", big, 1).run_ids == []
            assert cal.cached_subset(services, "oracle", big, 2).run_ids == []  # sample 1 was never asked
        finally:
            services.finish()
        assert srv.stats()["total"] == n == 6


# ---------------------------------------------------------------------------------------------
# Precision, extra detail, short golds and unanswerable questions (issue 30 item 3)


def test_the_registry_and_the_view_give_every_kind_the_same_label():
    from pathlib import Path

    sql = (Path(__file__).resolve().parents[1] / "queries" / "views" / "160_v_judge_calibration.sql").read_text()
    pairs = dict(re.findall(r"WHEN '(\w+)' THEN '(\w+)'", sql.split("CASE r.config_hash")[1].split("END")[0]))
    assert pairs == {k: kind.true_label for k, kind in cal.KINDS.items()}
    assert {k for k, kind in cal.KINDS.items() if kind.unanswerable} == {"unanswerable_refusal", "unanswerable_answer"}
    assert cal.KINDS["coarsened"].true_label == "incomplete" and cal.KINDS["extra_clause"].true_label == "correct"


@pytest.mark.parametrize("gold, expected", [
    ("5:30 PM", "5 PM"),
    ("The shift ends at 5:30 p.m. on Fridays.", "The shift ends at 5 PM on Fridays."),
    ("The meeting starts at 17:45.", "The meeting starts at about 17 o'clock."),
    ("It was signed on March 4, 2021.", "It was signed on March 2021."),
    ("It was signed on 4th March 2021.", "It was signed on March 2021."),
    ("2021-03-04", "2021"),
    ("The report is due March 4.", "The report is due March."),
    ("She was born in 1994.", "She was born in the 1990s."),
    ("Take 3.75 mg twice a day.", "Take about 4 mg twice a day."),
    ("27 patients were enrolled.", "about 30 patients were enrolled."),
    ("It has 1,234 members.", "It has about 1,000 members."),
])
def test_coarsened_golds_are_less_precise(gold, expected):
    out, rule = cal.coarsen(gold)
    assert out == expected and rule


@pytest.mark.parametrize("gold", ["It was red.", "5:00 PM", "80% of cases", "Stage 2 disease.", ""])
def test_coarsen_skips_golds_without_a_figure_to_blur(gold):
    assert cal.coarsen(gold) is None


def test_short_golds_yield_cases_and_are_selected():
    short = cal.Source(1, "q-shift", 1, "factual", "When does Maria's shift end on Fridays?", "5:30 PM",
                       context=("Maria works at the bakery on Main Street. Her shift ends at 5:30 PM.",))
    donor = cal.Source(2, "q-car", 1, "factual", "What does Maria drive?", "A blue bicycle.")
    pool = cal.Pool([short, donor])
    cases = {c.kind: c for c in cal.build_cases(short, pool)}
    assert list(cases) == ["gold", "paraphrase", "extra_clause", "refusal", "coarsened", "other_gold", "altered"]
    assert cases["coarsened"].answer == "5 PM" and cases["coarsened"].true_label == "incomplete"
    assert cases["extra_clause"].answer == "5:30 PM. Maria works at the bakery on Main Street."
    assert cases["altered"].answer == "10:30 PM" and cases["other_gold"].answer == "A blue bicycle."
    assert {s.external_id for s, _ in cal.select_sources([short, donor], 5)} == {"q-shift", "q-car"}


def test_extra_clause_needs_a_new_true_sentence():
    assert cal.extra_clause("5:30 PM", ()) is None
    assert cal.extra_clause("5:30 PM", ("Her shift ends at 5:30 PM.",)) == (
        "5:30 PM. Her shift ends at 5:30 PM.", "gold plus a sentence of evidence text 1")
    # a sentence that adds nothing (its content words are all in the gold) or refuses is skipped
    assert cal.extra_clause("The liver and the lungs are affected.", (
        "The lungs and the liver are affected.", "I cannot answer that.", "Too short.",
        "Both organs recover within weeks after treatment.")) == (
        "The liver and the lungs are affected. Both organs recover within weeks after treatment.",
        "gold plus a sentence of evidence text 4")


def test_unanswerable_sources_yield_a_right_refusal_and_a_hallucination():
    marked = cal.Source(1, "q-colour", 1, "factual", "What colour is Maria's car?", "Insufficient information",
                        unanswerable=True)
    other = cal.Source(2, "q-pet", 1, "factual", "What is Maria's dog called?", "Insufficient information",
                       unanswerable=True)
    answerable = cal.Source(3, "q-shift", 1, "factual", "When does Maria's shift end?", "5:30 PM")
    pool = cal.Pool([marked, other, answerable])
    cases = cal.build_cases(marked, pool)
    assert [(c.kind, c.true_label) for c in cases] == [("unanswerable_refusal", "correct"),
                                                        ("unanswerable_answer", "incorrect")]
    assert cases[0].answer in cal.REFUSALS and cases[1].answer == "5:30 PM"  # never another refusal gold
    assert {c.kind for c in cal.build_cases(answerable, pool)} >= {"gold", "coarsened", "altered"}
    assert "other_gold" not in {c.kind for c in cal.build_cases(answerable, pool)}  # no answerable donor
    chosen = cal.select_sources([marked, other, answerable], 10, pool)
    assert [s.external_id for s, _ in chosen][-1] in {"q-colour", "q-pet"}  # a group of their own, last


def test_kappa_interval():
    from ragrouter.evaluation.agreement import kappa_from_confusion, kappa_interval

    assert kappa_interval([[6, 0], [0, 6]]) == (1.0, 1.0)
    assert all(math.isnan(v) for v in kappa_interval([[0, 0], [0, 0]]))
    m = [[40, 10], [5, 45]]
    k = kappa_from_confusion(m)
    low, high = kappa_interval(m)
    assert low < k < high and kappa_interval(m) == (low, high)  # seeded
    low4, high4 = kappa_interval([[4 * v for v in row] for row in m])
    assert 0.35 < (high4 - low4) / (high - low) < 0.65  # ~1/sqrt(4) with four times the cases
    # the analytic large-sample interval (Fleiss, Cohen and Everitt 1969) agrees at N = 400
    from sklearn.metrics import cohen_kappa_score

    y = [0] * 160 + [0] * 40 + [1] * 20 + [1] * 180
    p = [0] * 160 + [1] * 40 + [0] * 20 + [1] * 180
    assert kappa_from_confusion([[160, 40], [20, 180]]) == pytest.approx(cohen_kappa_score(y, p))


def test_the_prompt_asks_for_precision_and_allows_extra_detail():
    assert jd.PROMPT_VERSION == "judge-v4" and jd.judge_key("b") == "b/judge-v4/figures"
    assert "'5 PM' for a gold of '5:30 PM'" in jd.SYSTEM and "extra true detail" in jd.SYSTEM
    assert "less precise than the gold" in jd.SYSTEM


def test_calibration_stage_applies_the_judge_rules(store):
    with store.begin() as conn:
        cid = conn.execute(insert(models.Corpus).values(name="logs").returning(models.Corpus.id)).scalar_one()
        for ext, q, a, marked in (("q-shift", "When does Maria's shift end on Fridays?", "5:30 PM", False),
                                  ("q-car", "What does Maria drive?", "A blue bicycle.", False),
                                  ("q-colour", "What colour is Maria's car?", "Insufficient information", True)):
            conn.execute(insert(models.Query).values(corpus_id=cid, external_id=ext, origin="imported",
                                                     qtype="factual", question=q, answer=a, status="accepted",
                                                     unanswerable=marked))
    cset = cal.ensure_set(store, n=3)
    with store.connect() as conn:
        kinds = {r[0]: (r[1], bool(r[2])) for r in conn.execute(text(
            "SELECT r.config_hash, r.id, q.unanswerable FROM paradigm_runs r JOIN queries q ON q.id = r.query_id "
            "WHERE q.external_id = 'calib:q-colour'"))}
    assert set(kinds) == {"unanswerable_refusal", "unanswerable_answer"} and all(m for _, m in kinds.values())
    with FakeOpenAI(responder=ScriptedJudges(scripts={})) as srv:
        [(report, fig)] = calibrate(store, cset, ["lenient"], {"lenient": fake(srv, "lenient")}).values()
        calls = srv.stats()["total"]
    assert calls == len(cset.run_ids) - 2  # the unanswerable question's two cases need no call
    rows = {c["kind"]: c for c in cal.case_labels(store) if c["run_id"] in cset.run_ids}
    assert rows["unanswerable_refusal"]["label"] == "correct"
    assert rows["unanswerable_answer"]["label"] == "incorrect"
    assert rows["refusal"]["label"] == "incomplete" and rows["refusal"]["raw_labels"] == ["correct"]  # model asked
    # the lenient judge calls '5 PM' correct; the figures rule holds it to the gold's '5:30 PM'
    assert rows["coarsened"]["label"] == "incomplete" and rows["coarsened"]["raw_labels"] == ["correct"]
    b = fig.binary
    assert b["n"] == len(cset.run_ids) and b["kappa_low"] <= b["kappa"] <= b["kappa_high"]
    text_out = cal.render(fig)
    assert f"N = {len(cset.run_ids)}" in text_out and "incorrect and incomplete merged" in text_out
