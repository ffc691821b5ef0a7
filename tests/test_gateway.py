"""Tests for the LLM gateway against the scripted fake OpenAI-compatible server.

Fast: backoff sleeps are injected (recorded, not slept), timeouts are a fraction of a second.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from sqlalchemy import create_engine, func, select, text

from ragrouter.config import Config
from ragrouter.db import migrate
from ragrouter.db.models import Base, LLMCall, LLMFailure
from ragrouter.llm import tokens
from ragrouter.llm.backends import GatewayError, redact
from ragrouter.llm.kinds import BACKENDS
from ragrouter.llm.gateway import ChatResult, Gateway, chat_key, embed_key, message_tokens, request_hash
from ragrouter.llm.jsonparse import JSONParseError, parse_json, parse_reply, validate

try:
    from tests.fake_openai import FakeOpenAI, fake_embedding
except ModuleNotFoundError:  # rootdir-less import mode
    from fake_openai import FakeOpenAI, fake_embedding

KEY_ENV = "RAGROUTER_TEST_FAKE_KEY"
JUDGE_SCHEMA = {
    "type": "object",
    "required": ["label", "reason"],
    "properties": {"label": {"enum": ["correct", "incorrect", "incomplete"]}, "reason": {"type": "string"}},
}
ALLOWED_REASONS = {"rate_limited", "server_error", "timeout", "connection_error", "empty_content",
                   "unparseable_json", "schema_mismatch", "bad_response"}


def cfg_for(backends: dict, roles: dict | None = None) -> Config:
    first = next(iter(backends))
    roles = roles or {"generators": [first], "extractor": first, "judge": first, "query_generator": first,
                      "embedder": first}
    return Config({"backends": backends, "roles": roles}, source="test-config")


def fake_backend(srv: FakeOpenAI, **kw) -> dict:
    spec = {"kind": "openai", "base_url": srv.base_url, "model": "fake-model", "api_key_env": KEY_ENV,
            "concurrency": 8, "timeout_s": 5, "retries": 3}
    spec.update(kw)
    return spec


class Sleeps:
    """Injected sleep: records the delays instead of sleeping."""

    def __init__(self):
        self.calls: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, s: float) -> None:
        with self.lock:
            self.calls.append(s)


@pytest.fixture
def gateways(store):
    made: list[Gateway] = []

    def make(cfg, **kw) -> Gateway:
        kw.setdefault("sleep", Sleeps())
        gw = Gateway(cfg, store, **kw)
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.close()


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-key-value")


def user(text_: str) -> list[dict]:
    return [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": text_}]


def count_rows(engine, model) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(model)).scalar_one()


# --------------------------------------------------------------------------- jsonparse


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": [1, 2,],}\n```', {"a": [1, 2]}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('Sure! {"label": "correct", "reason": "it\'s fine {really}"} Hope it helps.',
         {"label": "correct", "reason": "it's fine {really}"}),
        ("{'a': 'don't', 'b': True, 'c': None}", {"a": "don't", "b": True, "c": None}),
        ('[["s", "r", "o"],]', [["s", "r", "o"]]),
        ("{'msg': 'say \"hi\"'}", {"msg": 'say "hi"'}),
        ('  "just a string"  ', "just a string"),
    ],
)
def test_parse_json_tolerates_common_model_mistakes(reply, expected):
    assert parse_json(reply) == expected


@pytest.mark.parametrize(
    "reply, reason",
    [("", "empty_content"), ("   \n", "empty_content"), (None, "empty_content"), ("no json here", "unparseable_json"),
     ('{"a": 1', "unparseable_json"), ("```json\n{broken\n```", "unparseable_json")],
)
def test_parse_json_failures_have_reasons(reply, reason):
    with pytest.raises(JSONParseError) as info:
        parse_json(reply)
    assert info.value.reason == reason


def test_parse_reply_prefers_the_schema_kind_and_validates():
    assert parse_reply('see [1] for details: {"label": "correct", "reason": "x"}', JUDGE_SCHEMA) == {
        "label": "correct", "reason": "x"}
    with pytest.raises(JSONParseError) as info:
        parse_reply('{"label": "maybe"}', JUDGE_SCHEMA)
    assert info.value.reason == "schema_mismatch"
    assert "'maybe' is not one of" in info.value.detail and "missing required key 'reason'" in info.value.detail


def test_validator_keywords():
    triples = {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "minItems": 3,
                                          "maxItems": 3}}
    assert validate([["a", "b", "c"]], triples) == []
    assert validate([["a", "b"]], triples) == ["$[0]: has 2 items, fewer than minItems=3"]
    assert validate([["a", "b", 1]], triples) == ["$[0][2]: expected string, got integer"]
    strict = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}
    assert validate({"n": 2}, strict) == []
    assert validate({"n": 2.0}, strict) == []
    assert validate({"n": True}, strict) == ["$.n: expected integer, got boolean"]
    assert validate({"n": 1, "x": 0}, strict) == ["$: unexpected key 'x'"]
    assert validate(None, {"type": ["string", "null"]}) == []
    assert validate(3, {"anyOf": [{"type": "string"}, {"type": "integer"}]}) == []
    assert validate(3.5, {"anyOf": [{"type": "string"}, {"type": "integer"}]}) == [
        "$: matches none of the anyOf alternatives"]


# --------------------------------------------------------------------------- keys


def test_cache_key_is_canonical_and_covers_the_request():
    base = dict(temperature=0.0, max_tokens=10, structured="json_schema", json_schema=JUDGE_SCHEMA, sample=0)
    h = request_hash(chat_key("m", user("q"), **base))
    assert h == request_hash(chat_key("m", user("q"), **{**base, "temperature": 0}))  # 0 == 0.0
    reordered = [{"content": m["content"], "role": m["role"]} for m in user("q")]
    assert h == request_hash(chat_key("m", reordered, **base))
    for change in ({"temperature": 0.1}, {"max_tokens": 11}, {"sample": 1}, {"json_schema": None},
                   {"structured": "json_object"}):
        assert request_hash(chat_key("m", user("q"), **{**base, **change})) != h, change
    assert request_hash(chat_key("m2", user("q"), **base)) != h
    assert request_hash(chat_key("m", user("q2"), **base)) != h
    assert request_hash(embed_key("m", ["a"])) != request_hash(embed_key("m", ["a"], dimensions=8))
    assert len(h) == 64 and int(h, 16) >= 0


def test_backend_registry_has_the_three_kinds():
    assert set(BACKENDS) == {"openai", "local", "local-encoder"}


# --------------------------------------------------------------------------- basic calls + cache


def test_chat_is_ledgered_and_the_repeat_is_a_cache_hit(store, gateways):
    with FakeOpenAI() as srv:
        gw = gateways(cfg_for({"fake": fake_backend(srv)}), worker_run_id=7)
        r1 = gw.chat("fake", user("What is 2+2?"), temperature=0.0, max_tokens=50, stage="answer",
                     phase="generation")
        assert r1.text == "echo: What is 2+2?" and not r1.cached and r1.data is None
        assert r1.prompt_tokens == tokens.count("Answer briefly.") + tokens.count("What is 2+2?")
        assert r1.completion_tokens == tokens.count(r1.text) and r1.token_source == "usage"
        before = srv.stats()["total"]
        r2 = gw.chat("fake", user("What is 2+2?"), temperature=0.0, max_tokens=50, stage="judge", phase="x")
        assert srv.stats()["total"] == before  # zero HTTP requests
        assert r2.cached and r2.call_id == r1.call_id and r2.text == r1.text
        assert (r2.prompt_tokens, r2.completion_tokens) == (r1.prompt_tokens, r1.completion_tokens)
        # a different decoding parameter or sample index is a different request
        gw.chat("fake", user("What is 2+2?"), temperature=0.3, max_tokens=50, stage="answer", phase="g")
        gw.chat("fake", user("What is 2+2?"), temperature=0.0, max_tokens=50, stage="answer", phase="g", sample=1)
        assert srv.stats()["total"] == before + 2
        gw.flush()
        with store.connect() as conn:
            row = conn.execute(select(LLMCall).where(LLMCall.id == r1.call_id)).mappings().one()
        assert row["request_hash"] == r1.request_hash and row["backend"] == "fake" and row["model"] == "fake-model"
        assert row["kind"] == "chat" and row["stage"] == "answer" and row["phase"] == "generation"
        assert row["messages"] == user("What is 2+2?") and row["response"] == r1.text
        assert row["params"]["temperature"] == 0.0 and row["params"]["max_tokens"] == 50
        assert row["prompt_tokens"] == r1.prompt_tokens and row["token_source"] == "usage"
        assert row["attempts"] == 1 and row["worker_run_id"] == 7 and row["latency_s"] > 0
        assert count_rows(store, LLMCall) == 3
        st = gw.stats()
        assert st["calls"] == 4 and st["cache_hits"] == 1 and st["http_requests"] == 3
        with store.connect() as conn:
            billed = conn.execute(text("SELECT sum(prompt_tokens + completion_tokens) FROM llm_calls "
                                       "WHERE worker_run_id = 7")).scalar_one()
        assert billed == st["billed_prompt_tokens"] + st["billed_completion_tokens"]


def test_next_run_reads_the_cache_from_the_store(store, gateways):
    with FakeOpenAI() as srv:
        cfg = cfg_for({"fake": fake_backend(srv)})
        first = gateways(cfg, worker_run_id=1)
        r1 = first.chat("fake", user("q1"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        first.close()
        second = gateways(cfg, worker_run_id=2)
        before = srv.stats()["total"]
        assert second.is_cached("fake", user("q1"), temperature=0.0, max_tokens=20)
        assert not second.is_cached("fake", user("q2"), temperature=0.0, max_tokens=20)
        r2 = second.chat("fake", user("q1"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert r2.cached and r2.call_id == r1.call_id and srv.stats()["total"] == before
        assert second.stats()["billed_prompt_tokens"] == 0


def test_same_model_behind_two_backend_names_shares_the_cache(store, gateways):
    with FakeOpenAI() as srv:
        gw = gateways(cfg_for({"a": fake_backend(srv), "b": fake_backend(srv, concurrency=2)}))
        r1 = gw.chat("a", user("shared"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        r2 = gw.chat("b", user("shared"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert r2.cached and r2.call_id == r1.call_id and srv.stats()["total"] == 1


def test_identical_requests_in_flight_make_one_http_call(store, gateways):
    with FakeOpenAI(latency_s=0.2) as srv:
        gw = gateways(cfg_for({"fake": fake_backend(srv)}))
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: gw.chat("fake", user("same"), temperature=0.0, max_tokens=20,
                                                      stage="s", phase="p"), range(8)))
        assert srv.stats()["total"] == 1
        assert len({r.call_id for r in results}) == 1
        assert sum(not r.cached for r in results) == 1


def test_roles_resolve_to_backends_and_bad_names_are_gateway_errors(store, gateways):
    with FakeOpenAI() as srv:
        cfg = cfg_for({"gen": fake_backend(srv), "judge-be": fake_backend(srv, model="judge-model")},
                      roles={"generators": ["gen"], "extractor": "gen", "judge": "judge-be",
                             "query_generator": "gen", "embedder": "gen"})
        gw = gateways(cfg)
        r = gw.chat("judge", user("x"), temperature=0.1, max_tokens=20, stage="judge", phase="p")
        assert srv.requests[-1]["body"]["model"] == "judge-model" and not r.cached
        for bad in ("generators", "nope"):
            with pytest.raises(GatewayError) as info:
                gw.chat(bad, user("x"), temperature=0.1, max_tokens=20, stage="s", phase="p")
            assert info.value.reason == "config" and bad in str(info.value)
        with pytest.raises(GatewayError) as info:
            gw.chat("gen", [{"content": "no role"}], temperature=0.1, max_tokens=20, stage="s", phase="p")
        assert info.value.reason == "bad_request"


# --------------------------------------------------------------------------- structured output


def test_json_schema_mode_sends_the_schema_and_parses_the_reply(store, gateways):
    with FakeOpenAI() as srv:
        gw = gateways(cfg_for({"fake": fake_backend(srv)}))
        r = gw.chat("fake", user("Is Paris the capital?"), temperature=0.0, max_tokens=100,
                    json_schema=JUDGE_SCHEMA, stage="judge", phase="p")
        assert r.data == {"label": "correct", "reason": "Is Paris the capital?"}
        fmt = srv.requests[-1]["body"]["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == JUDGE_SCHEMA
        gw.flush()
        with store.connect() as conn:
            stored = conn.execute(select(LLMCall.response_json).where(LLMCall.id == r.call_id)).scalar_one()
        assert stored == r.data


@pytest.mark.parametrize("mode", ["json_object", "none"])
def test_backends_without_json_schema_get_the_schema_in_the_system_prompt(mode, store, gateways):
    replies = ['```json\n{"label": "incorrect", "reason": "no",}\n```']
    with FakeOpenAI(responder=lambda req: replies[0]) as srv:
        gw = gateways(cfg_for({"fake": fake_backend(srv, structured_output=mode)}))
        r = gw.chat("fake", user("q"), temperature=0.0, max_tokens=100, json_schema=JUDGE_SCHEMA,
                    stage="judge", phase="p")
        assert r.data == {"label": "incorrect", "reason": "no"}
        body = srv.requests[-1]["body"]
        assert body["messages"][0]["role"] == "system"
        assert body["messages"][0]["content"].startswith("Answer briefly.")
        assert json.dumps(JUDGE_SCHEMA, sort_keys=True) in body["messages"][0]["content"]
        if mode == "json_object":
            assert body["response_format"] == {"type": "json_object"}
        else:
            assert "response_format" not in body


def test_unusable_replies_are_recorded_failures_and_retried_next_time(store, gateways):
    replies = iter(['{"label": "maybe"}', "", "not json at all", '{"label": "correct", "reason": "ok"}'])
    with FakeOpenAI(responder=lambda req: next(replies)) as srv:
        gw = gateways(cfg_for({"fake": fake_backend(srv)}))
        reasons = []
        for _ in range(3):
            with pytest.raises(GatewayError) as info:
                gw.chat("fake", user("q"), temperature=0.0, max_tokens=100, json_schema=JUDGE_SCHEMA,
                        stage="judge", phase="p")
            reasons.append(info.value.reason)
        assert reasons == ["schema_mismatch", "empty_content", "unparseable_json"]
        r = gw.chat("fake", user("q"), temperature=0.0, max_tokens=100, json_schema=JUDGE_SCHEMA,
                    stage="judge", phase="p")
        assert r.data == {"label": "correct", "reason": "ok"} and not r.cached
        assert srv.stats()["total"] == 4  # failures were never served from the cache
        gw.flush()
        with store.connect() as conn:
            fails = conn.execute(select(LLMFailure).order_by(LLMFailure.id)).mappings().all()
        assert [f["error"].split(":")[0] for f in fails] == reasons
        assert fails[0]["response"] == '{"label": "maybe"}' and fails[0]["attempts"] == 1
        assert fails[0]["prompt_tokens"] == r.prompt_tokens and fails[0]["completion_tokens"] > 0
        assert all(f["request_hash"] == r.request_hash for f in fails)
        assert count_rows(store, LLMCall) == 1
        assert gw.stats()["failures"] == 3


# --------------------------------------------------------------------------- tokens


def test_tokens_from_usage_else_tiktoken(store, gateways):
    with FakeOpenAI() as with_usage, FakeOpenAI(omit_usage=True) as without:
        gw = gateways(cfg_for({"u": fake_backend(with_usage, model="m-usage"),
                               "t": fake_backend(without, model="m-count")}))
        msgs = user("How many tokens does this question have?")
        a = gw.chat("u", msgs, temperature=0.0, max_tokens=100, stage="s", phase="p")
        b = gw.chat("t", msgs, temperature=0.0, max_tokens=100, stage="s", phase="p")
        assert (a.token_source, b.token_source) == ("usage", "tiktoken")
        assert b.prompt_tokens == message_tokens(msgs) == a.prompt_tokens
        assert b.completion_tokens == tokens.count(b.text) == a.completion_tokens
        vec = gw.embed("t", ["one two three", "four"], stage="s", phase="e")
        assert vec.shape == (2, 64)
        gw.flush()
        with store.connect() as conn:
            rows = conn.execute(select(LLMCall.model, LLMCall.kind, LLMCall.token_source, LLMCall.prompt_tokens)
                                .order_by(LLMCall.id)).all()
        assert rows == [("m-usage", "chat", "usage", a.prompt_tokens), ("m-count", "chat", "tiktoken", b.prompt_tokens),
                        ("m-count", "embedding", "tiktoken", tokens.count("one two three") + tokens.count("four"))]
        assert Gateway.estimate_tokens(msgs, 300) == (message_tokens(msgs), 300)


# --------------------------------------------------------------------------- embeddings


def test_embeddings_are_batched_normalised_and_cached(store, gateways):
    with FakeOpenAI(embedding_dim=16) as srv:
        gw = gateways(cfg_for({"emb": fake_backend(srv, batch_size=3)}))
        texts = [f"text {i}" for i in range(7)]
        assert not gw.embed_is_cached("emb", texts)
        vecs = gw.embed("emb", texts, stage="embed", phase="chunks")
        assert vecs.dtype == np.float32 and vecs.shape == (7, 16)
        expected = np.vstack([fake_embedding(t, 16) for t in texts])
        np.testing.assert_allclose(vecs, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-6)
        assert srv.stats()["by_path"] == {"/v1/embeddings": 3}
        assert [len(r["body"]["input"]) for r in srv.requests] == [3, 3, 1]
        again = gw.embed("emb", texts, stage="embed", phase="chunks")
        assert srv.stats()["total"] == 3 and np.array_equal(again, vecs)
        assert gw.embed_is_cached("emb", texts)
        gw.flush()
        with store.connect() as conn:
            rows = conn.execute(select(LLMCall.messages, LLMCall.response_vectors, LLMCall.kind)
                                .order_by(LLMCall.id)).all()
        assert [r.kind for r in rows] == ["embedding"] * 3 and rows[0].messages == texts[:3]
        np.testing.assert_array_equal(np.frombuffer(rows[2].response_vectors, dtype="<f4").reshape(1, 16), vecs[6:])
        assert gw.embed("emb", [], stage="s", phase="p").shape[0] == 0


# --------------------------------------------------------------------------- retries


def test_backoff_is_full_jitter_with_a_seeded_rng(store, gateways):
    with FakeOpenAI(fault_plan=["server_error"] * 3) as srv:
        sleeps = Sleeps()
        gw = gateways(cfg_for({"fake": fake_backend(srv)}), sleep=sleeps, rng=random.Random(11))
        r = gw.chat("fake", user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        ref = random.Random(11)
        assert sleeps.calls == [ref.uniform(0, 0.5 * 2 ** i) for i in range(3)]
        assert r.attempts == 4 and srv.stats()["total"] == 4 and gw.stats()["retries"] == 3


def test_retry_after_is_honoured_and_capped(store, gateways):
    with FakeOpenAI(fault_plan=["rate_limit"], retry_after_s=0.25) as srv:
        sleeps = Sleeps()
        gw = gateways(cfg_for({"fake": fake_backend(srv)}), sleep=sleeps)
        gw.chat("fake", user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert sleeps.calls == [0.25]
    with FakeOpenAI(fault_plan=["rate_limit"], retry_after_s=100) as srv:
        sleeps = Sleeps()
        gw = gateways(cfg_for({"fake": fake_backend(srv)}), sleep=sleeps, backoff_cap_s=20.0)
        gw.chat("fake", user("q2"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert sleeps.calls == [20.0]


def test_exhausted_retries_raise_and_record_the_reason(store, gateways):
    with FakeOpenAI(fault_plan=["server_error"] * 4) as srv:
        sleeps = Sleeps()
        gw = gateways(cfg_for({"fake": fake_backend(srv)}), sleep=sleeps)
        with pytest.raises(GatewayError) as info:
            gw.chat("fake", user("q"), temperature=0.0, max_tokens=20, stage="extract", phase="p")
        assert info.value.reason == "server_error" and info.value.attempts == 4 and len(sleeps.calls) == 3
        gw.flush()
        with store.connect() as conn:
            fail = conn.execute(select(LLMFailure)).mappings().one()
        assert fail["attempts"] == 4 and fail["error"].startswith("server_error: HTTP 500")
        assert fail["stage"] == "extract" and fail["response"] is None and fail["prompt_tokens"] is None
        # the next call (next run) tries again and succeeds
        r = gw.chat("fake", user("q"), temperature=0.0, max_tokens=20, stage="extract", phase="p")
        assert not r.cached and srv.stats()["total"] == 5


def test_timeouts_are_retried_and_the_per_call_timeout_overrides(store, gateways):
    with FakeOpenAI(fault_plan=["timeout", "timeout"], timeout_fault_s=2.0) as srv:
        gw = gateways(cfg_for({"fake": fake_backend(srv, timeout_s=0.2)}))
        r = gw.chat("fake", user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert r.attempts == 3 and r.text == "echo: q"
    with FakeOpenAI(fault_plan=["timeout"] * 4, timeout_fault_s=2.0) as srv:
        # the backend allows 5 s (the delayed reply would arrive); the call asks for 0.1 s
        gw = gateways(cfg_for({"fake": fake_backend(srv, timeout_s=5)}))
        with pytest.raises(GatewayError) as info:
            gw.chat("fake", user("q-slow"), temperature=0.0, max_tokens=20, stage="s", phase="p", timeout_s=0.1)
        assert info.value.reason == "timeout" and info.value.attempts == 4


def test_client_errors_fail_at_once_and_connection_errors_are_retried(store, gateways):
    with FakeOpenAI() as srv:
        sleeps = Sleeps()
        gw = gateways(cfg_for({"wrong": fake_backend(srv, base_url=srv.base_url + "/nowhere")}), sleep=sleeps)
        with pytest.raises(GatewayError) as info:
            gw.chat("wrong", user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert info.value.reason == "http_404" and info.value.attempts == 1 and sleeps.calls == []
        assert srv.stats()["total"] == 1
        port = srv.port
    sleeps = Sleeps()
    gw = gateways(cfg_for({"down": {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1",
                                    "model": "m", "timeout_s": 1, "retries": 2}}), sleep=sleeps)
    with pytest.raises(GatewayError) as info:
        gw.chat("down", user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p")
    assert info.value.reason == "connection_error" and info.value.attempts == 3 and len(sleeps.calls) == 2


def test_concurrency_limit_is_respected(store, gateways):
    for limit, expect_above in ((3, False), (12, True)):
        with FakeOpenAI(latency_s=0.05) as srv:
            gw = gateways(cfg_for({"fake": fake_backend(srv, concurrency=limit)}))
            with ThreadPoolExecutor(12) as pool:
                list(pool.map(lambda i: gw.chat("fake", user(f"q{i} {limit}"), temperature=0.0, max_tokens=20,
                                                stage="s", phase="p"), range(36)))
            peak = srv.stats()["peak_in_flight"]
            if expect_above:
                assert peak > 3  # control: the fake does see more when the limit allows it
            else:
                assert 2 <= peak <= limit


# --------------------------------------------------------------------------- the fault mix


def _run_units(gw: Gateway, units: list[int]) -> dict[int, object]:
    def unit(i: int):
        try:
            if i % 3 == 0:
                return gw.chat("fake", user(f"unit {i}"), temperature=0.0, max_tokens=60, json_schema=JUDGE_SCHEMA,
                               stage="judge", phase="p")
            if i % 3 == 1:
                return gw.chat("fake", user(f"unit {i}"), temperature=0.3, max_tokens=60, stage="answer",
                               phase="generation")
            return gw.embed("fake", [f"unit {i} a", f"unit {i} b"], stage="embed", phase="p")
        except GatewayError as exc:
            return exc
        except BaseException as exc:  # noqa: BLE001 - collected so the test can say which escaped
            return ("ESCAPED", exc)

    with ThreadPoolExecutor(8) as pool:
        return dict(zip(units, pool.map(unit, units)))


def _check_outcomes(outcomes: dict) -> list[int]:
    failed = []
    for i, out in outcomes.items():
        assert not isinstance(out, tuple), f"unit {i}: {out[1]!r} escaped the gateway"
        if isinstance(out, GatewayError):
            assert out.reason in ALLOWED_REASONS, (i, out.reason, str(out))
            failed.append(i)
    return failed


def test_thirty_percent_faults_end_in_success_or_reason_and_a_second_run_heals(store, gateways):
    """Pass 1: 30 % faults (429, 500, timeout, malformed JSON, empty content; seed 3) over 60
    units in a pool of 8; units 0 and 3 go first, alone, through a plan of all five faults so
    that each kind is seen. Every unit ends as a result or a GatewayError with a reason, and
    nothing else escapes. Pass 2 is a new gateway (the next run) with the fault rate at 0: it
    heals every failure and asks nothing that succeeded before."""
    plan = ["rate_limit", "server_error", "timeout", "malformed_json", "empty_content"]
    with FakeOpenAI(fault_rate=0.3, seed=3, fault_plan=plan, timeout_fault_s=1.0, retry_after_s=0.01,
                    latency_s=0.005) as srv:
        cfg = cfg_for({"fake": fake_backend(srv, timeout_s=0.25)})
        units = list(range(60))
        run1 = gateways(cfg, worker_run_id=1)
        first = _run_units(run1, [0]) | _run_units(run1, [3])
        # malformed JSON is either unparseable or, once its complete part is salvaged, off-schema
        assert getattr(first[0], "reason", None) in ("unparseable_json", "schema_mismatch")
        assert getattr(first[3], "reason", None) == "empty_content"
        assert first[0].attempts == 4
        outcomes = first | _run_units(run1, [i for i in units if i not in first])
        failed = _check_outcomes(outcomes)
        stats = srv.stats()
        assert set(stats["by_fault"]) == set(plan)
        drawn = sum(stats["by_fault"].values()) - len(plan)
        assert 0.15 <= drawn / (stats["total"] - len(plan)) <= 0.45  # the mix really was ~30 %
        run1.close()
        assert count_rows(store, LLMFailure) >= len(failed)
        with store.connect() as conn:
            errors = conn.execute(select(LLMFailure.error)).scalars().all()
        assert all(e.split(":")[0] in ALLOWED_REASONS for e in errors)
        assert count_rows(store, LLMCall) == len(units) - len(failed)

        srv.fault_rate = 0.0
        srv.reset()
        run2 = gateways(cfg, worker_run_id=2)
        outcomes = _run_units(run2, units)
        assert _check_outcomes(outcomes) == []
        assert srv.stats()["total"] == len(failed)  # only the failed units made requests
        paid = {i for i, out in outcomes.items() if isinstance(out, ChatResult) and not out.cached}
        assert paid == {i for i in failed if i % 3 != 2}
        run2.close()
        assert count_rows(store, LLMCall) == len(units)
        with store.connect() as conn:
            paid2 = conn.execute(select(func.count()).where(LLMCall.worker_run_id == 2)).scalar_one()
        assert paid2 == len(failed)


def test_with_faults_still_on_repeated_runs_converge(store, gateways):
    """Same mix, but the faults stay at 30 % (seed 5): each run retries only what failed, and
    every unit has succeeded within ten runs."""
    with FakeOpenAI(fault_rate=0.3, seed=5, timeout_fault_s=1.0, retry_after_s=0.01) as srv:
        cfg = cfg_for({"fake": fake_backend(srv, timeout_s=0.25)})
        pending = list(range(30))
        history = []
        for run in range(1, 11):
            gw = gateways(cfg, worker_run_id=run)
            pending = _check_outcomes(_run_units(gw, pending))
            gw.close()
            history.append(len(pending))
            if not pending:
                break
        assert pending == [], history
        assert count_rows(store, LLMCall) == 30


# --------------------------------------------------------------------------- keys and secrets


def test_missing_api_key_is_a_clear_error_and_local_endpoints_need_none(store, gateways, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    remote = {"kind": "openai", "base_url": "https://api.example.invalid/v1", "model": "gpt-x",
              "api_key_env": KEY_ENV}
    with FakeOpenAI() as srv:
        cfg = cfg_for({"remote": remote, "vllm": fake_backend(srv),
                       "strict": fake_backend(srv, api_key_required=True)})
        gw = gateways(cfg)
        for name in ("remote", "strict"):
            with pytest.raises(GatewayError) as info:
                gw.chat(name, user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p")
            assert info.value.reason == "missing_api_key"
            assert KEY_ENV in str(info.value) and f"'{name}'" in str(info.value)
        assert srv.stats()["total"] == 0
        assert gw.chat("vllm", user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p").text == "echo: q"
        with pytest.raises(GatewayError) as info:
            gateways(cfg, offline_ok=False)  # preflight checks the role backends up front
        assert info.value.reason == "missing_api_key"


class _HeaderRecorder(BaseHTTPRequestHandler):
    """Answers every POST with a fixed chat completion and records its Authorization header."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append(self.headers.get("Authorization"))
        data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_the_key_is_read_from_the_environment_at_call_time(store, gateways, monkeypatch):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _HeaderRecorder)
    httpd.seen = []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        gw = gateways(cfg_for({"rec": {"kind": "openai", "base_url": url, "model": "m", "api_key_env": KEY_ENV}}))
        monkeypatch.setenv(KEY_ENV, "key-one")
        gw.chat("rec", user("q1"), temperature=0.0, max_tokens=5, stage="s", phase="p")
        monkeypatch.setenv(KEY_ENV, "key-two")
        gw.chat("rec", user("q2"), temperature=0.0, max_tokens=5, stage="s", phase="p")
        monkeypatch.delenv(KEY_ENV)  # a loopback endpoint (local vLLM) may be keyless
        r = gw.chat("rec", user("q3"), temperature=0.0, max_tokens=5, stage="s", phase="p")
        assert r.text == "ok" and r.token_source == "tiktoken"
        assert httpd.seen == ["Bearer key-one", "Bearer key-two", "Bearer EMPTY"]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_redact_removes_keys_and_auth_headers():
    secret = "sk-proj-abcdefghijklmnop"
    raw = (f"Authorization: Bearer {secret}\napi_key={secret} key {secret} "
           f"{{'api-key': 'zzzz1234'}} bearer abc.def")
    out = redact(raw, [secret])
    assert secret not in out and "zzzz1234" not in out and "abc.def" not in out
    assert "Bearer ***" in out


def test_api_key_value_never_reaches_the_store_or_the_logs(store, gateways, monkeypatch, caplog):
    marker = "sk-MARKER" + uuid.uuid4().hex
    monkeypatch.setenv(KEY_ENV, marker)
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx2", "httpx", "httpcore", "ragrouter"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    plan = ["rate_limit", "server_error", "malformed_json", None, "empty_content", "server_error", "server_error",
            "server_error", "server_error"]
    with FakeOpenAI(fault_plan=plan, retry_after_s=0.0) as srv:
        gw = gateways(cfg_for({"fake": fake_backend(srv, api_key_required=True)}), worker_run_id=1)
        outcomes = []
        for i in range(4):
            try:
                outcomes.append(gw.chat("fake", user(f"q{i}"), temperature=0.0, max_tokens=60,
                                        json_schema=JUDGE_SCHEMA, stage="s", phase="p"))
            except GatewayError as exc:
                outcomes.append(exc)
                assert marker not in str(exc)
        gw.embed("fake", ["a", "b"], stage="s", phase="e")
        assert gw.backend("fake").api_key() == marker  # the key really was in use
        gw.close()
    assert [type(o).__name__ for o in outcomes] == ["GatewayError", "ChatResult", "GatewayError", "GatewayError"]
    assert count_rows(store, LLMFailure) == 3
    with store.connect() as conn:
        for table in Base.metadata.sorted_tables:
            for row in conn.execute(select(table)).all():
                assert marker not in repr(tuple(row)), f"key found in table {table.name}"
    assert caplog.records, "expected log records from the gateway and the HTTP client"
    assert marker not in caplog.text
    assert all(marker not in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- ledger modes


def test_sync_and_async_ledger_modes_give_the_stored_ids(store, gateways):
    with FakeOpenAI() as srv:
        cfg = cfg_for({"fake": fake_backend(srv)})
        a = gateways(cfg, ledger_commit="async")
        ra = a.chat("fake", user("async"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        a.flush()
        s = gateways(cfg, ledger_commit="sync")
        rs = s.chat("fake", user("sync"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        with store.connect() as conn:  # sync: committed before chat() returned, no flush needed
            ids = dict(conn.execute(select(LLMCall.request_hash, LLMCall.id)).all())
        assert ids == {ra.request_hash: ra.call_id, rs.request_hash: rs.call_id}
    with pytest.raises(GatewayError):
        gateways(cfg, ledger_commit="sometimes")


@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_commit_with_writes_a_unit_with_its_ledger_rows_in_one_transaction(kind, request):
    """Gateway.commit_with (serve's group commit): the queued ledger rows and the caller's rows
    that link to them are one transaction; when the caller's part fails it is rolled back, the
    ledger rows are committed alone and the caller's error is raised (each store's default
    ledger mode: async on DuckDB, sync on PostgreSQL)."""
    store = request.getfixturevalue("pg_store" if kind == "postgres" else "store")
    with FakeOpenAI() as srv:
        gw = Gateway(cfg_for({"fake": fake_backend(srv)}), store, sleep=Sleeps())
        request.addfinalizer(gw.close)
        r1 = gw.chat("fake", user("first"), temperature=0.0, max_tokens=20, stage="s", phase="p")

        def unit(conn):  # the caller's rows see the ledger row they link to, in the same transaction
            conn.execute(text("CREATE TABLE unit_probe (call_id INTEGER)"))
            conn.execute(text("INSERT INTO unit_probe VALUES (:i)"), {"i": r1.call_id})
            return conn.execute(text("SELECT count(*) FROM llm_calls WHERE id = :i"), {"i": r1.call_id}).scalar_one()

        assert gw.commit_with(unit) == 1
        with store.connect() as conn:
            assert conn.execute(text("SELECT call_id FROM unit_probe")).scalars().all() == [r1.call_id]
        r2 = gw.chat("fake", user("second"), temperature=0.0, max_tokens=20, stage="s", phase="p")

        def bad(conn):
            conn.execute(text("INSERT INTO unit_probe VALUES (:i)"), {"i": r2.call_id})
            raise ValueError("the caller's rows are wrong")

        with pytest.raises(ValueError, match="caller's rows"):
            gw.commit_with(bad)
        gw.flush()  # no ledger write failed
        with store.connect() as conn:
            assert conn.execute(text("SELECT call_id FROM unit_probe")).scalars().all() == [r1.call_id]
            ids = set(conn.execute(select(LLMCall.id)).scalars())
        assert ids == {r1.call_id, r2.call_id}
        assert gw.commit_with(lambda conn: "nothing queued") == "nothing queued"


def test_in_memory_duckdb_and_a_gateway_dropped_without_close(store):
    from sqlalchemy.pool import StaticPool

    with FakeOpenAI() as srv:
        cfg = cfg_for({"fake": fake_backend(srv)})
        mem = create_engine("duckdb:///:memory:", poolclass=StaticPool)
        migrate.upgrade(mem)
        gw = Gateway(cfg, mem, sleep=Sleeps())  # no second connection: shares the engine's
        r = gw.chat("fake", user("in memory"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        gw.close()
        with mem.connect() as conn:
            assert conn.execute(select(LLMCall.id)).scalars().all() == [r.call_id]
        mem.dispose()

        dropped = Gateway(cfg, store, sleep=Sleeps())
        r = dropped.chat("fake", user("dropped"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        del dropped
        import gc

        gc.collect()  # the finalizer commits the queued row and closes the gateway's connection
        with store.connect() as conn:
            assert conn.execute(select(LLMCall.id)).scalars().all() == [r.call_id]


def test_postgres_store_in_sync_mode(pg_url):
    engine = create_engine(pg_url)
    migrate.upgrade(engine)
    try:
        with FakeOpenAI() as srv:
            cfg = cfg_for({"fake": fake_backend(srv)})
            gw = Gateway(cfg, engine, worker_run_id=3, sleep=Sleeps())
            assert gw.ledger_commit == "sync"
            with ThreadPoolExecutor(4) as pool:
                rs = list(pool.map(lambda i: gw.chat("fake", user(f"q{i % 5}"), temperature=0.0, max_tokens=20,
                                                     stage="s", phase="p"), range(20)))
            vec = gw.embed("fake", ["x"], stage="s", phase="e")
            gw.close()
            assert srv.stats()["total"] == 6 and vec.shape == (1, 64)
            gw2 = Gateway(cfg, engine, worker_run_id=4, ledger_commit="async", sleep=Sleeps())
            r_async = gw2.chat("fake", user("new"), temperature=0.0, max_tokens=20, stage="s", phase="p")
            again = gw2.chat("fake", user("q1"), temperature=0.0, max_tokens=20, stage="s", phase="p")
            gw2.close()
        with engine.connect() as conn:
            ids = dict(conn.execute(select(LLMCall.request_hash, LLMCall.id)).all())
        assert all(ids[r.request_hash] == r.call_id for r in rs)
        assert ids[r_async.request_hash] == r_async.call_id and again.cached
        assert len(ids) == 7
    finally:
        engine.dispose()


def test_reply_cut_at_max_tokens_keeps_its_complete_elements():
    from ragrouter.llm.jsonparse import parse_json, salvage_truncated

    assert parse_json('{"triples": [["a", "b", "c"], ["d", "e", "f"], ["g", "h') == {
        "triples": [["a", "b", "c"], ["d", "e", "f"]]}
    assert parse_json('{"entities": ["x", "y", "z') == {"entities": ["x", "y"]}
    assert parse_json('[{"a": 1}, {"b": 2') == [{"a": 1}]
    assert salvage_truncated('{"x": "ab') is None


# --------------------------------------------------------------------------- call-level scheduling


def test_priority_slots_serve_the_most_calls_left_first_fifo_among_equals():
    from ragrouter.llm.slots import PrioritySlots

    slots = PrioritySlots(1)
    slots.acquire((0, 0))
    order: list[str] = []
    keys = {"short-late": (-1, 5), "long": (-9, 7), "mid-a": (-3, 2), "mid-b": (-3, 4), "short-early": (-1, 1)}

    def waiter(name):
        slots.acquire(keys[name])
        order.append(name)
        slots.release()

    threads = []
    for i, name in enumerate(keys):
        threads.append(threading.Thread(target=waiter, args=(name,)))
        threads[-1].start()
        while slots.waiting() < i + 1:  # each waiter queued before the next one starts
            threading.Event().wait(0.001)
    slots.release()
    for t in threads:
        t.join(10)
    assert order == ["long", "mid-a", "mid-b", "short-early", "short-late"]
    with pytest.raises(ValueError):
        slots.release()  # released more often than acquired
    assert slots.busy_seconds() > 0


def test_a_free_slot_goes_to_the_request_of_the_unit_with_most_calls_left(store, gateways):
    """Concurrency 1, the slot held while five units queue a request each: the endpoint then
    receives them in the order of the units' expected calls left (then their start order), and
    each chat call counts the unit's calls left down."""
    from ragrouter.llm import slots

    with FakeOpenAI(latency_s=0.0) as srv:
        gw = gateways(cfg_for({"fake": fake_backend(srv, concurrency=1)}))
        gw.backend("fake")
        sem = gw._sems["fake"]
        sem.acquire()
        units = [("one-call", 1, 0), ("iterative", 11, 1), ("graph", 2, 2), ("iterative-later", 11, 3),
                 ("naive", 1, 4)]

        def unit(name, weight, seq):
            with slots.unit_priority(weight, seq):
                gw.chat("fake", user(f"{name}"), temperature=0.0, max_tokens=5, stage="s", phase="p")

        threads = []
        for i, u in enumerate(units):
            threads.append(threading.Thread(target=unit, args=u))
            threads[-1].start()
            while sem.waiting() < i + 1:  # queued one after the other
                threading.Event().wait(0.001)
        sem.release()
        for t in threads:
            t.join(30)
        sent = [r["body"]["messages"][-1]["content"] for r in srv.requests]
        assert sent == ["iterative", "iterative-later", "graph", "one-call", "naive"]

        assert slots.current_key() == (0, 1 << 62)  # outside a unit: behind every unit's call
        with slots.unit_priority(3, 7):
            assert slots.current_key() == (-3, 7)
            gw.chat("fake", user("iterative"), temperature=0.0, max_tokens=5, stage="s", phase="p")  # a cache hit
            assert slots.current_key() == (-2, 7)
            for _ in range(3):
                gw.chat("fake", user("naive"), temperature=0.0, max_tokens=5, stage="s", phase="p")
            assert slots.current_key() == (-1, 7)  # never below one call left
        assert len(srv.requests) == 5


@pytest.mark.parametrize("client", ["lean", "sdk"])
def test_both_http_clients_send_the_same_request_and_map_failures_alike(client, store, gateways):
    """gateway.http_client: the lean httpx2 POST (default) and the openai SDK's post send the
    same body, key and extra headers, and give the same reasons for 429 (Retry-After), 5xx,
    404 and a dead endpoint."""
    def cfg(srv_or_url, **kw):
        c = cfg_for({"fake": fake_backend(srv_or_url, **kw)} if not isinstance(srv_or_url, str) else
                    {"fake": {"kind": "openai", "base_url": srv_or_url, "model": "m", "timeout_s": 1, "retries": 1}})
        c.data["gateway"] = {"http_client": client}
        return c

    with FakeOpenAI(fault_plan=["rate_limit", None, "server_error", "server_error", "server_error", "server_error"],
                    retry_after_s=0.25) as srv:
        sleeps = Sleeps()
        gw = gateways(cfg(srv, headers={"X-Team": "ir"}), sleep=sleeps)
        assert gw._http_client == client
        r = gw.chat("fake", user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert r.text and r.attempts == 2 and sleeps.calls == [0.25]
        req = srv.requests[-1]
        assert req["body"]["messages"] == user("q") and req["body"]["max_tokens"] == 20
        assert req["headers"]["authorization"] == "Bearer test-key-value" and req["headers"]["x-team"] == "ir"
        with pytest.raises(GatewayError) as info:
            gw.chat("fake", user("q2"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert info.value.reason == "server_error" and info.value.attempts == 4
        wrong = gateways(cfg(srv, base_url=srv.base_url + "/nowhere"), sleep=Sleeps())
        with pytest.raises(GatewayError) as info:
            wrong.chat("fake", user("q3"), temperature=0.0, max_tokens=20, stage="s", phase="p")
        assert info.value.reason == "http_404" and info.value.attempts == 1
        port = srv.port
    down = gateways(cfg(f"http://127.0.0.1:{port}/v1"), sleep=Sleeps())
    with pytest.raises(GatewayError) as info:
        down.chat("fake", user("q"), temperature=0.0, max_tokens=20, stage="s", phase="p")
    assert info.value.reason == "connection_error" and info.value.attempts == 2
    bad = Config({"backends": {"x": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}},
                  "roles": {"generators": ["x"]}, "gateway": {"http_client": "curl"}}, source="test-config")
    with pytest.raises(GatewayError, match="gateway.http_client must be one of lean, sdk"):
        Gateway(bad, store)


class _ClosingHandler(BaseHTTPRequestHandler):
    """Answers each POST with keep-alive, then (``close_after``) drops the connection unannounced,
    as servers do with idle kept-alive connections."""

    protocol_version = "HTTP/1.1"
    close_after = True
    delay_s = 0.0
    connections: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        import time as _time

        self.rfile.read(int(self.headers["content-length"]))
        type(self).connections.append(self.client_address)
        if self.delay_s:
            _time.sleep(self.delay_s)
        body = json.dumps({"ok": len(type(self).connections)}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if self.close_after:
            self.close_connection = True

    def log_message(self, *args):
        pass


def _serve(handler):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_lean_poster_resends_once_on_a_kept_alive_connection_the_server_closed():
    """The server closes every connection after its reply without saying so (no
    ``Connection: close``): the next POST on that idle connection fails before any reply, and
    the poster sends it once more on a fresh connection — each reply arrives, on 3 connections."""
    from ragrouter.llm.http import LeanPoster

    handler = type("H", (_ClosingHandler,), {"connections": []})
    srv = _serve(handler)
    try:
        poster = LeanPoster(f"http://127.0.0.1:{srv.server_address[1]}/v1", timeout_s=5)
        assert not poster.proxied
        got = [poster.post("/chat/completions", {"n": i}, api_key="k", headers={}, timeout_s=5)["ok"]
               for i in range(3)]
        assert got == [1, 2, 3]
        assert len({port for _, port in handler.connections}) == 3
        poster.close()
    finally:
        srv.shutdown()


def test_lean_poster_maps_a_slow_reply_to_timeout_and_recovers_on_a_new_connection():
    from ragrouter.llm.backends import BackendError
    from ragrouter.llm.http import LeanPoster

    handler = type("H", (_ClosingHandler,), {"connections": [], "close_after": False, "delay_s": 0.5})
    srv = _serve(handler)
    try:
        poster = LeanPoster(f"http://127.0.0.1:{srv.server_address[1]}", timeout_s=5)
        with pytest.raises(BackendError) as info:
            poster.post("/x", {}, api_key="k", headers={}, timeout_s=0.1)
        assert info.value.reason == "timeout" and info.value.retryable
        assert poster.post("/x", {}, api_key="k", headers={}, timeout_s=5)["ok"] == 2
        poster.close()
    finally:
        srv.shutdown()


def test_lean_poster_goes_through_httpx_when_the_environment_names_a_proxy(monkeypatch):
    """HTTPS_PROXY / HTTP_PROXY apply (httpx2 honours them); NO_PROXY and loopback-free hosts
    are read as urllib reads them."""
    from ragrouter.llm.http import LeanPoster

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
                "all_proxy", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    assert not LeanPoster("https://api.example.com/v1", 5).proxied
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert LeanPoster("https://api.example.com/v1", 5).proxied
    assert not LeanPoster("http://api.example.com/v1", 5).proxied  # only https is proxied
    monkeypatch.setenv("NO_PROXY", "api.example.com")
    assert not LeanPoster("https://api.example.com/v1", 5).proxied


@pytest.mark.parametrize("url", ["ftp://host/v1", "127.0.0.1:8080/v1", "http:///v1"])
def test_a_base_url_that_is_not_http_is_a_config_error(url, store):
    """Refused when the config is loaded, before any gateway or unit exists (issue 31)."""
    from ragrouter.config import ConfigError

    with pytest.raises(ConfigError, match=r"backends\.x\.base_url"):
        cfg_for({"x": {"kind": "openai", "base_url": url, "model": "m"}})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_workers_asking_the_same_request_at_once_pay_for_it_once(pg_url, mode):
    """Two gateways on their own engines (two worker processes, as the claims see them) send the
    identical request at the same moment to a slow endpoint: one HTTP request, one paid ledger
    row, one cache hit — in async ledger mode too, where chat() returns before the row is
    committed (its claim was released then, and the other worker paid for the request again)."""
    engine = create_engine(pg_url)
    migrate.upgrade(engine)
    engines = [create_engine(pg_url) for _ in range(2)]
    try:
        with FakeOpenAI(latency_s=0.5) as srv:
            cfg = cfg_for({"fake": fake_backend(srv)})
            gws = [Gateway(cfg, e, worker_run_id=None, ledger_commit=mode, sleep=Sleeps()) for e in engines]
            start = threading.Barrier(2)

            def ask(gw):
                start.wait()
                return gw.chat("fake", user("the same question"), temperature=0.7, max_tokens=20, stage="querygen",
                               phase="factual")

            with ThreadPoolExecutor(2) as pool:
                results = list(pool.map(ask, gws))
            stats = [gw.stats() for gw in gws]
            for gw in gws:
                gw.close()
            chat_requests = srv.stats()["by_path"].get("/v1/chat/completions", 0)
        with engine.connect() as conn:
            rows = conn.execute(select(LLMCall.id, LLMCall.request_hash)).all()
        assert chat_requests == 1
        assert len(rows) == 1 and {r.call_id for r in results} == {rows[0][0]}
        assert sorted(r.cached for r in results) == [False, True]
        assert sum(s["http_requests"] for s in stats) == 1 and sum(s["cache_hits"] for s in stats) == 1
        assert sum(s["billed_tokens"] for s in stats) == results[0].prompt_tokens + results[0].completion_tokens
    finally:
        for e in engines + [engine]:
            e.dispose()
