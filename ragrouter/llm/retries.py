"""The gateway's retry loop: one request's attempts, under its backend's slots and rate limit.

Up to ``retries`` (default 3) more attempts on HTTP 429, 5xx, timeouts, connection errors
and malformed HTTP bodies (a :class:`~ragrouter.llm.errors.BackendError` that is
``retryable``), sleeping ``uniform(0, min(cap, base·2^i))`` (full jitter, base 0.5 s, cap
20 s) or the server's ``Retry-After``/``retry-after-ms`` capped at ``cap``. Other 4xx fail at
once. Each attempt holds one of the backend's request slots (:mod:`ragrouter.llm.slots`) and,
when the backend has a limit, a ticket of its rate limiter (:mod:`ragrouter.llm.ratelimit`);
a 429 pauses the limiter. The sleep function and the RNG are the gateway's (injectable for
tests); recording the failure is the gateway's too.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Callable

from ragrouter.llm.errors import BackendError, redact
from ragrouter.llm.messages import reply_tokens

log = logging.getLogger("ragrouter.llm.gateway")

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0


def backoff_delay(i: int, retry_after: float | None, *, base_s: float, cap_s: float, rng: random.Random) -> float:
    """The sleep before retry ``i`` (0-based): the server's wish capped at ``cap_s``, else full jitter."""
    if retry_after is not None:
        return min(cap_s, max(0.0, retry_after))
    return rng.uniform(0.0, min(cap_s, base_s * (2 ** i)))


def attempt_with_retries(be, fn: Callable[[float], Any], timeout: float, *, slot, bump: Callable[..., None],
                         backoff: Callable[[int, float | None], float], sleep: Callable[[float], None],
                         estimate: Callable[[], int] | None = None):
    """Run ``fn(timeout)`` with retries: (reply, attempts, latency of the good one, None), or
    (None, attempts, 0.0, the last BackendError) when every attempt failed.

    ``slot`` is the backend's request slots, ``bump(counter)`` counts http_requests /
    encoder_requests, rate_limited and retries, ``backoff(i, retry_after)`` gives the sleep;
    ``estimate()`` gives the request's token estimate for the backend's tokens-per-minute
    limit (called only when the backend has one)."""
    if hasattr(be, "api_key"):
        be.api_key()  # clear error naming the variable when a required key is unset
    limiter = be.limiter() if be.http else None
    if limiter is not None and not limiter.active:
        limiter = None
    est = estimate() if (limiter is not None and limiter.tpm and estimate is not None) else 0
    last: BackendError | None = None
    attempts = 0
    for i in range(be.retries + 1):
        attempts += 1
        with slot:
            ticket = limiter.acquire(est) if limiter is not None else None
            bump("http_requests" if be.http else "encoder_requests")
            t0 = time.perf_counter()
            try:
                reply = fn(timeout)
            except BackendError as exc:
                last = exc
                if limiter is not None:
                    limiter.settle(ticket)
                    if exc.status == 429:
                        bump("rate_limited")
                        limiter.pause(exc.retry_after_s)
            except BaseException:
                if limiter is not None:
                    limiter.settle(ticket)
                raise
            else:
                if limiter is not None:
                    limiter.settle(ticket, reply_tokens(reply))
                return reply, attempts, time.perf_counter() - t0, None
        if not last.retryable or i == be.retries:
            break
        delay = backoff(i, last.retry_after_s)
        bump("retries")
        log.info("backend %s: attempt %d/%d failed (%s); retrying in %.2f s", be.name, attempts,
                 be.retries + 1, redact(last.detail, be.secrets()), delay)
        sleep(delay)
    assert last is not None
    return None, attempts, 0.0, last
