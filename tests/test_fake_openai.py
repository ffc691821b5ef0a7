"""Tests for the scripted fake OpenAI-compatible server, driven by the real ``openai`` client."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai
import pytest

from ragrouter.llm import tokens

try:
    from tests.fake_openai import FAULTS, FakeOpenAI, fake_embedding
except ModuleNotFoundError:  # pytest's rootdir-less import mode puts tests/ itself on sys.path
    from fake_openai import FAULTS, FakeOpenAI, fake_embedding

MESSAGES = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "What is the capital of France?"},
]


def client(srv: FakeOpenAI, **kw) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=srv.base_url, api_key="test-key", **kw)


def chat(c: openai.OpenAI, **kw):
    kw.setdefault("model", "fake-model")
    kw.setdefault("messages", MESSAGES)
    return c.chat.completions.create(**kw)


def test_normal_reply_and_usage():
    with FakeOpenAI() as srv:
        assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
        r = chat(client(srv))
        content = r.choices[0].message.content
        assert content == "echo: What is the capital of France?"
        assert r.choices[0].finish_reason == "stop"
        assert r.model == "fake-model"
        prompt = tokens.count("You answer briefly.") + tokens.count("What is the capital of France?")
        assert r.usage.prompt_tokens == prompt
        assert r.usage.completion_tokens == tokens.count(content)
        assert r.usage.total_tokens == prompt + tokens.count(content)
        assert srv.stats()["by_path"] == {"/v1/chat/completions": 1}
        assert srv.requests[0]["body"]["messages"] == MESSAGES


def test_custom_responder_and_omit_usage():
    seen = []

    def responder(req):
        seen.append(req)
        return {"answer": "Paris", "n": len(req["messages"])}

    with FakeOpenAI(responder=responder, omit_usage=True) as srv:
        r = chat(client(srv), temperature=0.3, response_format={"type": "json_object"})
        assert json.loads(r.choices[0].message.content) == {"answer": "Paris", "n": 2}
        assert r.usage is None
        assert seen[0]["temperature"] == 0.3
        assert seen[0]["response_format"] == {"type": "json_object"}


def test_json_modes_with_default_responder():
    schema = {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["correct", "incorrect", "incomplete"]},
            "reason": {"type": "string"},
            "sufficient": {"type": "boolean"},
            "score": {"type": "number"},
        },
        "required": ["label", "reason", "sufficient", "score"],
    }
    with FakeOpenAI() as srv:
        c = client(srv)
        r = chat(c, response_format={"type": "json_object"})
        assert json.loads(r.choices[0].message.content) == {"echo": "What is the capital of France?"}
        r = chat(c, response_format={"type": "json_schema", "json_schema": {"name": "judge", "schema": schema}})
        assert json.loads(r.choices[0].message.content) == {
            "label": "correct",
            "reason": "What is the capital of France?",
            "sufficient": False,
            "score": 0.0,
        }


def test_max_tokens_cuts_reply():
    long_text = " ".join(f"word{i}" for i in range(200))
    with FakeOpenAI(responder=lambda req: long_text) as srv:
        r = chat(client(srv), max_tokens=10)
        assert r.choices[0].finish_reason == "length"
        assert r.usage.completion_tokens == 10
        assert long_text.startswith(r.choices[0].message.content)


def test_rate_limit_fault():
    with FakeOpenAI(fault_rate=1.0, faults=["rate_limit"], retry_after_s=1.5) as srv:
        with pytest.raises(openai.RateLimitError) as info:
            chat(client(srv))
        assert info.value.status_code == 429
        assert info.value.response.headers["retry-after"] == "2"
        assert info.value.response.headers["retry-after-ms"] == "1500"
        assert srv.stats()["by_fault"] == {"rate_limit": 1}


def test_client_retries_after_planned_rate_limit():
    with FakeOpenAI(fault_plan=["rate_limit", "rate_limit"], retry_after_s=0.01) as srv:
        r = chat(client(srv, max_retries=2))
        assert r.choices[0].message.content.startswith("echo:")
        st = srv.stats()
        assert st["total"] == 3 and st["by_fault"] == {"rate_limit": 2}
        assert [q["fault"] for q in srv.requests] == ["rate_limit", "rate_limit", None]


def test_server_error_fault():
    with FakeOpenAI(fault_rate=1.0, faults=["server_error"]) as srv:
        with pytest.raises(openai.InternalServerError) as info:
            chat(client(srv))
        assert info.value.status_code == 500
        with pytest.raises(openai.InternalServerError):
            client(srv).embeddings.create(model="fake-embed", input="x")
        assert srv.stats()["by_fault"] == {"server_error": 2}


def test_timeout_fault():
    with FakeOpenAI(fault_rate=1.0, faults=["timeout"], timeout_fault_s=3.0) as srv:
        with pytest.raises(openai.APITimeoutError):
            chat(client(srv, timeout=0.3))
        assert srv.stats()["by_fault"] == {"timeout": 1}


def test_timeout_fault_still_replies_to_a_patient_client():
    with FakeOpenAI(fault_rate=1.0, faults=["timeout"], timeout_fault_s=0.2) as srv:
        r = chat(client(srv, timeout=5.0))
        assert r.choices[0].message.content == "echo: What is the capital of France?"


def test_malformed_json_fault_only_in_json_mode():
    with FakeOpenAI(fault_rate=1.0, faults=["malformed_json"]) as srv:
        c = client(srv)
        r = chat(c, response_format={"type": "json_object"})
        content = r.choices[0].message.content
        assert content
        with pytest.raises(json.JSONDecodeError):
            json.loads(content)
        # not applicable to a plain-text request: no fault there
        r = chat(c)
        assert r.choices[0].message.content == "echo: What is the capital of France?"
        assert srv.stats()["by_fault"] == {"malformed_json": 1}
        assert [q["fault"] for q in srv.requests] == ["malformed_json", None]


def test_empty_content_fault():
    with FakeOpenAI(fault_rate=1.0, faults=["empty_content"]) as srv:
        r = chat(client(srv))
        assert r.choices[0].message.content == ""
        assert r.usage.completion_tokens == 0
        assert srv.stats()["by_fault"] == {"empty_content": 1}


def test_fault_rate_is_seeded_and_roughly_right():
    def run(seed):
        with FakeOpenAI(fault_rate=0.3, faults=["server_error", "rate_limit"], seed=seed) as srv:
            c = client(srv)
            outcome = []
            for _ in range(120):
                try:
                    chat(c)
                    outcome.append("ok")
                except openai.RateLimitError:
                    outcome.append("rate_limit")
                except openai.InternalServerError:
                    outcome.append("server_error")
            return outcome, srv.stats()

    a, stats = run(seed=1)
    b, _ = run(seed=1)
    c, _ = run(seed=2)
    assert a == b
    assert a != c
    n_faults = sum(o != "ok" for o in a)
    assert 15 <= n_faults <= 60  # expected 36
    assert set(a) == {"ok", "rate_limit", "server_error"}
    assert stats["by_fault"] == {k: a.count(k) for k in ("rate_limit", "server_error")}
    assert stats["total"] == 120


def test_embeddings_are_deterministic_unit_vectors():
    with FakeOpenAI(embedding_dim=32) as srv:
        c = client(srv)
        r = c.embeddings.create(model="fake-embed", input=["alpha", "beta", "alpha"])  # base64 by default
        vecs = np.array([d.embedding for d in r.data], dtype=np.float32)
        assert vecs.shape == (3, 32)
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
        np.testing.assert_array_equal(vecs[0], vecs[2])
        assert not np.allclose(vecs[0], vecs[1])
        np.testing.assert_array_equal(vecs[0], fake_embedding("alpha", 32))
        assert r.usage.prompt_tokens == tokens.count("alpha") * 2 + tokens.count("beta")
        floats = c.embeddings.create(model="fake-embed", input="alpha", encoding_format="float")
        np.testing.assert_allclose(floats.data[0].embedding, vecs[0], atol=1e-7)
        wide = c.embeddings.create(model="fake-embed", input="alpha", dimensions=8)
        assert len(wide.data[0].embedding) == 8
        assert srv.stats()["by_path"] == {"/v1/embeddings": 3}


def test_models_and_bad_requests():
    with FakeOpenAI(models=["m1", "m2"]) as srv:
        assert [m.id for m in client(srv).models.list()] == ["m1", "m2"]
        r = httpx.post(srv.base_url + "/chat/completions", content=b"not json")
        assert r.status_code == 400 and "JSON object" in r.json()["error"]["message"]
        r = httpx.post(srv.base_url + "/chat/completions", json={"model": "m1", "messages": []})
        assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
        r = httpx.post(srv.base_url + "/nope", json={})
        assert r.status_code == 404
        r = httpx.post(srv.base_url + "/chat/completions", json={  # stream=true streams (test_serve.py)
            "model": "m1", "messages": [{"role": "user", "content": "x"}], "stream": "yes"})
        assert r.status_code == 400 and "stream" in r.json()["error"]["message"]
        assert srv.stats()["by_path"]["/v1/chat/completions"] == 3


def test_responder_error_is_a_500():
    def broken(req):
        raise KeyError("oops")

    with FakeOpenAI(responder=broken) as srv:
        with pytest.raises(openai.InternalServerError, match="responder raised KeyError"):
            chat(client(srv))
        assert srv.stats()["responder_errors"] == 1


def test_bad_settings():
    with pytest.raises(ValueError, match="unknown fault 'meltdown'"):
        FakeOpenAI(faults=["meltdown"])
    with pytest.raises(ValueError, match="fault_rate"):
        FakeOpenAI(fault_rate=1.5)
    assert set(FAULTS) == {"rate_limit", "server_error", "timeout", "malformed_json", "empty_content"}


def test_sixteen_concurrent_requests_overlap():
    with FakeOpenAI(latency_s=0.2) as srv:
        c = client(srv)
        chat(c)  # warm the connection pool code paths
        srv.reset()
        prompts = [f"question {i}" for i in range(16)]
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=16) as pool:
            replies = list(
                pool.map(
                    lambda p: chat(c, messages=[{"role": "user", "content": p}]).choices[0].message.content,
                    prompts,
                )
            )
        elapsed = time.monotonic() - start
        assert replies == [f"echo: {p}" for p in prompts]
        assert srv.stats()["total"] == 16
        assert srv.stats()["peak_in_flight"] >= 8  # requests were handled side by side
        assert elapsed < 2.0  # serialised would take 16 × 0.2 s = 3.2 s
