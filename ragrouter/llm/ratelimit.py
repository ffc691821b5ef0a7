"""Per-backend request and token rate limits, shared by every thread of a worker process.

A backend with ``requests_per_minute`` and/or ``tokens_per_minute`` gets one
:class:`RateLimiter` per process (:func:`limiter_for`), so all gateways and threads of a
worker draw from the same budget. Before each HTTP attempt the gateway calls
:meth:`RateLimiter.acquire` with the request's *estimated* tokens (the prompt counted with
cl100k_base plus the completion budget ``max_tokens``: an upper bound of what the provider
counts); once the reply is in, :meth:`RateLimiter.settle` replaces the estimate by the tokens
the endpoint reported (``usage``), so the unused completion budget is given back.

The limit holds over **any sliding window** of 60 s (plus a 0.25 s margin): a sequence that
respects it also respects a token bucket of the same per-minute rate, whichever of the two the
provider implements. A request stays in the window from its admission until 60 s after its
reply came back (never less: the provider counted it somewhere in between, and the time a
client takes to put a request on the wire is unknown), so the effective window is 60 s plus
the latency. A single
request larger than the whole ``tokens_per_minute`` goes alone, once the window is empty.

A 429 with ``Retry-After`` pauses the whole backend (every thread) until then
(:meth:`RateLimiter.pause`); the gateway's backoff and retry then proceed as before.

The limiter does not smooth a burst inside the minute: with 60 requests/min and a fast
endpoint the first 60 requests may go in the first seconds. Providers that enforce a
per-minute limit in sub-minute slices answer that with 429s, which back off and retry.
"""

from __future__ import annotations

import collections
import threading
import time

WINDOW_S = 60.0
MARGIN_S = 0.25


class Ticket:
    """One admitted request: its place in the windows, for :meth:`RateLimiter.settle`."""

    __slots__ = ("entry",)

    def __init__(self, entry: list | None):
        self.entry = entry


class RateLimiter:
    """Sliding-window limits on requests and tokens per minute (see the module docstring)."""

    def __init__(self, name: str, requests_per_minute: int | None = None, tokens_per_minute: int | None = None, *,
                 window_s: float | None = None, margin_s: float | None = None, clock=time.monotonic):
        self.name = name
        self.rpm = int(requests_per_minute) if requests_per_minute else None
        self.tpm = int(tokens_per_minute) if tokens_per_minute else None
        self.window_s = float(WINDOW_S if window_s is None else window_s) + float(MARGIN_S if margin_s is None
                                                                                 else margin_s)
        self._clock = clock
        self._cond = threading.Condition()
        self._log: collections.deque[list] = collections.deque()  # [t, tokens, settled]
        self._tokens = 0
        self._blocked_until = 0.0
        self.waited_s = 0.0
        self.admitted = 0

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm)

    def _expire(self, now: float) -> None:
        # in admission order; an entry still in flight (or settled late) holds back the ones
        # behind it, which only keeps them counted a little longer
        while self._log and self._log[0][2] and self._log[0][0] <= now - self.window_s:
            self._tokens -= self._log.popleft()[1]

    def _until(self, entry: list, now: float) -> float:
        return (entry[0] if entry[2] else now) + self.window_s - now

    def _wait_needed(self, now: float, n: int) -> float:
        if now < self._blocked_until:
            return self._blocked_until - now
        if self.rpm and len(self._log) + 1 > self.rpm:
            return max(self._until(self._log[len(self._log) - self.rpm], now), 1e-3)
        if self.tpm and self._log and self._tokens + n > self.tpm:
            excess = self._tokens + n - self.tpm
            freed = 0
            for entry in self._log:
                freed += entry[1]
                if freed >= excess:
                    return max(self._until(entry, now), 1e-3)
            return max(self._until(self._log[-1], now), 1e-3)
        return 0.0

    def acquire(self, tokens: int = 0) -> Ticket:
        """Block until one request of ``tokens`` estimated tokens fits, then count it."""
        if not self.active:
            return Ticket(None)
        n = max(0, int(tokens)) if self.tpm else 0
        t0 = self._clock()
        with self._cond:
            while True:
                now = self._clock()
                self._expire(now)
                wait = self._wait_needed(now, n)
                if wait <= 0:
                    entry = [now, n, False]
                    self._log.append(entry)
                    self._tokens += n
                    self.admitted += 1
                    self.waited_s += now - t0
                    return Ticket(entry)
                self._cond.wait(min(wait, 5.0) + 1e-3)

    def settle(self, ticket: Ticket, actual_tokens: int | None = None) -> None:
        """The reply (or the failure) of an admitted request is in: its window time becomes now
        and its estimate is replaced by the tokens the endpoint reported (None: kept)."""
        if ticket.entry is None:
            return
        with self._cond:
            entry = ticket.entry
            entry[0], entry[2] = self._clock(), True
            if actual_tokens is not None and self.tpm:
                new = max(0, int(actual_tokens))
                self._tokens += new - entry[1]
                entry[1] = new
            self._cond.notify_all()

    def pause(self, seconds: float) -> None:
        """The provider said Retry-After: no request of this backend before then."""
        if seconds is None or seconds <= 0:
            return
        with self._cond:
            self._blocked_until = max(self._blocked_until, self._clock() + float(seconds))

    def snapshot(self) -> dict:
        with self._cond:
            self._expire(self._clock())
            return {"requests_in_window": len(self._log), "tokens_in_window": self._tokens,
                    "admitted": self.admitted, "waited_s": round(self.waited_s, 3)}


_LIMITERS: dict[tuple, RateLimiter] = {}
_LOCK = threading.Lock()


def limiter_for(name: str, base_url: str | None, model: str, requests_per_minute: int | None,
                tokens_per_minute: int | None) -> RateLimiter:
    """The process-wide limiter of one backend (same name, endpoint, model and limits)."""
    key = (name, base_url, model, requests_per_minute, tokens_per_minute, WINDOW_S, MARGIN_S)
    with _LOCK:
        lim = _LIMITERS.get(key)
        if lim is None:
            lim = _LIMITERS[key] = RateLimiter(name, requests_per_minute, tokens_per_minute)
        return lim
