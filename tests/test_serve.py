"""`serve` (issue 33 item 3): an OpenAI-compatible server that routes every question, answers it
through the gateway and stores it; errors are OpenAI-shaped; SIGTERM drains and stops; the
cost-share threshold is calibrated on the router's cross-validated predictions."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import yaml
from sqlalchemy import text

from ragrouter.serve import calibration
from tests.fake_openai import FakeOpenAI
from tests.test_stages_answer import fake_config, ingest, run
from tests.test_trust import judging_responder

REPO = Path(__file__).resolve().parent.parent


def test_the_cost_share_threshold_lets_the_stated_share_through():
    rng = np.random.default_rng(3)
    preds = []
    for _ in range(200):
        p = rng.dirichlet(np.ones(5))
        preds.append(dict(zip(["llm_only", "naive", "graph", "hybrid", "iterative"], p)))
    for share in (0.0, 0.1, 0.3, 0.5, 1.0):
        th = calibration.calibrate(preds, share)
        passed = sum(th.allows_expensive(p) for p in preds) / len(preds)
        assert passed == pytest.approx(share, abs=1e-9) and th.calibrated_share == pytest.approx(share)
    # ties at the boundary: never more than the share
    tied = [{"naive": 0.5, "graph": 0.5}] * 10
    th = calibration.calibrate(tied, 0.5)
    assert th.calibrated_share <= 0.5
    assert calibration.expensive_score({"llm_only": 0.2, "naive": 0.3, "graph": 0.4, "cannot_answer": 0.1}) == \
        pytest.approx(0.4)
    with pytest.raises(ValueError, match="no cross-validated predictions"):
        calibration.calibrate([], 0.5)
    # share 0: no score reaches the threshold, which a JSON body (no infinity) carries as null
    none = calibration.calibrate(preds, 0.0)
    assert none.json_tau is None and json.loads(json.dumps({"t": none.json_tau}, allow_nan=False)) == {"t": None}
    assert "no question may use an expensive paradigm" in none.describe()
    assert none.why_cheap() == "--cost-share 0.00 allows no question an expensive paradigm: cheap paradigms only " \
        "(llm_only, naive)"
    half = calibration.calibrate(preds, 0.5)
    assert half.json_tau == half.tau and half.why_cheap().startswith(f"below the cost-share threshold {half.tau:.3f}")


def _serve(args: list[str], env: dict) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    lines: list[str] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise AssertionError(f"serve exited {proc.returncode}: {proc.stderr.read()}")
            continue
        lines.append(line)
        m = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line)
        if m:
            return proc, m.group(1), line
    proc.kill()
    raise AssertionError("serve did not start: " + "".join(lines))


@pytest.fixture(scope="module")
def served_store(tmp_path_factory):
    """A toy corpus answered by all five paradigms and judged on the fake endpoint, with its
    indicators and an 'lr' router trained into a private MLflow store."""
    from ragrouter.answering import routing
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate

    tmp = tmp_path_factory.mktemp("serve")
    url = f"duckdb:///{tmp / 'store.duckdb'}"
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    ingest(engine)
    srv = FakeOpenAI(responder=judging_responder, embedding_dim=32).__enter__()
    try:
        cfg = fake_config(srv)
        cfg.data.setdefault("routers", {})["mlflow_uri"] = f"sqlite:///{tmp / 'mlflow' / 'mlflow.db'}"
        cfg.data["routers"]["encoders"] = ["onehot"]
        run(engine, cfg, "chunk", "extract", "embed", "metrics", "answer", "judge", "score")
        res = routing.train(engine, cfg, routing.store_dataset(engine, cfg), ["lr"], ["qc"], log=lambda m: None)
        (tmp / "cfg.yaml").write_text(yaml.safe_dump(cfg.data))
        eng.dispose_all()
        env = {**os.environ, "RAGROUTER_DB": url, "RAGROUTER_CONFIG": str(tmp / "cfg.yaml")}
        yield {"url": url, "env": env, "srv": srv, "run_id": res["run_id"].item(), "tmp": tmp}
    finally:
        srv.__exit__(None, None, None)
        eng.dispose_all()


def test_serve_routes_answers_streams_and_stores_each_question(served_store):
    env = served_store["env"]
    proc, base, _ = _serve(["serve", "--corpus", "toy", "--port", "0"], env)
    try:
        with httpx.Client(base_url=base, timeout=120) as c:
            models = c.get("/models").json()
            assert [m["id"] for m in models["data"]] == ["ragrouter/toy"]
            assert models["data"][0]["ragrouter"]["router_run_id"] == served_store["run_id"]
            before = served_store["srv"].stats()["by_path"].get("/v1/chat/completions", 0)
            r = c.post("/chat/completions", json={"model": "ragrouter/toy", "messages": [
                {"role": "system", "content": "be brief"}, {"role": "user", "content": "In which city did Marie Curie study physics?"}]})
            assert r.status_code == 200, r.text
            body = r.json()
            rr = body["ragrouter"]
            assert body["object"] == "chat.completion" and body["model"] == "ragrouter/toy"
            assert body["choices"][0]["message"]["content"] and body["choices"][0]["finish_reason"] == "stop"
            assert rr["paradigm"] in ("llm_only", "naive", "graph", "hybrid", "iterative")
            assert abs(sum(rr["probabilities"].values()) - 1) < 1e-6 and rr["router_run_id"] == served_store["run_id"]
            assert r.headers["x-ragrouter-paradigm"] == rr["paradigm"] and r.headers["x-ragrouter-run-id"] == \
                str(rr["run_id"])
            assert body["usage"]["total_tokens"] == rr["tokens"]["total"] > 0
            assert served_store["srv"].stats()["by_path"]["/v1/chat/completions"] > before  # through the endpoint
            # the same question again: the gateway's cache answers, nothing is paid twice
            paid = served_store["srv"].stats()["by_path"]["/v1/chat/completions"]
            again = c.post("/chat/completions", json={"model": "toy", "messages": [
                {"role": "user", "content": "In which city did Marie Curie study physics?"}]}).json()
            assert again["choices"][0]["message"]["content"] == body["choices"][0]["message"]["content"]
            assert served_store["srv"].stats()["by_path"]["/v1/chat/completions"] == paid
            # streaming: role, pieces, a last chunk with the decision, [DONE]
            with c.stream("POST", "/chat/completions", json={"model": "ragrouter/toy", "stream": True, "messages": [
                    {"role": "user", "content": "In which city did Marie Curie study physics?"}]}) as s:
                assert s.headers["content-type"].startswith("text/event-stream")
                events = [line[6:] for line in s.iter_lines() if line.startswith("data: ")]
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
            streamed = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks)
            assert streamed == body["choices"][0]["message"]["content"]
            assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["ragrouter"]["paradigm"]
            # OpenAI-shaped errors
            bad = c.post("/chat/completions", json={"model": "ragrouter/nope", "messages": [
                {"role": "user", "content": "x"}]})
            assert bad.status_code == 404 and bad.json()["error"]["code"] == "model_not_found"
            for payload in ({"model": "toy"}, {"model": "toy", "messages": [{"role": "system", "content": "x"}]},
                            {"model": "toy", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}):
                e = c.post("/chat/completions", json=payload)
                assert e.status_code == 400 and e.json()["error"]["type"] == "invalid_request_error", payload
            assert c.post("/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
                          ).status_code == 400
            assert c.get("/nothing").json()["error"]["code"] == "not_found"
            long = c.post("/chat/completions", json={"model": "toy", "messages": [
                {"role": "user", "content": "why " * 5000}]})
            assert long.status_code == 400 and long.json()["error"]["code"] == "context_length_exceeded"
        # the real openai client: the reply parses as a ChatCompletion, the decision rides along
        import openai

        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
        done = client.chat.completions.create(model="ragrouter/toy", messages=[
            {"role": "user", "content": "In which city did Marie Curie study physics?"}])
        assert done.choices[0].message.content == body["choices"][0]["message"]["content"]
        assert done.model_extra["ragrouter"]["paradigm"] == rr["paradigm"]
        pieces = [ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
            model="ragrouter/toy", stream=True, messages=[{"role": "user", "content": "In which city did Marie Curie "
                                                                                       "study physics?"}])]
        assert "".join(pieces) == body["choices"][0]["message"]["content"]
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="ragrouter/nope", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="ragrouter/toy", messages=[])
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped" in out
    from ragrouter.db import engine as eng

    engine = eng.make_engine(served_store["url"], read_only=True)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT q.origin, q.status, COUNT(r.id) FROM queries q JOIN paradigm_runs r "
                                     "ON r.query_id = q.id WHERE q.origin = 'serve' GROUP BY 1, 2")).all()
    finally:
        eng.dispose_all()
    assert rows == [("serve", "asked", 1)]  # one question, one run, asked five times


def test_a_token_budget_routes_to_the_paradigms_that_fit(served_store):
    """--max-tokens-budget 1: no paradigm's expected tokens fit, so the cheapest on the corpus runs."""
    from ragrouter.db import engine as eng

    engine = eng.make_engine(served_store["url"], read_only=True)
    try:
        with engine.connect() as conn:
            costs = dict(conn.execute(text(
                "SELECT paradigm, AVG(ret_in_tokens + ret_out_tokens + gen_in_tokens + gen_out_tokens) FROM "
                "paradigm_runs GROUP BY paradigm")).all())
    finally:
        eng.dispose_all()
    proc, base, _ = _serve(["serve", "--corpus", "toy", "--port", "0", "--max-tokens-budget", "1"], served_store["env"])
    try:
        with httpx.Client(base_url=base, timeout=120) as c:
            r = c.post("/chat/completions", json={"model": "ragrouter/toy", "messages": [
                {"role": "user", "content": "What did Pierre Curie study?"}]}).json()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert r["ragrouter"]["paradigm"] == min(costs, key=costs.get)
    assert "fits the budget 1" in r["ragrouter"]["why"]


def test_sigterm_lets_the_request_in_flight_finish(served_store):
    """A request is being answered (the endpoint takes 2 s per reply) when SIGTERM arrives:
    its reply still comes back whole, then the server exits 0."""
    srv = served_store["srv"]
    proc, base, started = _serve(["serve", "--corpus", "toy", "--port", "0", "--cost-share", "0"], served_store["env"])
    assert "cost share 0.00" in started
    cost = httpx.get(f"{base}/models", timeout=30).json()["data"][0]["ragrouter"]["cost_share"]  # JSON, no inf
    assert cost["share"] == 0 and cost["threshold"] is None and cost["calibrated_share"] == 0
    result = {}

    def ask():
        with httpx.Client(base_url=base, timeout=120) as c:
            result["r"] = c.post("/chat/completions", json={"model": "ragrouter/toy", "messages": [
                {"role": "user", "content": "Which prize did Marie Curie win twice?"}]})

    srv.latency_s = 2.0
    try:
        t = threading.Thread(target=ask)
        t.start()
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        t.join(timeout=120)
        out, err = proc.communicate(timeout=60)
    finally:
        srv.latency_s = 0.0
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    r = result["r"]
    assert r.status_code == 200, r.text
    decision = r.json()["ragrouter"]
    assert decision["paradigm"] in ("llm_only", "naive")  # --cost-share 0: cheap paradigms only
    assert "allows no question an expensive paradigm" in decision["why"]
    assert "stopped (SIGTERM)" in out


def test_serve_refuses_a_corpus_it_cannot_route_with_one_line(served_store, tmp_path):
    env = {**served_store["env"], "RAGROUTER__routers__mlflow_uri": f"sqlite:///{tmp_path / 'empty.db'}"}
    out = subprocess.run([sys.executable, str(REPO / "cli.py"), "serve", "--corpus", "nope"], capture_output=True,
                         text=True, env=env, cwd=REPO, timeout=180)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "nope" in out.stderr


def test_the_fake_endpoint_streams_as_openai_documents_it():
    """FakeOpenAI's stream=true is OpenAI's SSE: the real client parses it, the pieces make the
    reply, the usage comes last with include_usage."""
    import openai

    with FakeOpenAI(responder=lambda req: "one two three four", stream_chunk_delay_s=0.05) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="t", max_retries=0)
        chunks = list(client.chat.completions.create(model="fake-model", stream=True, messages=[
            {"role": "user", "content": "count"}], stream_options={"include_usage": True}))
        plain = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "count"}])
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four" == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == plain.usage.total_tokens > 0
    sent = [t for t, _ in srv.stream_log]
    assert len(sent) == 4 and sent[-1] - sent[0] >= 3 * 0.05 - 0.01  # one content chunk every 50 ms


def test_a_retried_stream_forwards_nothing_twice():
    from ragrouter.llm import streaming

    got = []
    sink = streaming.Sink(got.append)
    lines = [b'data: {"choices": [{"index": 0, "delta": {"content": " Par"}}]}\n', b"\n",
             b'data: {"choices": [{"index": 0, "delta": {"content": "is"}, "finish_reason": "stop"}]}\n',
             b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}\n',
             b"data: [DONE]\n"]
    body = json.loads(streaming.assemble(lines[:1], sink))  # an attempt cut after its first piece
    assert body["choices"][0]["message"]["content"] == " Par" and got == ["Par"]
    body = json.loads(streaming.assemble(lines, sink))  # the retry streams from the start again
    assert got == ["Par", "is"] and sink.text == "Paris" and sink.attempts == 2
    assert body["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": " Paris", "refusal": None},
                                  "finish_reason": "stop"}
    assert body["usage"]["total_tokens"] == 5


def test_stream_true_forwards_the_generators_tokens_as_they_come(served_store):
    """The endpoint streams its answer a word every 0.25 s: the first content chunk reaches the
    openai client before the endpoint has sent its last one, the chunks make the stored run's
    answer, and the ledger records the generation call whole."""
    import openai

    srv = served_store["srv"]
    # --cost-share 0: cheap paradigms only (llm_only / naive: one generation call, streamed live)
    proc, base, _ = _serve(["serve", "--corpus", "toy", "--port", "0", "--cost-share", "0"], served_store["env"])
    srv.stream_chunk_delay_s = 0.25
    try:
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=120)
        arrivals, chunks = [], []
        for ch in client.chat.completions.create(model="ragrouter/toy", stream=True, messages=[
                {"role": "user", "content": "Where did Pierre Curie teach physics?"}],
                stream_options={"include_usage": True}):
            arrivals.append(time.monotonic())
            chunks.append(ch)
    finally:
        srv.stream_chunk_delay_s = 0.0
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    contents = [(t, c.choices[0].delta.content) for t, c in zip(arrivals, chunks)
                if c.choices and c.choices[0].delta.content]
    upstream = [t for t, _ in srv.stream_log]
    assert len(contents) >= 5 and len(upstream) >= 5
    assert contents[0][0] < upstream[-1] - 0.5  # the first words came while the endpoint was still generating
    answer = "".join(p for _, p in contents)
    last, usage = chunks[-2], chunks[-1]  # include_usage: the usage comes last, with no choices (OpenAI's rule)
    decision = last.model_extra["ragrouter"]
    assert last.choices[0].finish_reason == "stop" and usage.choices == [] and usage.usage.total_tokens == \
        decision["tokens"]["total"] > 0
    assert decision["paradigm"] in ("llm_only", "naive")
    from ragrouter.db import engine as eng

    engine = eng.make_engine(served_store["url"], read_only=True)
    try:
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT r.answer, q.origin FROM paradigm_runs r JOIN queries q ON q.id = "
                                       "r.query_id WHERE r.id = :r"), {"r": decision["run_id"]}).one()
            ledger = conn.execute(text("SELECT c.response, c.completion_tokens FROM run_calls rc JOIN llm_calls c "
                                       "ON c.id = rc.llm_call_id WHERE rc.run_id = :r AND rc.phase = 'generation'"),
                                  {"r": decision["run_id"]}).one()
    finally:
        eng.dispose_all()
    assert stored == (answer, "serve")
    assert ledger[0].strip() == answer and ledger[1] > 0


def test_batched_routing_gives_asks_probabilities(served_store):
    """serve routes micro-batches with route_many (the sklearn pipeline's predict_proba on many
    rows); its probabilities are those of ask's route (the pyfunc, one row) for each question."""
    from ragrouter.answering import ask as ask_mod
    from ragrouter.answering import routing
    from ragrouter.config import Config
    from ragrouter.db import engine as eng

    cfg = Config.load(path=served_store["tmp"] / "cfg.yaml", env={})
    engine = eng.make_engine(served_store["url"], read_only=True)
    try:
        qs = ["Where did Marie Curie study?", "Summarise the Curies' work.", "Why did Pierre Curie win a prize?"]
        types = ["factual", "summary", "reasoning"]
        many = ask_mod.route_many(engine, cfg, "toy", qs, types, run_id=served_store["run_id"])
        one = [ask_mod.route(engine, cfg, "toy", q, query_type=t, run_id=served_store["run_id"]) for q, t in zip(qs, types)]
        model = ask_mod.load_router(cfg, many[0].chosen, routing.store_id(engine))
    finally:
        eng.dispose_all()
    assert ask_mod._sklearn_pipeline(model) is not None  # lr: the fast path was the one taken
    for m, o in zip(many, one):
        assert m.probabilities.keys() == o.probabilities.keys()
        assert m.probabilities == pytest.approx(o.probabilities, abs=1e-12)
        assert abs(sum(m.probabilities.values()) - 1) < 1e-9
    assert len({tuple(m.probabilities.values()) for m in many}) > 1  # the types change the verdict


def test_sigterm_lets_a_stream_in_flight_finish(served_store):
    """SIGTERM arrives while an answer is being streamed: the stream still ends with the last
    chunk (decision, usage) and the server exits 0 once it has."""
    import openai

    srv = served_store["srv"]
    proc, base, _ = _serve(["serve", "--corpus", "toy", "--port", "0", "--cost-share", "0"], served_store["env"])
    srv.stream_chunk_delay_s = 0.3
    chunks = []
    try:
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=120)
        for ch in client.chat.completions.create(model="ragrouter/toy", stream=True, messages=[
                {"role": "user", "content": "What did Marie Curie discover in 1898?"}]):
            chunks.append(ch)
            if len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 1:
                proc.send_signal(signal.SIGTERM)  # the first words are out, the rest is still coming
        out, err = proc.communicate(timeout=60)
    finally:
        srv.stream_chunk_delay_s = 0.0
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped (SIGTERM)" in out
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) >= 5 and chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].model_extra["ragrouter"]["run_id"] and "".join(texts).startswith("Answer to")


class _SlowForcedRouter:
    """The server's router batcher, made to take ``delay`` seconds and to put all probability
    on the paradigm ``force`` names for each question (recording when it decided)."""

    def __init__(self, inner, force: dict[str, str], delay: float):
        self.inner, self.force, self.delay, self.decided = inner, force, delay, {}
        self.types = inner.types

    def __call__(self, item):
        import dataclasses

        routed = self.inner(item)
        time.sleep(self.delay)
        self.decided[item[2]] = time.monotonic()
        want = self.force[item[2]]
        return dataclasses.replace(routed, probabilities={**{p: 0.0 for p in routed.probabilities}, want: 1.0})

    def close(self):
        self.inner.close()


def test_the_question_is_embedded_while_the_router_decides(served_store):
    """--prefetch-embedding (the default): the question's embedding reaches the endpoint while
    the router is still deciding (made to take 0.6 s here), the naive paradigm's dense retrieval
    joins it (one embedding request for the question: nothing paid twice); a question routed to
    llm_only pays that one embedding unused. Off,
    the embedding is sent after the decision, and only by a paradigm that needs it."""
    from fastapi.testclient import TestClient

    from ragrouter.config import Config
    from ragrouter.db import engine as eng
    from ragrouter.serve.app import create_app, prepare
    from ragrouter.stages.services import Services

    cfg = Config.load(path=served_store["tmp"] / "cfg.yaml", env={})
    srv = served_store["srv"]
    for prefetch in (True, False):
        engine = eng.make_engine(served_store["url"])
        services = Services(cfg, engine, command="serve")
        state = prepare(engine, cfg, services, ["toy"], None, served_store["run_id"], None, None,
                        ("llm_only", "naive"), prefetch_embedding=prefetch)
        tag = "with" if prefetch else "without"
        force = {f"Where did Marie Curie work first ({tag} prefetch)?": "naive",
                 f"What did Pierre Curie write ({tag} prefetch)?": "llm_only"}
        state.router_batch = router = _SlowForcedRouter(state.router_batch, force, 0.6)
        n0 = len(srv.requests)
        replies = {}
        try:
            with TestClient(create_app(state)) as c:
                for q in force:
                    r = c.post("/v1/chat/completions", json={"model": "ragrouter/toy", "messages": [
                        {"role": "user", "content": q}]})
                    assert r.status_code == 200, r.text
                    replies[q] = r.json()
        finally:
            state.close()
            services.finish()
            eng.dispose_all()
        log = srv.requests[n0:]
        for q, paradigm in force.items():
            rr = replies[q]["ragrouter"]
            assert rr["paradigm"] == paradigm and rr["routing_ms"] >= 600
            embeds = [e["t"] for e in log if e["path"].endswith("/embeddings") and q in json.dumps(e["body"])]
            if paradigm == "naive" or prefetch:
                assert len(embeds) == 1, (prefetch, paradigm, len(embeds))
                if prefetch:  # sent while the router still had 0.6 s to go
                    assert embeds[0] < router.decided[q] - 0.4
                else:
                    assert embeds[0] > router.decided[q]
            else:
                assert embeds == []  # llm_only embeds nothing
            assert replies[q]["choices"][0]["message"]["content"].startswith("Answer to")


@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_served_runs_written_in_a_batch_are_the_rows_one_by_one_writes(kind, request, tmp_path):
    """serve's group commit (``serve/store.py``: one executemany per table for a whole batch)
    writes the rows that ``ask.store`` writes for each question alone: the same query and run
    columns, the run_calls pointing at the same ledger rows; a question asked twice in a batch,
    or again later, keeps its first query and run."""
    from sqlalchemy import select

    from ragrouter.answering import ask as ask_mod
    from ragrouter.db import models
    from ragrouter.db.engine import write_lock
    from ragrouter.llm.gateway import Gateway
    from ragrouter.paradigms.results import ParadigmResult
    from ragrouter.serve.store import store_queries, store_runs

    store = request.getfixturevalue("pg_store" if kind == "postgres" else "store")
    with FakeOpenAI() as srv:
        config = fake_config(srv, tmp_path)
        ingest(store)
        gw = Gateway(config, store)
        request.addfinalizer(gw.close)
        with store.connect() as conn:
            cid = conn.execute(select(models.Corpus.id)).scalar_one()
        questions = ["Who founded the river town?", "What does the second document say?", "Who founded the river town?"]
        paradigms = ["naive", "llm_only", "naive"]
        messages = [{"role": "user", "content": q} for q in questions]
        calls = [gw.chat("fake-gen", [m], temperature=0.0, max_tokens=20, stage="answer", phase="generation")
                 for m in messages]

        def answer(i, origin_q):
            out = ask_mod.Answer(question=origin_q, query_type="factual", router="lr", features="one-hot",
                                 probabilities={"naive": 0.6, "llm_only": 0.4}, paradigm=paradigms[i], why="test")
            result = ParadigmResult(answer=f"answer {i}", retrieved_chunk_ids=[1, 2] if i != 1 else [],
                                    context_tokens=30 + i, iterations=0, trace={"wall_s": 0.5 + i},
                                    calls=[(calls[i].call_id, "generation")], ret_in=3, ret_out=0,
                                    gen_in=10 + i, gen_out=4)
            return out, result

        batch = [answer(i, q) for i, q in enumerate(questions)]
        with write_lock(store), store.begin() as conn:
            qids = store_queries(conn, [(cid, out) for out, _ in batch])
        run_ids = gw.commit_with(lambda conn: store_runs(conn, config, [
            (qid, "fake-gen", out, res) for qid, (out, res) in zip(qids, batch)]))
        assert qids[0] == qids[2] != qids[1] and run_ids[0] == run_ids[2] != run_ids[1]
        assert all(isinstance(r, int) for r in run_ids)
        again = [answer(i, q) for i, q in enumerate(questions)]
        with write_lock(store), store.begin() as conn:
            assert store_queries(conn, [(cid, out) for out, _ in again]) == qids
        assert gw.commit_with(lambda conn: store_runs(conn, config, [
            (qid, "fake-gen", out, res) for qid, (out, res) in zip(qids, again)])) == run_ids

        def rows(origin):
            Q, R, L = models.Query.__table__, models.ParadigmRun.__table__, models.RunCall.__table__
            with store.connect() as conn:
                out = []
                for q in conn.execute(select(Q).where(Q.c.origin == origin).order_by(Q.c.question)).mappings().all():
                    runs = []
                    for r in conn.execute(select(R).where(R.c.query_id == q["id"])).mappings().all():
                        links = conn.execute(select(L.c.seq, L.c.llm_call_id, L.c.phase)
                                             .where(L.c.run_id == r["id"]).order_by(L.c.seq)).all()
                        runs.append(({c: v for c, v in r.items() if c not in ("id", "query_id", "created_at")},
                                     [tuple(x) for x in links]))
                    out.append(({c: q[c] for c in ("qtype", "question", "answer", "status", "meta")}, runs))
                return out

        gw.flush()
        for out, res in [answer(i, q) for i, q in enumerate(questions)]:
            with write_lock(store), store.begin() as conn:
                ask_mod.store(conn, config, cid, "fake-gen", out, res, origin="ask")
        served, asked = rows("serve"), rows("ask")
        assert len(served) == 2 and served == asked
        assert served[1][1][0][1] == [(0, calls[0].call_id, "generation")]


def _cli(args: list[str]):
    from click.testing import CliRunner

    import cli as cli_module
    from ragrouter.db import engine as eng

    try:
        return CliRunner().invoke(cli_module.cli, args, catch_exceptions=False)
    finally:
        eng.dispose_all()


def test_served_questions_become_judged_training_questions(served_store, tmp_path):
    """Issue 33: "served traffic can be judged later and become training data". Two questions
    are served; `corpus asked` writes them for a person to answer; ingested back, every paradigm
    answers them (the served paradigm's generation is the served call's ledger row: nothing is
    paid twice), the judge labels them; a second export leaves them out, and a file a person may
    be answering is not overwritten."""
    import shutil

    from fastapi.testclient import TestClient

    from ragrouter.config import Config
    from ragrouter.db import engine as eng
    from ragrouter.serve.app import create_app, prepare
    from ragrouter.stages.services import Services

    src = Path(served_store["url"].split("///", 1)[1])
    store = tmp_path / "store.duckdb"
    shutil.copy(src, store)
    if src.with_name(src.name + ".wal").exists():
        shutil.copy(src.with_name(src.name + ".wal"), tmp_path / "store.duckdb.wal")
    url, cfg_path = f"duckdb:///{store}", served_store["tmp"] / "cfg.yaml"
    cfg = Config.load(path=cfg_path, env={})
    asked = ["Which element did Marie Curie name after Poland?", "Where was Pierre Curie born?"]
    engine = eng.make_engine(url)
    services = Services(cfg, engine, command="serve")
    state = prepare(engine, cfg, services, ["toy"], None, served_store["run_id"], None, None, ("llm_only", "naive"))
    try:
        with TestClient(create_app(state)) as c:
            served = {}
            for q in asked:
                r = c.post("/v1/chat/completions", json={"model": "ragrouter/toy", "messages": [
                    {"role": "user", "content": q}]})
                assert r.status_code == 200, r.text
                served[q] = r.json()["ragrouter"]
    finally:
        state.close()
        services.finish()
        eng.dispose_all()

    base = ["--db", url, "--config", str(cfg_path)]
    out = tmp_path / "asked.jsonl"
    res = _cli([*base, "corpus", "asked", "toy", str(out)])
    assert res.exit_code == 0, res.output
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert f"wrote {len(exported)} asked question(s) of 'toy' to {out}" in res.output
    records = [r for r in exported if r["question"] in asked]  # earlier tests served questions too
    others = len(exported) - len(records)
    assert [r["question"] for r in records] == asked
    out.write_text("".join(json.dumps(r) + "\n" for r in records))  # the two a person answers here
    for rec in records:
        assert rec["id"].startswith("asked-") and rec["answer"] == "" and rec["asked_via"] == ["serve"]
        assert rec["served_paradigm"] == served[rec["question"]]["paradigm"]
        assert rec["probabilities"] == pytest.approx(served[rec["question"]]["probabilities"])
    # a record left unanswered is refused by ingest, naming the file and the record
    bad = subprocess.run([sys.executable, str(REPO / "cli.py"), *base, "ingest", "--corpus", "toy", "--format",
                          "ragrouter", str(out)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert bad.returncode == 2 and f"{out}: line 1 (id '{records[0]['id']}'): 'answer' is empty" in bad.stderr
    records[0]["answer"] = "The Nobel Prize"
    records[1].update(unanswerable=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _cli([*base, "ingest", "--corpus", "toy", "--format", "ragrouter", str(out)])
    assert res.exit_code == 0, res.output

    engine = eng.make_engine(url)
    try:
        run(engine, cfg, "answer", "judge", "score")
        with engine.connect() as conn:
            paradigms = {r[0] for r in conn.execute(text(
                "SELECT DISTINCT r.paradigm FROM paradigm_runs r JOIN queries q ON q.id = r.query_id "
                "WHERE q.origin <> 'serve' AND q.external_id NOT LIKE 'asked-%'"))}
            new = conn.execute(text("SELECT id, question, status, unanswerable FROM queries "
                                    "WHERE external_id LIKE 'asked-%' ORDER BY question")).all()
            assert [(q, s != "asked", bool(u)) for _, q, s, u in new] == [
                (asked[1], True, True), (asked[0], True, False)]
            for qid, question, _, _ in new:
                runs = dict(conn.execute(text("SELECT paradigm, id FROM paradigm_runs WHERE query_id = :q"),
                                         {"q": qid}).all())
                assert set(runs) == paradigms and len(paradigms) == 5
                judged = conn.execute(text("SELECT COUNT(DISTINCT run_id) FROM judgments WHERE run_id IN "
                                           "(SELECT id FROM paradigm_runs WHERE query_id = :q)"), {"q": qid}).scalar()
                assert judged == 5
                gen = "SELECT llm_call_id FROM run_calls WHERE run_id = :r AND phase = 'generation' ORDER BY seq"
                mine = [r[0] for r in conn.execute(text(gen), {"r": runs[served[question]["paradigm"]]})]
                theirs = [r[0] for r in conn.execute(text(gen), {"r": served[question]["run_id"]})]
                assert mine == theirs and mine  # the served answer's ledger row, not a second call
    finally:
        eng.dispose_all()

    res = _cli([*base, "corpus", "asked", "toy", str(out)])
    assert res.exit_code == 2 and "exists" in res.output and len(res.output.strip().splitlines()) == 1
    res = _cli([*base, "corpus", "asked", "toy", str(out), "--force"])
    assert res.exit_code == 0 and f"wrote {others} asked question(s)" in res.output
    assert not {json.loads(line)["question"] for line in out.read_text().splitlines()} & set(asked)
    res = _cli([*base, "corpus", "asked", "toy", str(out), "--force", "--all"])
    assert res.exit_code == 0 and len(out.read_text().splitlines()) == others + 2
    nope = subprocess.run([sys.executable, str(REPO / "cli.py"), *base, "corpus", "asked", "nope",
                           str(tmp_path / "x.jsonl")], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert nope.returncode == 2 and "corpus 'nope' is not in the store" in nope.stderr
    assert len(nope.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_a_question_asked_through_ask_and_serve_is_one_record_with_its_latest_answer(kind, request, tmp_path):
    """`corpus asked` writes one record per question text: the same question asked through
    `ask` and then `serve` is two query rows (their ids differ by origin) but one asked-<hash>
    id, so two records would make the file ingest refuse its own export. The record keeps both
    origins, the latest run's answer and the probabilities the router gave for it; a question
    without a run still carries its router's view; once its asked-<hash> id is ingested it is
    left out (``include_ingested`` keeps it)."""
    from sqlalchemy import select

    from ragrouter.answering import ask as ask_mod
    from ragrouter.answering import lookup
    from ragrouter.db import models
    from ragrouter.db.engine import write_lock
    from ragrouter.paradigms.results import ParadigmResult

    store = request.getfixturevalue("pg_store" if kind == "postgres" else "store")
    with FakeOpenAI() as srv:
        config = fake_config(srv, tmp_path)
        ingest(store)
        with store.connect() as conn:
            cid, corpus = conn.execute(select(models.Corpus.id, models.Corpus.name)).one()

        def asked(question, origin, paradigm, p_naive, answer):
            out = ask_mod.Answer(question=question, query_type="factual", router="lr", features="one-hot",
                                 probabilities={"naive": p_naive, "llm_only": 1 - p_naive}, paradigm=paradigm,
                                 why="test")
            result = None if answer is None else ParadigmResult(
                answer=answer, retrieved_chunk_ids=[], context_tokens=0, iterations=0, trace={}, calls=[],
                ret_in=0, ret_out=0, gen_in=5, gen_out=3)
            with write_lock(store), store.begin() as conn:
                ask_mod.store(conn, config, cid, "fake-gen", out, result, origin=origin)

        asked("Who founded the river town?", "ask", "naive", 0.7, "the ferryman")
        asked("What does the second document say?", "serve", "naive", 0.6, None)  # its paradigm failed
        asked("Who founded the river town?", "serve", "llm_only", 0.2, "a miller")

        rows = lookup.asked_questions(store, corpus)
        assert [(r["question"], r["origins"], r["paradigm"], r["answer"]) for r in rows] == [
            ("Who founded the river town?", ["ask", "serve"], "llm_only", "a miller"),
            ("What does the second document say?", ["serve"], None, None)]
        assert rows[0]["probabilities"] == {"naive": 0.2, "llm_only": 0.8}
        assert rows[1]["router"] == "lr" and rows[1]["probabilities"] == {"naive": 0.6, "llm_only": 0.4}
        assert len({r["id"] for r in rows}) == 2 and all(r["id"].startswith(lookup.ASKED_PREFIX) for r in rows)
        assert rows[0]["id"] == lookup.ASKED_PREFIX + ask_mod.asked_external_id("ask", rows[0]["question"]).split(":")[1]

        with store.begin() as conn:  # the first one answered by a person and ingested
            conn.execute(models.Query.__table__.insert().values(
                corpus_id=cid, external_id=rows[0]["id"], origin="dataset", qtype="factual",
                question=rows[0]["question"], answer="The ferryman", status="accepted"))
        assert [r["question"] for r in lookup.asked_questions(store, corpus)] == ["What does the second document say?"]
        assert len(lookup.asked_questions(store, corpus, include_ingested=True)) == 2
