"""What the model layer says back: errors, replies, secret redaction and the shared TLS context.

Kept apart from the backends so that the HTTP poster (:mod:`ragrouter.llm.http`) and every
backend kind use them without importing each other.
"""

from __future__ import annotations

import email.utils
import functools
import re
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

DUMMY_KEY = "EMPTY"


class GatewayError(RuntimeError):
    """The one exception a gateway call raises. ``reason`` is a short machine-readable code
    (``rate_limited``, ``server_error``, ``timeout``, ``connection_error``, ``http_4xx``,
    ``empty_content``, ``unparseable_json``, ``schema_mismatch``, ``missing_api_key``,
    ``config``, ``bad_request``, ``backend_unavailable``, ``bad_response``, ``client_error``,
    ``ledger_write_failed``); the message says what happened, naming the backend."""

    def __init__(self, reason: str, message: str, *, backend: str | None = None, attempts: int = 0,
                 request_hash: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.backend = backend
        self.attempts = attempts
        self.request_hash = request_hash


class BackendError(Exception):
    """One failed attempt (internal): ``retryable`` says whether the gateway may try again;
    ``retry_after_s`` is the server's Retry-After hint, when it gave one; ``reply`` is the reply
    that arrived but is unusable (its tokens were billed and go to the failure row)."""

    def __init__(self, reason: str, detail: str, *, retryable: bool, status: int | None = None,
                 retry_after_s: float | None = None, reply: "ChatReply | None" = None):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s
        self.reply = reply

    def billed(self) -> dict:
        """The failure row's token columns: what the unusable reply reported (empty: no reply)."""
        r = self.reply
        if r is None:
            return {}
        return {"prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                "reasoning_tokens": r.reasoning_tokens, "response": r.text}


_BEARER = re.compile(r"(?i)\bbearer\s+[^\s'\",}]+")
_KEYVAL = re.compile(r"(?i)\b(authorization|api[-_]?key|x-api-key)(['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")


def redact(text: str | None, secrets: Sequence[str] = ()) -> str | None:
    """``text`` with secret values, bearer tokens, Authorization/api-key headers and
    ``sk-…`` keys replaced by ``***``."""
    if not text:
        return text
    for secret in secrets:
        if secret and len(secret) >= 4 and secret != DUMMY_KEY:
            text = text.replace(secret, "***")
    text = _BEARER.sub("Bearer ***", text)
    text = _KEYVAL.sub(lambda m: m.group(1) + m.group(2) + "***", text)
    return _SK.sub("sk-***", text)


@dataclass
class ChatReply:
    """What one successful chat attempt returned (tokens None when the endpoint gave no usage)."""

    text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None = None
    refusal: str | None = None
    cached_prompt_tokens: int | None = None
    """Prompt tokens the provider served from its own prompt cache (billed at the
    ``cached_input`` price): OpenAI's ``prompt_tokens_details.cached_tokens`` or DeepSeek's
    ``prompt_cache_hit_tokens``."""
    reasoning_tokens: int | None = None
    """Hidden reasoning tokens of a reasoning model (``completion_tokens_details.reasoning_tokens``),
    part of ``completion_tokens`` and billed with it (OpenAI counts them in ``completion_tokens``:
    never add them again)."""


@dataclass
class EmbedReply:
    """Vectors (float32, n × dim, not yet normalised) and the input tokens when reported."""

    vectors: np.ndarray
    prompt_tokens: int | None


def retry_after(headers) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@functools.lru_cache(maxsize=1)
def ssl_context():
    """One TLS context for every HTTP client of the process, made as ``httpx2`` makes its
    default one (certifi's bundle, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured). Building it
    costs ~55 ms of CPU; each client built its own, and a backend builds up to
    ``concurrency`` clients (64 of them: 3.5 s of CPU, issue 17)."""
    import httpx2

    return httpx2.create_ssl_context()
