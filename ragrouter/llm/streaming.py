"""A generation's tokens passed on as the model makes them (``serve`` with ``stream: true``).

The caller (serve's request thread) opens :func:`streaming` with a :class:`Sink`; while it is
open, a plain-text chat call of an OpenAI-compatible backend on the lean HTTP path (no
``response_format``, ``chat_api: openai``) asks its endpoint for server-sent events
(``stream: true`` with ``stream_options.include_usage``, as OpenAI documents them), hands each
content delta to the sink, and assembles the events into the reply body the non-streaming
call would have had (content, finish reason, usage). So the gateway sees one reply as always:
its ledger row, cache entry, retries, rate limits and token counts are unchanged. The sink
lives in a context variable, so only calls made by that thread (and its copies of the
context) stream.

A retried attempt streams again from its start; the sink forwards only what extends the text
it already forwarded (a deterministic retry repeats it), never the same text twice.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterable

_SINK: contextvars.ContextVar["Sink | None"] = contextvars.ContextVar("ragrouter_stream_sink", default=None)


class Sink:
    """Receives a streamed generation's text: ``push(piece)`` for each new piece."""

    def __init__(self, push: Callable[[str], None]):
        self.push = push
        self.text = ""  # what was forwarded (leading whitespace dropped, as the paradigms strip it)
        self._attempt = ""
        self.attempts = 0

    def begin(self) -> None:
        """A new attempt starts streaming."""
        self._attempt = ""
        self.attempts += 1

    def delta(self, piece: str) -> None:
        self._attempt += piece
        cand = self._attempt.lstrip()
        if len(cand) > len(self.text) and cand.startswith(self.text):
            new, self.text = cand[len(self.text):], cand
            self.push(new)


@contextlib.contextmanager
def streaming(sink: Sink):
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)


def active() -> Sink | None:
    return _SINK.get()


def request(body: dict) -> dict:
    """The chat request body asking for server-sent events with the usage at the end."""
    return {**body, "stream": True, "stream_options": {"include_usage": True}}


def assemble(lines: Iterable[bytes], sink: Sink) -> bytes:
    """Read an SSE reply (``data: {chunk}`` lines, ``data: [DONE]``), pass each content delta to
    ``sink`` and return the JSON body of the equivalent non-streaming ``chat.completion``."""
    sink.begin()
    parts: list[str] = []
    finish, usage, model, refusal = None, None, None, None
    for raw in lines:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line.startswith("data:"):
            continue  # blank separators, comments (': keep-alive'), event names
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        if not isinstance(chunk, dict):
            continue
        model = chunk.get("model", model)
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            piece = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(piece, str) and piece:
                parts.append(piece)
                sink.delta(piece)
            if isinstance(delta, dict) and delta.get("refusal"):
                refusal = (refusal or "") + str(delta["refusal"])
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    body = {"object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(parts), "refusal": refusal},
                         "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode("utf-8")
