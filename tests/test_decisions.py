"""Decisions a user can afford (issue 29): the anytime-valid sequential rule, ``run
--until-decided`` on the fake endpoint, and time in every dry-run estimate."""

from __future__ import annotations

import hashlib
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from ragrouter.decisions import sequential as sq
from ragrouter.evaluation import judge as jd
from ragrouter.paradigms import prompts
from tests.fake_openai import FakeOpenAI
from tests.test_stages_answer import fake_config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


# ---------------------------------------------------------------------------------------------
# The rule


def test_the_wealth_is_the_product_of_the_bets():
    """log_growth over a batch's counts equals the product of 1 + λ(D − m) query by query."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        d = rng.choice([-1, 0, 1], size=12)
        lam, m = float(rng.uniform(0, 0.8)), float(rng.uniform(-0.1, 0))
        ref = float(np.sum(np.log1p(lam * (d - m))))
        got = float(sq.log_growth(lam, (d == 1).sum(), (d == 0).sum(), (d == -1).sum(), m))
        assert math.isclose(got, ref, rel_tol=1e-12, abs_tol=1e-12)


def test_the_confidence_sequence_holds_its_level_at_every_look():
    """Two paradigms exactly ε apart (δ = −ε, the boundary of the ε test): over 2,000 seeded
    sequences of 300 queries, looked at after every batch, the test 'first within ε of the
    second' fires in at most its level a = α/K of them; likewise 'better' with δ = 0. And the
    reported lower bound is the bisection of the wealth's threshold crossing."""
    from ragrouter.decisions import simulate as sm

    settings = sq.Settings(alpha=0.2, futility=False)  # a = 0.1: measurable in a small run
    a = settings.alpha / 2
    thr = sq.log_threshold(2, settings.alpha)
    for rates, attr in (([0.50, 0.52], "log_we"), ([0.5, 0.5], "log_w0")):
        x = sm.outcomes(rates, 2000, 300, 0.0, np.random.default_rng(5))
        race = sq.Race(2, 2000)
        fired = np.zeros(2000, dtype=bool)
        for start in range(0, 300, settings.batch):
            xb = x[:, start:start + settings.batch].astype(np.int64)
            race.add(np.einsum("rij,rik->rjk", xb, 1 - xb), settings.batch, settings)
            fired |= getattr(race, attr)[:, 0, 1] >= thr
        assert fired.mean() <= a + 3 * math.sqrt(a * (1 - a) / 2000), (rates, fired.mean())
    names = ["a", "b"]
    looks = [{"a": {i: int(i % 3 != 0) for i in range(b * 10, b * 10 + 10)},
              "b": {i: int(i % 2 == 0) for i in range(b * 10, b * 10 + 10)}} for b in range(8)]
    cell = sq.evaluate(names, looks, sq.Settings(futility=False))
    low = cell.pairs[0]["diff_low"]
    race = sq.Race(2, 1)
    for look in looks:
        n10 = np.array([[[0, sum(look["a"][q] and not look["b"][q] for q in look["a"])],
                         [sum(look["b"][q] and not look["a"][q] for q in look["a"]), 0]]])
        race.add(n10, 10, sq.Settings(), keep_history=True)
    t = sq.log_threshold(2, 0.05)
    assert sq._log_w_at(race.history, np.full((2, 2), low - 1e-4))[0, 1] >= t > \
        sq._log_w_at(race.history, np.full((2, 2), low + 1e-4))[0, 1]


def _looks(rates, n_batches, batch, seed, rho=0.5):
    from ragrouter.decisions.simulate import outcomes

    rng = np.random.default_rng(seed)
    x = outcomes(rates, 1, n_batches * batch, rho, rng)[0]
    names = [f"p{i}" for i in range(len(rates))]
    return names, x, [{p: {i: int(x[i, k]) for i in range(b * batch, (b + 1) * batch)} for k, p in enumerate(names)}
                      for b in range(n_batches)]


def test_the_store_replay_and_the_simulation_take_the_same_decisions():
    """evaluate() (dict looks, the product path) and simulate.run_rule() (arrays, the plan and
    the benchmark) drive the same Race: same state, same queries used, same paradigm named."""
    from ragrouter.decisions.simulate import run_rule

    settings = sq.Settings()
    for seed, rates in enumerate([[0.2, 0.6, 0.55, 0.8, 0.5], [0.4] * 5, [0.1, 0.9, 0.3, 0.3, 0.85],
                                  [0.5, 0.62, 0.6, 0.3, 0.2]]):
        names, x, looks = _looks(rates, 40, settings.batch, seed)
        cell = sq.evaluate(names, looks, settings, horizon=400)
        sim = run_rule(x[None], settings)
        assert cell.n_queries == int(sim["stop"][0])
        assert sq.STATES[int(sim["state"][0])] == cell.state
        if cell.state in (sq.DECIDED, sq.EPS_BEST):
            assert names[int(sim["named"][0])] == cell.leader
        assert sorted(cell.dropped) == [names[k] for k in np.flatnonzero(sim["eliminated"][0])]


def test_a_planted_winner_is_decided_and_claims_say_what_holds():
    settings = sq.Settings()
    names, _, looks = _looks([0.3, 0.35, 0.8, 0.4, 0.3], 30, settings.batch, seed=3)
    cell = sq.evaluate(names, looks, settings, horizon=300)
    assert cell.state == sq.DECIDED and cell.leader == "p2" and cell.n_queries < 150
    assert set(cell.dropped) == {"p0", "p1", "p3", "p4"} and cell.bound is not None and cell.bound > 0
    assert cell.claim == ("p2 is the best paradigm; p0, p1, p3, p4 are worse than the best "
                          "(each at confidence 95%)")
    assert sq.claim_text(sq.EPS_BEST, "x", {}, 0.05, 0.02) == \
        "x is within 2 points of the best paradigm (each at confidence 95%)"


def test_five_equal_paradigms_never_decide():
    """All equal: 'decided' needs four wrong eliminations (≤ α in theory; 0 of 96,000 in the
    benchmark); here 0 of 400 seeded sequences of 600 queries, ρ 0 and 0.5."""
    from ragrouter.decisions.simulate import outcomes, run_rule

    for rho in (0.0, 0.5):
        x = outcomes([0.45] * 5, 200, 600, rho, np.random.default_rng(11))
        assert int((run_rule(x, sq.Settings())["state"] == 1).sum()) == 0


def test_a_close_runner_up_rarely_yields_a_claim_that_excludes_the_best():
    """Best 60 %, runner-up 58 % (2 points): a claim that excludes the true best — the best
    eliminated, or 'decided' on another paradigm — in at most α of 400 sequences; an ε-best
    claim may name either (both are within ε of the best)."""
    from ragrouter.decisions.simulate import correct_claim, outcomes, run_rule

    rates = [0.60, 0.58, 0.45, 0.40, 0.30]
    settings = sq.Settings()
    res = run_rule(outcomes(rates, 400, 600, 0.5, np.random.default_rng(13)), settings)
    excludes = res["eliminated"][:, 0] | ((res["state"] == 1) & (res["named"] != 0))
    assert excludes.mean() <= settings.alpha
    claimed = (res["state"] == 1) | (res["state"] == 2)
    assert (claimed & ~correct_claim(res, rates, settings.epsilon)).mean() <= settings.alpha
    # it does claim (ε-best, 8 % of these): a 2-point gap at ε = 2 points mostly needs more than 600 queries
    assert 0.04 < claimed.mean()


def test_settings_come_from_the_config_and_bad_values_are_named():
    from ragrouter.config import Config

    cfg = Config.load(env={})
    s = sq.Settings.from_config(cfg)
    assert (s.alpha, s.epsilon, s.batch, s.futility_z) == (0.05, 0.02, 10, 2.5)
    assert s == sq.Settings()  # the config's defaults are the benchmark's (bench_sequential uses Settings())
    bad = Config({**cfg.data, "decisions": {**cfg.data["decisions"], "alpha": 1.5}}, source="<t>")
    with pytest.raises(ValueError, match=r"decisions: alpha and bet_max must lie in .*alpha=1\.5"):
        sq.Settings.from_config(bad)
    bad = Config({**cfg.data, "decisions": {**cfg.data["decisions"], "bet_max": 1.0}}, source="<t>")
    with pytest.raises(ValueError, match=r"bet_max=1\.0"):
        sq.Settings.from_config(bad)


# ---------------------------------------------------------------------------------------------
# run --until-decided on the fake endpoint


def _u(*parts) -> float:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:8], 16) / 16 ** 8


def planted(naive_rate: float, llm_rate: float, correlated: bool):
    """Generation answers say which paradigm wrote them; the judge marks a question's answer
    correct from a hash of the question: NaiveRAG on a share naive_rate, LLM-only on llm_rate
    (nested when ``correlated``, independent hashes otherwise)."""
    def respond(req):
        system, user = req["messages"][0]["content"], req["messages"][-1]["content"]
        if system == jd.SYSTEM:
            question = user.split("Question: ", 1)[1].split("\n\nGold answer:", 1)[0]
            answer = user.split("Answer to grade: ", 1)[1]
            if answer.startswith("CTX"):
                ok = _u(question) < naive_rate
            else:
                ok = _u(question if correlated else question + "#llm") < llm_rate
            return {"label": "correct" if ok else "incorrect", "reason": "scripted"}
        question = user.rsplit("Question:", 1)[-1].strip().split("\n")[0]
        tag = "NOCTX" if system == prompts.PROMPTS["direct"].system else "CTX"
        return f"{tag} {question[:80]}"
    return respond


def _store_with_questions(engine, n: int) -> None:
    from ragrouter.db.engine import write_lock
    from ragrouter.ingest import store as ingest_store
    from ragrouter.ingest.records import Dataset, Document, Question

    docs = [Document(f"d{i}", "", f"Fact {i}: the value of item {i} is {i * 7}.") for i in range(6)]
    qs = [Question(f"q{i}", f"What is the value of item {i}?", str(i * 7), "factual") for i in range(n)]
    with write_lock(engine), engine.begin() as conn:
        ingest_store.write_dataset(conn, "toy", "test", Dataset(documents=docs, questions=qs), [])


def _decide(engine, cfg):
    from ragrouter.decisions.driver import Budget, until_decided
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    services = Services(cfg, engine)
    try:
        scope = Scope(corpus="toy", config=cfg)
        for name in ("chunk", "embed"):
            run_stage(registry.all_stages()[name], services, scope, progress=False)
        return until_decided(services, scope, Budget(), progress=False)
    finally:
        services.finish()


def _cfg(srv):
    cfg = fake_config(srv)
    cfg.data["paradigms"]["enabled"] = ["llm_only", "naive"]
    return cfg


def test_until_decided_stops_a_planted_cell_early_and_a_rerun_repeats_no_call(store):
    _store_with_questions(store, 120)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = _cfg(srv)
        (cell,) = _decide(store, cfg)
        requests = srv.stats()["total"]
        assert cell.state.state == sq.DECIDED and cell.state.leader == "naive", cell.state
        assert cell.state.n_queries < 120 and cell.stop_reason == "decided"
        with store.connect() as conn:
            row = conn.execute(text("SELECT state, winner, n_queries, n_runs, bound FROM decision_cells")).one()
            answered = conn.execute(text("SELECT COUNT(DISTINCT query_id) FROM paradigm_runs")).scalar()
            ledger = conn.execute(text("SELECT COUNT(*), COUNT(DISTINCT request_hash) FROM llm_calls")).one()
        assert row[0] == "decided" and row[1] == "naive" and row[2] == cell.state.n_queries and row[4] > 0
        assert answered == cell.state.n_queries < 120  # the rest stay pending
        assert ledger[0] == ledger[1]
        (again,) = _decide(store, cfg)
        assert srv.stats()["total"] == requests  # no request made twice
        assert again.state.state == sq.DECIDED and again.state.n_queries == cell.state.n_queries


def test_run_until_decided_whose_units_all_fail_exits_3(store, duck_url, tmp_path):
    """Every answer call fails (HTTP 500): the cell stops "failed: …", and the
    command says so with exit 3 instead of 0 (a user read a 0 as a finished decision)."""
    import yaml
    from click.testing import CliRunner

    from ragrouter.commands.common import Ctx
    from ragrouter.commands.run import run_command
    from ragrouter.config import Config
    from ragrouter.db import engine as eng

    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    _store_with_questions(store, 20)

    def respond(req):  # a responder that raises is an HTTP 500 from the fake endpoint
        raise RuntimeError("scripted: the endpoint fails every answer")

    with FakeOpenAI(responder=respond, embedding_dim=16) as srv:
        cfg = _cfg(srv)
        services = Services(cfg, store)
        try:  # the stages before the answers succeed (embeddings are not chat)
            for name in ("chunk", "embed"):
                run_stage(registry.all_stages()[name], services, Scope(corpus="toy", config=cfg), progress=False)
        finally:
            services.finish()
        (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg.data))
        eng.dispose_all()
        ctx = Ctx(db_url=duck_url, config_path=str(tmp_path / "cfg.yaml"))
        ctx._config = Config.load(path=tmp_path / "cfg.yaml", env={})
        res = CliRunner().invoke(run_command, ["--corpus", "toy", "--stage", "chunk", "--stage", "embed",
                                               "--until-decided", "--quiet"], obj=ctx)
    eng.dispose_all()
    assert res.exit_code == 3, res.output
    assert "stopped because their units failed" in res.output and "failed:" in res.output


def test_until_decided_without_a_difference_never_says_decided(store):
    _store_with_questions(store, 60)
    with FakeOpenAI(responder=planted(0.6, 0.6, correlated=False), embedding_dim=16) as srv:
        (cell,) = _decide(store, _cfg(srv))
    assert cell.state.state in (sq.UNDECIDED, sq.EPS_BEST)
    assert cell.stop_reason.startswith(("exhausted", "futile")), cell.stop_reason


def test_an_interrupted_sequence_continues_where_it_stopped(store):
    """A budget stops the first command after its first batch; the second continues the same
    seeded sequence and ends in the state one uninterrupted command reaches."""
    from ragrouter.decisions.driver import Budget, until_decided
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    _store_with_questions(store, 120)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = _cfg(srv)
        services = Services(cfg, store)
        try:
            scope = Scope(corpus="toy", config=cfg)
            for name in ("chunk", "embed"):
                run_stage(registry.all_stages()[name], services, scope, progress=False)
            (first,) = until_decided(services, scope, Budget(tokens=1), progress=False)
        finally:
            services.finish()
        assert first.stop_reason.startswith("budget") and first.state.n_queries == 10
        (second,) = _decide(store, cfg)
    assert second.state.state == sq.DECIDED and second.state.leader == "naive"
    with store.connect() as conn:
        ledger = conn.execute(text("SELECT COUNT(*), COUNT(DISTINCT request_hash) FROM llm_calls")).one()
    assert ledger[0] == ledger[1]


# ---------------------------------------------------------------------------------------------
# Time in every estimate


def test_dry_run_after_answer_estimates_judging(store):
    """The judge estimate after the answer stage names the judge's model (it passed the
    judgment key where a backend name goes)."""
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import dry_run
    from ragrouter.stages.services import Services
    from tests.test_stages_answer import ingest, responder, run

    ingest(store)
    with FakeOpenAI(responder=responder, embedding_dim=16) as srv:
        cfg = fake_config(srv)
        run(store, cfg, "chunk", "extract", "embed", "answer")
        services = Services(cfg, store)
        try:
            (est,) = dry_run([registry.all_stages()["judge"]], services, Scope(corpus="toy", config=cfg))
        finally:
            services.finish()
    assert est.model == "fake-model" and est.calls == 30 and est.prompt_tokens > 0


def test_expected_wall_time_matches_a_run_with_set_latency_and_concurrency(store):
    """Against the fake endpoint with 0.15 s per request and 2 request slots: a first corpus
    gives the store its history; the dry run of a second corpus then expects each model stage's
    wall time within ±30 % of what the run takes."""
    from benchmarks.bench_dry_run import _ingest
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import dry_run, run_stage
    from ragrouter.stages.services import Services
    from ragrouter.stages.timing import wall_estimates
    from tests.test_trust import judging_responder

    pipeline = ["chunk", "extract", "embed", "answer", "judge"]
    with FakeOpenAI(responder=judging_responder, embedding_dim=16, latency_s=0.15) as srv:
        cfg = fake_config(srv)
        for b in cfg.data["backends"].values():
            b["concurrency"] = 2
        cfg.data["dry_run"]["timing"]["history_min"] = 5
        for corpus, reword in (("toy", ""), ("toy-b", "In other words: ")):
            _ingest(store, corpus, reword)
            services = Services(cfg, store)
            try:
                scope = Scope(corpus=corpus, config=cfg)
                timed = wall_estimates(cfg, dry_run([registry.all_stages()[n] for n in pipeline], services, scope),
                                       services)
                took = {}
                for n in pipeline:
                    t0 = time.monotonic()
                    run_stage(registry.all_stages()[n], services, scope, progress=False)
                    took[n] = time.monotonic() - t0
            finally:
                services.finish()
    expected = {}
    for r in timed["stages"]:
        expected[r["stage"]] = expected.get(r["stage"], 0.0) + r["expected_wall_s"]
        if r["stage"] in ("extract", "answer", "judge") and r["model"] == "fake-model":
            assert r["time_basis"].startswith("history:"), r
    for n in ("extract", "answer", "judge"):
        assert 0.7 * took[n] <= expected[n] <= 1.3 * took[n], (n, expected[n], took[n])
    assert math.isclose(timed["expected_wall_s"], sum(r["expected_wall_s"] for r in timed["stages"]), abs_tol=0.5)


class _TimedBackend:
    """A chat backend whose latency is set: 0.05 s + 2 ms per prompt token + 8 ms per reply
    token (prompt tokens ~ words, as the server would report them)."""

    n_parallel = 2
    model = "timed"

    def __init__(self):
        self.calls = 0

    def endpoint(self):
        time.sleep(0.2)  # the server's start
        return "http://127.0.0.1:1/v1", self.model

    def chat_once(self, messages, *, temperature, max_tokens, response_format, timeout_s):
        from ragrouter.llm.backends import ChatReply

        self.calls += 1
        prompt = len(messages[-1]["content"].split())
        time.sleep(0.05 + 0.002 * prompt + 0.008 * max_tokens)
        return ChatReply(text="1, 2, 3", prompt_tokens=prompt, completion_tokens=max_tokens, finish_reason="length")


def test_the_speed_probe_recovers_a_backends_set_speed():
    """Three rounds (short prompt, long prompt, long prompt with a reply) at 2 in flight solve the
    per-call latency model: 500 prompt and 125 reply tokens per second, 0.05 s overhead."""
    from ragrouter.decisions import speedprobe

    fig = speedprobe.probe_chat(_TimedBackend())
    assert fig["parallel"] == 2 and 0.15 <= fig["load_s"] <= 0.5
    assert 500 * 0.85 <= fig["prompt_tps"] <= 500 * 1.15, fig
    assert 125 * 0.85 <= fig["gen_tps"] <= 125 * 1.15, fig
    assert fig["overhead_s"] <= 0.1
    # a linear backend: the short-reply round reads the same reply rate
    assert 125 * 0.85 <= fig["gen_tps_short"] <= 125 * 1.15 and fig["short_reply_tokens"] == 50, fig
    # the solver itself, exact on noiseless rounds
    got = speedprobe.solve((1.0, 100, 1), (3.0, 500, 1), (5.0, 500, 41))
    assert got == {"overhead_s": 0.45, "prompt_tps": 200.0, "gen_tps": 20.0}


def test_one_slow_prompt_round_does_not_move_the_probes_prompt_rate():
    """A neighbour's burst slows one of the probe's long-prompt rounds to twice its time: the
    prompt rounds are repeated and each taken at its median, so the prompt rate still reads
    500 tok/s; a single pair of rounds would read ~40 % of it."""
    from ragrouter.decisions import speedprobe

    class Burst(_TimedBackend):
        def __init__(self):
            super().__init__()
            self.long_rounds = 0

        def chat_once(self, messages, *, temperature, max_tokens, response_format, timeout_s):
            from ragrouter.llm.backends import ChatReply

            prompt = len(messages[-1]["content"].split())
            slow = 2.0 if (max_tokens == 1 and prompt > 300 and self.long_rounds < 2) else 1.0
            if max_tokens == 1 and prompt > 300:
                self.long_rounds += 1  # the first long round's two calls are slowed
            time.sleep(slow * (0.05 + 0.002 * prompt + 0.008 * max_tokens))
            return ChatReply(text="1, 2", prompt_tokens=prompt, completion_tokens=max_tokens, finish_reason="length")

    fig = speedprobe.probe_chat(Burst())
    assert 500 * 0.85 <= fig["prompt_tps"] <= 500 * 1.15, fig
    lat = fig["rounds"]["long_latencies"]
    assert len(lat) == speedprobe.PROMPT_REPEATS == 3 and lat[0] > 1.6 * max(lat[1:]), lat
    short, long = fig["rounds"]["short"], fig["rounds"]["long"]
    one_pair = speedprobe.solve((fig["rounds"]["short_latencies"][0], *short[1:]), (lat[0], *long[1:]),
                                tuple(fig["rounds"]["gen"]))
    assert one_pair["prompt_tps"] < 0.6 * 500, one_pair


def test_short_replies_are_timed_at_the_short_reply_rounds_rate():
    """A backend whose reply tokens cost twice as much in a 50-token reply as in a 160-token one
    (the 1.5B on 2 cores: 6.0 against 11.7 tok/s): the probe's fourth round measures it, and the
    estimate times a call by its mean reply length — the short rate up to 50 tokens, the long
    rate from 160, linear between."""
    from ragrouter.decisions import speedprobe
    from ragrouter.stages.timing import reply_seconds

    class ShortSlow(_TimedBackend):
        def chat_once(self, messages, *, temperature, max_tokens, response_format, timeout_s):
            from ragrouter.llm.backends import ChatReply

            prompt = len(messages[-1]["content"].split())
            per_reply = 0.016 if max_tokens <= speedprobe.SHORT_REPLY_TOKENS else 0.008
            time.sleep(0.05 + 0.002 * prompt + per_reply * max_tokens)
            return ChatReply(text="1, 2", prompt_tokens=prompt, completion_tokens=max_tokens, finish_reason="length")

    fig = speedprobe.probe_chat(ShortSlow())
    assert 125 * 0.85 <= fig["gen_tps"] <= 125 * 1.15, fig
    assert 62.5 * 0.85 <= fig["gen_tps_short"] <= 62.5 * 1.15, fig
    f = {"gen_tps": 100.0, "gen_tps_short": 50.0, "short_reply_tokens": 50.0, "long_reply_tokens": 160.0}
    assert reply_seconds(f, 30) == pytest.approx(0.02) and reply_seconds(f, 400) == pytest.approx(0.01)
    assert reply_seconds(f, 105) == pytest.approx(0.015)
    assert reply_seconds({"gen_tps": 100.0}, 30) == pytest.approx(0.01)  # priors: one rate
    assert reply_seconds({"gen_tps": None}, 30) == 0.0


def test_the_probe_measures_encoders_first_and_their_load_in_a_fresh_process(tmp_path, monkeypatch):
    """Encoders are probed before any chat model (a chat server that just stopped leaves the
    cores busy); an encoder is measured in a fresh interpreter (its load is what a run's embed
    stage pays, and the probing process never holds the model), and one the child cannot load
    falls back to an in-process measurement."""
    from ragrouter.config import Config
    from ragrouter.decisions import speedprobe

    monkeypatch.setenv("RAGROUTER_TIMING_DIR", str(tmp_path / "timing"))
    cfg = Config.load(Path("configs/demo.yaml"), env={})
    order = []
    real_settle = speedprobe.settle
    monkeypatch.setattr(speedprobe, "settle", lambda: order.append(("settle",)) or 0.0)
    monkeypatch.setattr(speedprobe, "cores_busy", lambda idle=0.65: None)  # as on idle cores
    monkeypatch.setattr(speedprobe, "probe_chat", lambda b: order.append(("chat", b.model)) or
                        {"overhead_s": 0.0, "prompt_tps": 1.0, "gen_tps": 1.0, "parallel": 1, "load_s": 0.0})
    monkeypatch.setattr(speedprobe, "probe_encoder", lambda b, layers=0: order.append(("encoder", b.model, layers)) or
                        {"overhead_s": 0.0, "prompt_tps": 1.0, "gen_tps": None, "parallel": 1, "load_s": 0.0})
    got = speedprobe.probe(cfg, echo=lambda line: None)
    # the config's scoring encoder is asked for the score stage's start on its bertscore layers
    assert order[0] == ("encoder", "all-MiniLM-L6-v2", int(cfg.get("scoring.bertscore_layers")))
    # each chat model waits for the cores to settle first
    assert [k[0] for k in order[1:]] == ["settle", "chat"] * ((len(order) - 1) // 2)
    assert set(got) == {k[1] for k in order if len(k) > 1}
    # settle: /proc/stat's idle share over each second, until the cores are idle
    samples = iter([(0, 100), (10, 200), (20, 300), (115, 400), (500, 500)])  # busy, busy, idle
    slept = []
    monkeypatch.setattr(speedprobe, "_cpu_times", lambda: next(samples))
    real_settle(max_s=60, sleep=slept.append)
    assert len(slept) == 3  # stopped at the first idle second (95 of 100 jiffies idle)
    monkeypatch.setattr(speedprobe, "_cpu_times", lambda: None)
    assert real_settle(sleep=slept.append) == 0.0  # no /proc/stat: no wait
    assert speedprobe._fresh_process("no-such-encoder", 8) is None

    # the real encoder: measured in children, never loaded here (the demo's embed stage, in this
    # process after its probe, pays the load the estimate charges)
    from ragrouter.llm import encoder
    from ragrouter.llm.kinds import make_backend

    monkeypatch.undo()
    monkeypatch.setattr(encoder, "_CACHE", {})
    fig = speedprobe.probe_encoder(make_backend("minilm", cfg.section("backends")["minilm"], source=cfg.source), 6)
    assert fig["load_s"] > 0 and fig["prompt_tps"] > 100 and fig["gen_tps"] is None
    assert 0 < fig["score_start_s"] < fig["load_s"] + 30  # BERTScore's import and scorer, one pair scored
    assert encoder._CACHE == {}


def test_probed_figures_replace_the_priors_and_a_first_stage_pays_the_load(tmp_path, monkeypatch, store):
    """A machine's probe file (RAGROUTER_HOME/timing) outranks the config's priors for its
    local models, the store's own history outranks both, and a local model's load time is
    charged once, to the first row that uses it."""
    from ragrouter.config import Config
    from ragrouter.decisions import speedprobe
    from ragrouter.stages.base import Estimate
    from ragrouter.stages.timing import Timing

    monkeypatch.setenv("RAGROUTER_TIMING_DIR", str(tmp_path / "timing"))
    cfg = Config.load(Path("configs/demo.yaml"), env={})
    model = "qwen2.5-coder-0.5b"
    path = speedprobe._save({model: {"overhead_s": 0.0, "prompt_tps": 100.0, "gen_tps": 10.0, "parallel": 2,
                                     "load_s": 4.0}})
    assert path.parent == tmp_path / "timing" and speedprobe.load()[model]["prompt_tps"] == 100.0
    timing = Timing(store, cfg)
    busy, basis = timing.call_seconds(model, 3, 1000, 100)
    assert basis == f"probe:{model}" and math.isclose(busy, 1000 / 100 + 100 / 10)
    rows = []
    for stage in ("extract", "answer"):
        e = Estimate(stage=stage, model=model)
        e.calls, e.prompt_tokens, e.completion_tokens = 3, 1000, 100
        rows.append(timing.stage_seconds(e))
    assert math.isclose(rows[0][0], 20.0 / 2 + 4.0) and math.isclose(rows[1][0], 20.0 / 2)  # load once
    judge = "qwen2.5-coder-1.5b"  # not probed: the config's prior
    assert timing.call_seconds(judge, 1, 19, 0)[1] == f"prior:{judge}"
    # worker.one_local_model (default): a stage stops the servers it does not call, so the
    # model pays its load again after another model's stage or a stage with no model
    j = Estimate(stage="judge", model=judge)
    j.calls, j.prompt_tokens = 1, 10
    judge_load = float(cfg.get("dry_run.timing.priors")[judge]["load_s"])
    assert math.isclose(timing.stage_seconds(j)[0] - timing.call_seconds(judge, 1, 10, 0)[0] / timing.parallel(
        "judge", judge)[0], judge_load)
    e = Estimate(stage="answer", model=model)
    e.calls, e.prompt_tokens, e.completion_tokens = 3, 1000, 100
    assert math.isclose(timing.stage_seconds(e)[0], 20.0 / 2 + 4.0)  # reloaded after the judge
    timing.stage_without_server()  # e.g. score
    assert math.isclose(timing.stage_seconds(e)[0], 20.0 / 2 + 4.0)
    both = Timing(store, Config({**cfg.data, "worker": {**cfg.section("worker"), "one_local_model": False}}))
    first, again = (both.stage_seconds(e)[0] for _ in range(2))
    assert math.isclose(first, 20.0 / 2 + 4.0) and math.isclose(again, 20.0 / 2)  # both resident: load once


def test_a_stage_stops_the_servers_of_models_it_does_not_call(monkeypatch):
    """``run_stage`` frees the cores before a stage: the local chat models it calls are its
    role's backend (every generator of the scope for ``answer``); remote backends and encoders
    hold no server."""
    from types import SimpleNamespace

    from ragrouter.config import Config
    from ragrouter.llm import local_server
    from ragrouter.stages import registry, runner
    from ragrouter.stages.base import Scope

    cfg = Config.load(Path("configs/demo.yaml"), env={})
    services = SimpleNamespace(config=cfg)
    stages = registry.all_stages()
    scope = Scope(config=cfg)
    assert runner.stage_local_models(stages["extract"], services, scope) == {"qwen2.5-coder-0.5b"}
    assert runner.stage_local_models(stages["judge"], services, scope) == {"qwen2.5-coder-1.5b"}
    assert runner.stage_local_models(stages["embed"], services, scope) == set()
    assert runner.stage_local_models(stages["answer"], services, Scope(config=cfg, models=["local-qwen-1.5b"])) \
        == {"qwen2.5-coder-1.5b"}
    kept = []
    monkeypatch.setattr(local_server, "stop_idle_except", lambda models: kept.append(set(models)) or [])
    runner.free_cores(stages["judge"], services, scope)
    assert kept == [{"qwen2.5-coder-1.5b"}]
    off = SimpleNamespace(config=Config({**cfg.data, "worker": {**cfg.section("worker"), "one_local_model": False}}))
    runner.free_cores(stages["judge"], off, scope)
    assert kept == [{"qwen2.5-coder-1.5b"}]


# ---------------------------------------------------------------------------------------------
# plan


def test_mcnemar_sample_size_is_exact_and_gives_the_stated_power():
    """The exact power (binomial sums) at plan's n is ≥ 0.8 and a simulation of the report's
    exact McNemar test (common.stats) agrees; Connor's normal formula gives 234 here."""
    from ragrouter.decisions.plan import mcnemar_n
    from ragrouter.decisions.simulate import mcnemar_exact_power
    from ragrouter.common.stats import mcnemar_exact

    delta, psi = 0.10, 0.30
    n = mcnemar_n(delta, psi)
    p10, p01 = (psi + delta) / 2, (psi - delta) / 2
    assert mcnemar_exact_power(n, p10, p01) >= 0.8 > mcnemar_exact_power(n - 12, p10, p01)
    assert 234 < n < 260  # the exact test needs more than the normal approximation
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(400):
        u = rng.random(n)
        a = (u < p10) | (u >= p10 + p01) & (u < 0.5 + p10)
        b = (u >= p10) & (u < p10 + p01) | (u >= p10 + p01) & (u < 0.5 + p10)
        hits += mcnemar_exact(a.astype(float), b.astype(float)).pvalue < 0.05
    assert abs(hits / 400 - mcnemar_exact_power(n, p10, p01)) < 0.06
    assert mcnemar_n(0.2, 0.05) == mcnemar_n(0.2, 0.2)  # ψ is never below the gap


def test_plan_sizes_the_rule_that_runs():
    """size_rule's N (its own seed) gives the planned power on fresh sequences within ±5 points,
    and the rule's mean runs there are fewer than the fixed-N test's runs."""
    from ragrouter.decisions import simulate as sm

    settings = sq.Settings()
    rates = [0.6, 0.4, 0.35, 0.3, 0.25]
    psi = sm.discordance(0.6, 0.4, 0.5)
    assert math.isclose(sm.rho_for_discordance(0.6, 0.4, psi), 0.5, abs_tol=1e-3)
    size = sm.size_rule(rates, psi, settings, 0.8, reps=300, seed=1)
    assert size["n"] is not None and size["power_at_n"] >= 0.8
    fresh = sm.rule_at(rates, 0.5, size["n"], settings, 600, seed=77)
    assert abs(fresh["power"] - 0.8) <= 0.05 + 0.035  # ±5 points, plus this small run's MC error
    assert size["mean_runs"] < 5 * size["fixed_exact_n"]


def test_plan_reads_the_pilot_and_prices_the_pending_queries(store):
    from ragrouter.decisions.plan import plan
    from ragrouter.stages.base import Scope
    from ragrouter.stages.services import Services

    _store_with_questions(store, 120)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = _cfg(srv)
        (cell,) = _decide(store, cfg)
        services = Services(cfg, store)
        try:
            (row,) = plan(services, Scope(corpus="toy", config=cfg))
        finally:
            services.finish()
    answered = cell.state.n_queries
    assert row["discordance_basis"].startswith(f"pilot: naive vs llm_only on {answered} queries")
    pair = cell.state.pairs[0]
    assert math.isclose(row["discordance"], (pair["a_only"] + pair["b_only"]) / answered)
    rates = cell.state.correct
    assert row["rates"][0] == round(rates["naive"] / answered, 3)  # the pilot's best, runner-up at the gap
    assert math.isclose(row["rates"][1], row["rates"][0] - 0.10, abs_tol=1e-3)
    assert row["n_needed"] > 0 and row["cost_basis"] == f"dry run of {120 - answered} pending queries"
    assert row["fixed_design"]["n"] > 0 and row["mean_runs"] <= 2 * row["n_needed"]
    # fixed costs counted once: the expected wall is fixed + per run × mean runs
    assert math.isclose(row["wall_s"], row["fixed_s"] + row["per_run_s"] * row["mean_runs"], rel_tol=1e-9)
    assert row["calls"] > 0 and row["tokens"] > 0 and row["wall_s"] > 0


# ---------------------------------------------------------------------------------------------
# Settings that fit the backend


def test_the_local_profile_sits_between_the_defaults_and_the_users_file(tmp_path):
    from ragrouter.config import Config, ConfigError
    from ragrouter.graph import extract as ex
    from ragrouter.stages import storeio

    paper = Config.load(env={})
    assert paper.get("retrieval.token_budget") == 8000 and paper.get("extraction.max_triples", None) is None
    mine = tmp_path / "mine.yaml"
    mine.write_text("profile: local\nretrieval:\n  token_budget: 1200\n")
    cfg = Config.load(mine, env={})
    assert cfg.get("retrieval.token_budget") == 1200  # the user's file wins over the profile
    assert cfg.get("generation.max_tokens") == 150 and cfg.get("extraction.max_triples") == 20
    assert cfg.where("generation.max_tokens").endswith("configs/profiles/local.yaml line 13")
    assert Config.load(env={"RAGROUTER__profile": "local"}).get("paradigms.iterative.max_rounds") == 2
    # a capped extraction asks for at most N triples and is its own graph
    assert ex.schema(40)["properties"]["triples"]["maxItems"] == 40 and "maxItems" not in ex.schema(None)[
        "properties"]["triples"]
    assert storeio.extractor_key(cfg).endswith("|mt1024|t20") and "|t" not in storeio.extractor_key(paper)
    mine.write_text("profile: gpu\n")
    with pytest.raises(ConfigError, match=r"mine.yaml: unknown profile 'gpu' \(profiles: local\)"):
        Config.load(mine, env={})


def test_dry_run_suggests_the_local_profile_when_local_work_takes_hours():
    from types import SimpleNamespace

    from ragrouter.config import Config
    from ragrouter.stages.base import Estimate
    from ragrouter.stages.timing import wall_estimates

    class _Engine:  # an empty store: every figure from the priors
        def connect(self):
            from sqlalchemy import create_engine

            from ragrouter.db import migrate
            eng = create_engine("duckdb:///:memory:")
            migrate.upgrade(eng)
            return eng.connect()

    cfg = Config.load(env={})
    big = Estimate(stage="answer", model="qwen2.5-coder-0.5b", calls=5000, prompt_tokens=5000 * 8000,
                   completion_tokens=5000 * 200, completion_cap=5000 * 1000)
    out = wall_estimates(cfg, [big], SimpleNamespace(engine=_Engine(), db_lock=None))
    (row,) = out["stages"]
    prior = cfg.section("dry_run")["timing"]["priors"]["qwen2.5-coder-0.5b"]
    per_call = prior["overhead_s"] + 8000 / prior["prompt_tps"] + 200 / prior["gen_tps"]
    assert math.isclose(row["expected_wall_s"], 5000 * per_call / prior["parallel"], rel_tol=1e-3)
    assert row["time_basis"].startswith("prior:qwen2.5-coder-0.5b") and "profile: local" in out["advice"][0]
    local = Config.load(env={"RAGROUTER__profile": "local"})
    assert wall_estimates(local, [big], SimpleNamespace(engine=_Engine(), db_lock=None))["advice"] == []


def test_the_reports_best_row_says_the_sequential_state(store, tmp_path):
    from ragrouter.report import build
    from ragrouter.report.tables import decision_label

    _store_with_questions(store, 120)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = _cfg(srv)
        (cell,) = _decide(store, cfg)
    rep = build.build_report(store, tmp_path / "r", config=cfg, with_figures=False)
    md = rep.markdown.read_text()
    label = decision_label({"state": "decided", "winner": "naive", "n_queries": cell.state.n_queries,
                            "bound": cell.state.bound, "margin": 0.05})
    assert label.startswith(f"naive (decided, N={cell.state.n_queries}, lead ≥ +")
    assert "Best (McNemar; sequential where decided by run --until-decided)" in md and label in md
    assert decision_label({"state": "undecided", "winner": "graph", "n_queries": 40, "bound": 0.3,
                           "margin": 0.05}) == "undecided (N=40; leader graph)"
    assert decision_label({"state": "eps_best", "winner": "graph", "n_queries": 90, "bound": -0.01,
                           "margin": 0.02}) == "graph or any within 2 pts of it (ε-best, N=90)"


def test_a_stage_without_model_calls_pays_a_fixed_start_plus_a_share_per_unit(store):
    """The score stage loads its encoder once per run: its estimate is the fixed start
    (``unit_overhead_s``) plus units × seconds per unit, the per-unit share measured from this
    store's stage_timings less each recorded execution's start."""
    from ragrouter.config import Config
    from ragrouter.db import models
    from ragrouter.stages.timing import Timing

    cfg = Config.load(env={})
    cfg.data["dry_run"]["timing"]["unit_seconds"]["score"] = 0.035
    cfg.data["dry_run"]["timing"]["unit_overhead_s"] = {"score": 1.8}
    model = cfg.get("scoring.encoder")
    load = cfg.data["dry_run"]["timing"]["priors"][model]["load_s"]
    ref_tps = cfg.data["dry_run"]["timing"]["priors"][model]["prompt_tps"]
    t = Timing(store, cfg)  # no earlier row loads the encoder: the score stage's process does
    assert t.unit_seconds("score", 45) == (pytest.approx(1.8 + load + 45 * 0.035), "prior,start:prior+load")
    assert t.unit_seconds("score", 45) == (pytest.approx(1.8 + 45 * 0.035), "prior,start:prior")  # loaded now
    assert Timing(store, cfg).unit_seconds("score", 0) == (0.0, "-")
    # this machine probed: its score start and load, and the per-run prior scaled by its encoder's speed
    t = Timing(store, cfg)
    t.probed = {model: {"score_start_s": 0.9, "load_s": 4.0, "prompt_tps": ref_tps / 2, "overhead_s": 0.0}}
    assert t.unit_seconds("score", 45) == (pytest.approx(0.9 + 4.0 + 45 * 0.035 * 2),
                                           f"prior,start:probe:{model}+load")
    with store.begin() as conn:  # two recorded runs: 11 units in 2.2 s, 45 in 3.6 s
        conn.execute(models.StageTiming.__table__.insert(), [
            {"stage": "score", "units": 11, "seconds": 2.2, "model_calls": 0},
            {"stage": "score", "units": 45, "seconds": 3.6, "model_calls": 0}])
    per = (2.2 + 3.6 - 2 * 1.8) / 56
    t = Timing(store, cfg)
    t._loaded.add(model)  # the embed stage's row loaded it
    secs, basis = t.unit_seconds("score", 20)
    assert secs == pytest.approx(1.8 + 20 * per) and basis == "history:56 units,start:prior"


def test_a_decided_cell_states_a_lead_that_holds_against_the_leader_and_is_not_capped():
    """Seeded cell 143 (five paradigms, a Gaussian copula, batches of 10): c was dropped by d, d
    later by the leader b; b's own bound against c froze at −1.3 points when c left, which the
    cell printed as 'decided, lead ≥ −1.3'. The lead that holds runs through the paradigm that
    dropped c: positive, and at most each chain's sum. And a 90-point gap decided after 20 queries is not
    printed as +25 (where the stakes' range used to stop the bound)."""
    from ragrouter.decisions.simulate import outcomes

    names = ["a", "b", "c", "d", "e"]
    rng = np.random.default_rng(143)
    rates = rng.uniform(0.3, 0.8, 5)
    x = outcomes(rates, 1, 400, 0.5, rng)[0]
    looks = [{p: {q: int(x[q, k]) for q in range(b * 10, b * 10 + 10)} for k, p in enumerate(names)}
             for b in range(40)]
    cell = sq.evaluate(names, looks, sq.Settings(futility=False))
    assert cell.state == "decided" and cell.leader == "b" and cell.dropped["c"]["by"] == "d"
    low = {(p["a"], p["b"]): p["diff_low"] for p in cell.pairs}
    low.update({(p["b"], p["a"]): -p["diff_high"] for p in cell.pairs})
    assert low[("b", "c")] < 0 < cell.bound
    assert cell.bound <= low[("b", "d")] + low[("d", "c")] + 1e-12
    from ragrouter.report.tables import decision_label

    label = decision_label({"state": "decided", "winner": "b", "n_queries": cell.n_queries, "bound": cell.bound})
    assert "lead ≥ +0.1 pts" in label, label
    assert "decided" in decision_label({"state": "decided", "winner": "b", "n_queries": 9, "bound": -0.2}) and \
        "lead" not in decision_label({"state": "decided", "winner": "b", "n_queries": 9, "bound": -0.2})
    # a wide gap: far beyond +25 points
    looks = [{"hi": {q: int(q % 20 != 0) for q in range(b * 10, b * 10 + 10)},
              "lo": {q: int(q % 20 == 0) for q in range(b * 10, b * 10 + 10)}} for b in range(10)]
    cell = sq.evaluate(["hi", "lo"], looks, sq.Settings(futility=False))
    assert cell.state == "decided" and cell.leader == "hi" and cell.bound > 0.3, cell.bound
    race = sq.Race(2, 1)
    for look in looks[:cell.n_queries // 10]:  # the looks the cell ran before it stopped
        n10 = np.array([[[0, sum(look["hi"][q] and not look["lo"][q] for q in look["hi"])],
                         [sum(look["lo"][q] and not look["hi"][q] for q in look["hi"]), 0]]])
        race.add(n10, 10, sq.Settings(), keep_history=True)
    t = sq.log_threshold(2, 0.05)
    assert sq._log_w_at(race.history, np.full((2, 2), cell.bound - 1e-4))[0, 1] >= t > \
        sq._log_w_at(race.history, np.full((2, 2), cell.bound + 1e-4))[0, 1]


def test_a_futile_stop_gives_its_estimated_chance_and_the_estimate_follows_what_went_on():
    """A futile stop claimed 'no claim can be reached' as a fact, but some such cells with a real
    10-point gap do reach a correct claim within their queries. Over 120 seeded cells (five
    paradigms, best 10 points ahead, 300 queries) the estimated chance, averaged over the cells
    that stopped as futile, lies near the share of them that reached a claim when run on to the
    end (a plug-in estimate: low, but not by more than half), and it is never 'impossible'."""
    from ragrouter.decisions.driver import _chance_text
    from ragrouter.decisions.simulate import outcomes

    names, rates, horizon = ["a", "b", "c", "d", "e"], [0.6, 0.5, 0.45, 0.4, 0.35], 300
    est, went_on = [], []
    for rep in range(120):
        rng = np.random.default_rng(1000 + rep)
        x = outcomes(rates, 1, horizon, 0.5, rng)[0]
        looks = [{p: {q: int(x[q, k]) for q in range(b * 10, b * 10 + 10)} for k, p in enumerate(names)}
                 for b in range(horizon // 10)]
        cell = sq.evaluate(names, looks, sq.Settings(), horizon=horizon)
        if cell.stop_reason != "futile":
            continue
        est.append(sq.reach_chance(names, looks[:cell.n_queries // 10], sq.Settings(), horizon, reps=300, seed=rep))
        full = sq.evaluate(names, looks, sq.Settings(futility=False), horizon=horizon)
        went_on.append(full.state in ("decided", "eps_best"))
    assert len(est) >= 40
    assert all(e is not None and 0 <= e <= 1 for e in est)
    actual = float(np.mean(went_on))
    assert 0 < actual and actual / 2 <= float(np.mean(est)) <= actual * 2, (np.mean(est), actual)
    assert _chance_text(0.004) == "< 1 %" and _chance_text(0.376) == "38 %"


def test_run_until_decided_shows_a_bar_per_batch_and_stage(store, capfd):
    """Inside a batch (minutes on a local model) run --until-decided printed nothing: each batch's
    answer and judge stages now have their progress bar, named by the cell and the batch."""
    from ragrouter.decisions.driver import Budget, until_decided
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    _store_with_questions(store, 20)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = _cfg(srv)
        services = Services(cfg, store)
        try:
            scope = Scope(corpus="toy", config=cfg)
            for name in ("chunk", "embed"):
                run_stage(registry.all_stages()[name], services, scope, progress=False)
            said = []
            until_decided(services, scope, Budget(), progress=True, echo=said.append)
        finally:
            services.finish()
    err = capfd.readouterr().err
    for stage in ("answer", "judge"):
        assert f"toy/factual batch 1 {stage}" in err and f"toy/factual batch 2 {stage}" in err, err[-2000:]
    assert any(line.startswith("toy/factual/") and "batch of 10 queries" in line for line in said), said
