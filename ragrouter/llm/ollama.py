"""Ollama's native chat API, where the context size takes effect.

Ollama's OpenAI-compatible ``/v1/chat/completions`` serves a model at the server's context
length (``OLLAMA_CONTEXT_LENGTH``, else the model's 2–4k default); its documentation gives the
per-request context only through the native API's ``options.num_ctx``, and its issues (#2677,
#5356, #16814) report ``options`` ignored on the OpenAI endpoint. A prompt past the context is
cut from the front *without an error*. So a backend with ``chat_api: ollama`` (the ``ollama``
preset) sends chat to ``POST <root>/api/chat`` (the root is ``base_url`` without its ``/v1``)
with ``options: {num_ctx, num_predict, temperature, seed, top_p}``, ``stream: false`` and
``format`` (a JSON schema, or ``"json"``), and refuses — before anything is sent — a prompt
whose counted tokens plus the reply's cap exceed ``num_ctx``. Embeddings stay on the
OpenAI-compatible ``/v1/embeddings``, which Ollama serves as documented.

Reply: ``message.content``; ``prompt_eval_count`` and ``eval_count`` are the prompt and reply
tokens (Ollama may report fewer prompt tokens when it reused its cache, so the cut-prompt
check of the OpenAI path is not applied here: the context was set for the whole prompt);
``done_reason`` is the finish reason (``stop`` / ``length``).
"""

from __future__ import annotations

from typing import Any

from ragrouter.llm.errors import BackendError, ChatReply

DEFAULT_NUM_CTX = 12288  # the paper's 8,000-token context budget plus the prompt and reply around it


def root_url(base_url: str) -> str:
    """``http://host:11434/v1`` → ``http://host:11434`` (the native API's root)."""
    url = str(base_url).rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def chat_body(model: str, messages: list[dict], *, temperature: float | None, max_tokens: int,
              response_format: dict | None, num_ctx: int, seed: int | None = None, top_p: float | None = None,
              extra: dict | None = None, stop: list[str] | None = None) -> dict:
    options: dict[str, Any] = {"num_ctx": int(num_ctx), "num_predict": int(max_tokens)}
    if stop:
        options["stop"] = list(stop)
    if temperature is not None:
        options["temperature"] = temperature
    if seed is not None:
        options["seed"] = seed
    if top_p is not None:
        options["top_p"] = float(top_p)
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": False}
    extra = dict(extra or {})
    if isinstance(extra.get("options"), dict):
        options = {**options, **extra.pop("options")}
    body["options"] = options
    if response_format is not None:
        kind = response_format.get("type")
        if kind == "json_schema":
            body["format"] = (response_format.get("json_schema") or {}).get("schema") or "json"
        elif kind == "json_object":
            body["format"] = "json"
    body.update(extra)
    return body


def parse_reply(body: dict) -> ChatReply:
    message = body.get("message")
    if not isinstance(message, dict):
        raise BackendError("bad_response", "Ollama reply has no 'message'", retryable=True)
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = str(content)

    def count(key):
        v = body.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    return ChatReply(text=content, prompt_tokens=count("prompt_eval_count"), completion_tokens=count("eval_count"),
                     finish_reason=body.get("done_reason") or ("stop" if body.get("done") else None))
