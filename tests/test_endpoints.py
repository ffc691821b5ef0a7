"""Provider presets and rate limits against the scripted fake server, which rejects what each
real provider rejects (``FakeOpenAI(provider=...)``).

What each provider accepts and ignores, as its documentation says (the fake encodes exactly this):

| provider | source | accepts | ignores / rejects |
|---|---|---|---|
| OpenAI chat | API reference, Chat Completions | ``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``response_format`` json_schema / json_object (the latter needs "json" in a message) | unknown arguments: 400 "Unrecognized request argument" |
| OpenAI reasoning (o1/o3/o4/gpt-5) | reasoning guide | ``max_completion_tokens`` (reasoning + visible reply; "reserve at least 25,000 tokens"), ``reasoning_effort`` | ``max_tokens``, ``top_p``, any ``temperature`` but 1: 400; a spent allowance: empty reply, ``finish_reason: length``, ``completion_tokens_details.reasoning_tokens`` |
| DeepSeek | API docs, JSON output | ``response_format`` json_object (needs "json" in the prompt) | json_schema: 400 |
| Ollama ``/v1`` | OpenAI compatibility page; issues #2677, #5356, #16814 | the OpenAI request | ``options`` (num_ctx): ignored; a prompt past the server's context is cut from the front, silently |
| Ollama ``/api/chat`` | API docs, Generate a chat completion | ``options.num_ctx``, ``options.num_predict``, ``format`` (a schema or "json"), ``stream: false`` | — |
| vLLM | OpenAI-compatible server docs | extra sampling arguments (``top_k``, ``min_p`` …) | prompt + ``max_tokens`` over ``--max-model-len``: 400 |
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from ragrouter.llm import ratelimit, tokens
from ragrouter.llm.backends import GatewayError
from ragrouter.llm.presets import PRESETS, apply_preset
from ragrouter.llm.gateway import Gateway

try:
    from tests.fake_openai import FakeOpenAI
    from tests.test_gateway import JUDGE_SCHEMA, KEY_ENV, Sleeps, cfg_for, fake_backend, user
except ModuleNotFoundError:  # rootdir-less import mode
    from fake_openai import FakeOpenAI
    from test_gateway import JUDGE_SCHEMA, KEY_ENV, Sleeps, cfg_for, fake_backend, user


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-key-value")


@pytest.fixture
def gw_for(store):
    made: list[Gateway] = []

    def make(srv, **spec) -> Gateway:
        gw = Gateway(cfg_for({"b": fake_backend(srv, **spec)}), store, sleep=Sleeps())
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.close()


def judge(gw, msg="Is Paris in France?", temperature=0.1, max_tokens=50):
    return gw.chat("b", user(msg), temperature=temperature, max_tokens=max_tokens, json_schema=JUDGE_SCHEMA,
                   stage="t", phase="judge")


def label_responder(req):
    return {"label": "correct", "reason": "ok"}


def test_presets_fill_defaults_and_explicit_keys_win():
    spec = apply_preset("x", {"preset": "ollama", "extra_body": {"options": {"repeat_penalty": 1.1}},
                              "structured_output": "none", "num_ctx": 16384})
    assert spec["chat_api"] == "ollama" and spec["num_ctx"] == 16384
    assert spec["extra_body"] == {"options": {"repeat_penalty": 1.1}}
    assert spec["structured_output"] == "none"
    assert apply_preset("x", {"preset": "deepseek"})["structured_output"] == "json_object"
    assert set(PRESETS) >= {"openai", "openai-reasoning", "deepseek", "ollama", "vllm"}
    with pytest.raises(GatewayError, match="preset must be one of"):
        apply_preset("x", {"preset": "nope"})


def test_deepseek_preset_sends_json_object_with_the_word_json(store, gw_for):
    with FakeOpenAI(responder=label_responder, provider="deepseek") as srv:
        ok = judge(gw_for(srv, preset="deepseek", model="deepseek-chat"))
        assert ok.data == {"label": "correct", "reason": "ok"}
        body = srv.requests[-1]["body"]
        assert body["response_format"] == {"type": "json_object"}
        assert "json" in " ".join(m["content"] for m in body["messages"]).lower()
        # the shipped default before this preset (json_schema) is what DeepSeek rejects
        with pytest.raises(GatewayError) as err:
            judge(gw_for(srv, model="deepseek-chat-2", structured_output="json_schema"))
        assert err.value.reason == "http_400" and "unavailable" in str(err.value)


def test_openai_rejects_json_object_without_the_word_json():
    import openai

    with FakeOpenAI(provider="openai") as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="must contain the word 'json'"):
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                           response_format={"type": "json_object"})
        r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi, JSON"}],
                                           response_format={"type": "json_object"})
        assert r.choices[0].message.content


def test_openai_reasoning_preset_uses_max_completion_tokens_and_no_temperature(store, gw_for):
    with FakeOpenAI(responder=label_responder, provider="openai") as srv:
        ok = judge(gw_for(srv, preset="openai-reasoning", model="o4-mini"), temperature=0.3)
        body = srv.requests[-1]["body"]
        assert ok.data["label"] == "correct"
        assert body["max_completion_tokens"] == 50 + 25000 and "max_tokens" not in body and "temperature" not in body
        assert body["response_format"]["type"] == "json_schema"
        with pytest.raises(GatewayError) as err:  # a plain backend on a reasoning model
            judge(gw_for(srv, model="o3-mini"), temperature=0.3)
        assert err.value.reason == "http_400" and "max_completion_tokens" in str(err.value)
        with pytest.raises(GatewayError, match="reject top_p"):
            gw_for(srv, preset="openai-reasoning", model="o4-mini", top_p=0.5).backend("b")


def test_ollama_preset_serves_a_long_prompt_whole_through_the_native_api(store, gw_for):
    """A prompt past 4k tokens: the OpenAI endpoint (options ignored, as real Ollama does) cuts it
    to the server's context, which the gateway now refuses as a cut prompt; the preset's native
    /api/chat with num_ctx serves it whole; a prompt past num_ctx is refused before sending."""
    prompt = " ".join(f"word{i}" for i in range(4200))
    full = tokens.count(prompt) + tokens.count("Answer briefly.")
    assert full > 4096
    with FakeOpenAI(provider="ollama", ollama_default_ctx=4096) as srv:
        plain = gw_for(srv, model="llama3.1:8b", extra_body={"options": {"num_ctx": 12288}})
        with pytest.raises(GatewayError) as err:  # options on /v1: ignored, the prompt is cut
            plain.chat("b", user(prompt), temperature=0.3, max_tokens=20, stage="t", phase="gen")
        assert err.value.reason == "prompt_truncated" and "cut the prompt" in str(err.value)
        # a backend whose model's tokenizer is denser than cl100k can turn the check off
        lax = gw_for(srv, model="llama3.1:8b-lax", cut_prompt_share=0).chat(
            "b", user(prompt), temperature=0.3, max_tokens=20, stage="t", phase="gen")
        assert lax.prompt_tokens == 4096  # answered, from what the server kept
        assert srv.requests[-1]["path"] == "/v1/chat/completions"
        whole = gw_for(srv, model="llama3.1:8b-b", preset="ollama").chat(
            "b", user(prompt), temperature=0.3, max_tokens=20, stage="t", phase="gen")
        req = srv.requests[-1]
        assert req["path"] == "/api/chat" and req["body"]["options"]["num_ctx"] == 12288
        assert req["body"]["options"]["num_predict"] == 20 and req["body"]["stream"] is False
        assert whole.prompt_tokens == full and whole.text
        n = len(srv.requests)
        with pytest.raises(GatewayError) as err:
            gw_for(srv, model="llama3.1:8b-d", preset="ollama", num_ctx=2048).chat(
                "b", user(prompt), temperature=0.3, max_tokens=20, stage="t", phase="gen")
        assert err.value.reason == "prompt_too_long" and len(srv.requests) == n  # nothing was sent
    with FakeOpenAI(provider="ollama", responder=label_responder) as srv:  # structured output: native format
        ok = judge(gw_for(srv, model="llama3.1:8b-c", preset="ollama"))
        assert srv.requests[-1]["body"]["format"]["type"] == "object" and ok.data["label"] == "correct"


def test_a_reasoning_reply_that_spends_its_allowance_fails_once_and_reasoning_tokens_are_read(store, gw_for):
    with FakeOpenAI(responder=label_responder, provider="openai", reasoning_tokens=600) as srv:
        # the allowance on top of the visible cap: max_completion_tokens = 50 + 1000
        gw_ok = gw_for(srv, preset="openai-reasoning", model="o4-mini", reasoning_allowance=1000)
        ok = judge(gw_ok)
        assert srv.requests[-1]["body"]["max_completion_tokens"] == 1050 and ok.data["label"] == "correct"
        assert ok.completion_tokens > 600  # the hidden reasoning is billed with the reply
        # an allowance the reasoning spends whole: an empty reply, finish_reason length
        before = len(srv.requests)
        gw_spent = gw_for(srv, preset="openai-reasoning", model="o4-mini-b", reasoning_allowance=100, retries=3)
        with pytest.raises(GatewayError) as err:
            judge(gw_spent)
        assert err.value.reason == "reasoning_exhausted" and "finish_reason length" in str(err.value)
        assert len(srv.requests) - before <= 2  # at most one retry, not one per attempt at the same budget
    # reasoning_tokens land in the ledger: the good reply's row, and the spent allowance's failure row
    # (billed: 50 + 100 = 150 completion tokens, all of them reasoning)
    gw_ok.flush(), gw_spent.flush()
    with store.connect() as conn:
        call = conn.execute(text("SELECT completion_tokens, reasoning_tokens FROM llm_calls WHERE model = 'o4-mini'")).one()
        fail = conn.execute(text("SELECT completion_tokens, reasoning_tokens, error FROM llm_failures "
                                 "WHERE model = 'o4-mini-b'")).one()
        by_stage = conn.execute(text("SELECT completion_tokens, reasoning_tokens, total_tokens, prompt_tokens "
                                     "FROM v_tokens_by_stage WHERE model = 'o4-mini-b'")).one()
    assert call[1] == 600 and call[0] == 600 + tokens.count('{"label": "correct", "reason": "ok"}')
    assert fail[0] == 150 and fail[1] == 150 and fail[2].startswith("reasoning_exhausted")
    # completion_tokens already holds the reasoning: the totals do not add it twice
    assert by_stage[1] == 150 and by_stage[2] == by_stage[3] + by_stage[0]
    from ragrouter.llm.backends import OpenAIBackend

    be = OpenAIBackend("b", {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "o4-mini",
                             "preset": "openai-reasoning"})
    assert be.reasoning_allowance == 25000  # OpenAI's guidance by default
    reply = be._parse_chat({"choices": [{"message": {"content": ""}, "finish_reason": "length"}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 300,
                                      "completion_tokens_details": {"reasoning_tokens": 300}}})
    assert reply.reasoning_tokens == 300


def test_vllm_preset_extra_body_seed_top_p_and_headers(store, gw_for, monkeypatch):
    monkeypatch.setenv("RAGROUTER_TEST_ORG_TOKEN", "org-secret-4711")
    spec = dict(preset="vllm", model="meta-llama/Llama-3.1-8B-Instruct", extra_body={"top_k": 20}, seed=7, top_p=0.9,
                headers={"X-Org": "lab", "X-Org-Token": "$RAGROUTER_TEST_ORG_TOKEN"})
    with FakeOpenAI(responder=label_responder, provider="vllm") as srv:
        gw = gw_for(srv, **spec)
        first = judge(gw)
        req = srv.requests[-1]
        assert {k: req["body"][k] for k in ("top_k", "seed", "top_p")} == {"top_k": 20, "seed": 7, "top_p": 0.9}
        assert req["body"]["response_format"]["type"] == "json_schema"
        assert req["headers"]["x-org"] == "lab" and req["headers"]["x-org-token"] == "org-secret-4711"
        assert judge(gw).cached and srv.stats()["total"] == 1
        # the settings are in the cache key: another seed is another request
        other = judge(gw_for(srv, **{**spec, "seed": 8}))
        assert not other.cached and other.request_hash != first.request_hash
        # vLLM rejects a request longer than its context
        with pytest.raises(GatewayError, match="maximum context length"):
            gw.chat("b", user("hello"), temperature=0.1, max_tokens=40000, stage="t", phase="gen")
    with FakeOpenAI(responder=label_responder, provider="openai") as srv:  # OpenAI rejects vLLM's top_k
        with pytest.raises(GatewayError, match="Unrecognized request argument supplied: top_k"):
            judge(gw_for(srv, **{**spec, "model": "gpt-4o-mini"}))
    with store.connect() as conn:
        stored = " ".join(str(r) for r in conn.execute(text("SELECT * FROM llm_calls")).all())
    assert "org-secret-4711" not in stored


def test_a_header_from_an_unset_variable_is_a_clear_error(store, gw_for):
    with FakeOpenAI() as srv:
        with pytest.raises(GatewayError, match="RAGROUTER_TEST_UNSET_VAR"):
            judge(gw_for(srv, headers={"X-T": "$RAGROUTER_TEST_UNSET_VAR"}))
        assert srv.stats()["total"] == 0


@pytest.fixture
def short_window(monkeypatch):
    monkeypatch.setattr(ratelimit, "WINDOW_S", 2.0)
    monkeypatch.setattr(ratelimit, "MARGIN_S", 0.1)


def _burst(gw, n, prefix):
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda i: gw.chat("b", user(f"{prefix} {i}"), temperature=0.1, max_tokens=10,
                                               stage="t", phase="gen"), range(n)))


def test_the_fake_enforces_limits_and_the_configured_limiter_gets_no_429(store, gw_for, short_window):
    with FakeOpenAI(requests_per_minute=5, rate_window_s=2.0) as srv:
        unlimited = gw_for(srv, model="m1", retries=0, concurrency=8)
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(lambda i: _try(unlimited, f"u {i}"), range(10)))
        assert srv.stats()["rate_limited"] >= 5 and outcomes.count("rate_limited") >= 5
        time.sleep(2.1)
        srv.reset()
        t0 = time.monotonic()
        replies = _burst(gw_for(srv, model="m2", requests_per_minute=5, concurrency=8), 12, "limited")
        took = time.monotonic() - t0
    assert len(replies) == 12 and srv.stats()["rate_limited"] == 0
    assert took >= 4.0  # 12 requests at 5 per 2.1 s need two refills


def test_tokens_per_minute_counts_the_estimate_and_settles_on_usage(store, gw_for, short_window):
    # each request: ~6 prompt tokens + a short echo reply; estimate = prompt + max_tokens (10)
    with FakeOpenAI(tokens_per_minute=120, rate_window_s=2.0) as srv:
        gw = gw_for(srv, model="m3", tokens_per_minute=120, concurrency=8)
        replies = _burst(gw, 16, "tok")
        lim = gw.backend("b").limiter()
        charged = sum(k for _, k in srv.admitted_log)
    assert srv.stats()["rate_limited"] == 0 and len(replies) == 16
    assert charged == sum(r.prompt_tokens + r.completion_tokens for r in replies)
    assert lim.admitted == 16 and lim.snapshot()["tokens_in_window"] <= 120


def test_retry_after_pauses_the_backend_and_the_429_is_retried(store, gw_for, short_window):
    with FakeOpenAI(fault_plan=["rate_limit"], retry_after_s=0.3) as srv:
        gw = gw_for(srv, model="m4", requests_per_minute=1000)
        r = gw.chat("b", user("x"), temperature=0.1, max_tokens=5, stage="t", phase="gen")
        assert r.attempts == 2 and gw.stats()["rate_limited"] == 1
        lim = gw.backend("b").limiter()
        assert lim._blocked_until > 0


def _try(gw, msg):
    try:
        gw.chat("b", user(msg), temperature=0.1, max_tokens=10, stage="t", phase="gen")
        return "ok"
    except GatewayError as exc:
        return exc.reason
