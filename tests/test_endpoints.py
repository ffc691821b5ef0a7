"""Provider presets and rate limits against the scripted fake server, which rejects what each
real provider rejects (``FakeOpenAI(provider=...)``)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from ragrouter.llm import ratelimit, tokens
from ragrouter.llm.backends import PRESETS, GatewayError, apply_preset
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
    spec = apply_preset("x", {"preset": "ollama", "extra_body": {"options": {"temperature_unused": 1}},
                              "structured_output": "none"})
    assert spec["extra_body"] == {"options": {"num_ctx": 12288, "temperature_unused": 1}}
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
        assert body["max_completion_tokens"] == 50 and "max_tokens" not in body and "temperature" not in body
        assert body["response_format"]["type"] == "json_schema"
        with pytest.raises(GatewayError) as err:  # a plain backend on a reasoning model
            judge(gw_for(srv, model="o3-mini"), temperature=0.3)
        assert err.value.reason == "http_400" and "max_completion_tokens" in str(err.value)
        with pytest.raises(GatewayError, match="reject top_p"):
            gw_for(srv, preset="openai-reasoning", model="o4-mini", top_p=0.5).backend("b")


def test_ollama_preset_sets_the_context_so_long_prompts_are_not_cut(store, gw_for):
    prompt = " ".join(f"word{i}" for i in range(2500))
    full = tokens.count(prompt) + tokens.count("Answer briefly.")
    assert full > 2048
    with FakeOpenAI(provider="ollama") as srv:
        cut = gw_for(srv, model="llama3.1:8b").chat("b", user(prompt), temperature=0.3, max_tokens=20,
                                                    stage="t", phase="gen")
        assert cut.prompt_tokens == 2048  # what Ollama does without num_ctx: silent truncation
        whole = gw_for(srv, model="llama3.1:8b-b", preset="ollama").chat(
            "b", user(prompt), temperature=0.3, max_tokens=20, stage="t", phase="gen")
        assert srv.requests[-1]["body"]["options"] == {"num_ctx": 12288}
        assert whole.prompt_tokens == full


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
