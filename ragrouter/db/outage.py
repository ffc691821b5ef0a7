"""Riding out a lost store connection (PostgreSQL restarted, the network gone a while).

Every place a worker talks to the store while units run — the ledger writer, the ledger
look-up before a request is sent, claims, leases, the batch writes of the stage runner — runs
its statement through :func:`retry`: on a lost connection it waits (0.2 s, doubling, at most
5 s) and tries again on a fresh connection (the engines ping before use), for up to
``worker.store_outage_s`` seconds (default 60) counted from the first failure of that
statement. If the store comes back, nothing was lost: the worker goes on, and the last
statement to get through says so in one line for the whole process. If it stays away,
:class:`StoreUnavailable` (one line, exit 2) ends the worker: once one statement has given
up, every other one of the process gives up at its next failure (until one gets through), so
the worker stops within a backoff step. The replies it had been paid for but could not commit
are in the spool (:mod:`ragrouter.llm.spool`) and are written to the ledger when the next
gateway on the store starts. No request is sent while the store is away: the look-up before
it waits (or gives up) first.

Every error of a server that is shutting down, restarting or gone counts: a session ended by
an administrator command (``pg_ctl stop``), a connection refused while it shuts down ("the
database system is shutting down") or once it is down, one refused while it starts or recovers,
a socket closed, reset or timed out. A worker that opens its store while it is away waits the
same way (:func:`retry` with ``wrapped=True`` looks through the one-line StoreError that
opening the store and reading its revision put in place of the driver's error).

A DuckDB file has no connection to lose: its errors are never retried here.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TypeVar

from ragrouter.db.engine import StoreError

T = TypeVar("T")

DEFAULT_LIMIT_S = 60.0
_BACKOFF_MAX_S = 5.0
# SQLSTATEs of a connection that went away or a server that is shutting down / starting up
_SQLSTATES = ("08", "57P01", "57P02", "57P03")
_WORDS = ("server closed the connection", "connection refused", "connection reset", "terminating connection",
          "could not connect", "connection is closed", "the database system is shutting down",
          "the database system is starting up", "consuming input failed", "connection timed out",
          "no connection to the server", "ssl connection has been closed", "connection failed",
          "the connection is lost", "the connection is closed", "the database system is not yet accepting",
          "the database system is in recovery mode", "the database system is not accepting connections",
          "broken pipe", "could not send data to server", "could not receive data from server",
          "lost synchronization with server", "connection timeout expired", "ssl syscall error",
          "server conn crashed")
# ... unless the server answered and refused for good: a database, role or password that is wrong
_REFUSALS = ("does not exist", "authentication failed", "no password supplied", "no pg_hba.conf entry",
             "permission denied")


class StoreUnavailable(StoreError):
    """The store stayed unreachable past ``worker.store_outage_s``: one line, exit 2."""


def is_disconnect(exc: BaseException, *, wrapped: bool = False) -> bool:
    """Whether ``exc`` says the store connection is gone (not: a bad statement, a constraint,
    a deadlock). PostgreSQL only: an error that comes from DuckDB anywhere in the chain is
    never an outage (a DuckDB file has no connection to lose; its lock, I/O and catalog errors
    are the user's to see at once). ``wrapped``: a StoreError raised ``from None`` in place of
    the driver's error (opening the store, reading its revision) is looked through."""
    if isinstance(exc, StoreUnavailable):  # a verdict already given, not a connection to wait for
        return False
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen and not isinstance(exc, StoreUnavailable):
        seen.add(id(exc))
        chain.append(exc)
        through = not exc.__suppress_context__ or (wrapped and isinstance(exc, StoreError))
        exc = exc.__cause__ or (exc.__context__ if through else None)
    if any(_from_duckdb(e) for e in chain):
        return False
    for exc in chain:
        orig = getattr(exc, "orig", None)
        if getattr(exc, "connection_invalidated", False) and (orig is None or _from_psycopg(orig)):
            return True
        inner = orig if orig is not None else exc
        code = getattr(inner, "sqlstate", None)
        if code and _from_psycopg(inner) and str(code).startswith(_SQLSTATES):
            return True
        if _from_psycopg(inner) and any(c.__name__ in ("OperationalError", "InterfaceError")
                                        for c in type(inner).__mro__):  # ConnectionTimeout too
            low = str(inner).lower()
            if (any(w in low for w in _WORDS) and not any(w in low for w in _REFUSALS)) or not low.strip():
                return True
    return False


def _from_psycopg(exc: BaseException) -> bool:
    return (type(exc).__module__ or "").startswith("psycopg")


def _from_duckdb(exc: BaseException) -> bool:
    for e in (exc, getattr(exc, "orig", None)):
        if e is not None and (type(e).__module__ or "").startswith(("duckdb", "_duckdb")):
            return True
    return False


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


class _State:
    """Process-wide: the current outage (from the first failed statement until no statement
    is waiting any more), so that the threads riding it out together say one line, and a
    verdict "the store is gone" that every other statement shares until one goes through."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.lost_at: float | None = None
        self.waiting = 0  # statements now retrying
        self.episodes = 0  # outages met by this process
        self.longest = 0.0
        self.gave_up = False  # a statement waited past the limit: the others stop waiting too ...
        self.gone_since: float | None = None  # ... since when the store has been away, for their line
        self.quiet = False  # ... and this outage ends without the "reconnected" line

    def enter(self) -> None:
        with self.lock:
            self.waiting += 1
            if self.lost_at is None:
                self.lost_at = time.monotonic()
                self.episodes += 1
                self.quiet = False

    def lasted(self) -> float:
        """Seconds since the store went away: the outage a statement gave up on (a later
        statement that fails while the verdict stands reports the same outage), else the
        current one (0 without one)."""
        since = self.gone_since if self.gave_up and self.gone_since is not None else self.lost_at
        return 0.0 if since is None else time.monotonic() - since

    def give_up(self) -> None:
        with self.lock:
            if not self.gave_up or self.gone_since is None:
                self.gone_since = self.lost_at if self.lost_at is not None else time.monotonic()
            self.gave_up = self.quiet = True

    def leave(self, ok: bool) -> None:
        """A statement stopped waiting (``ok``: it went through, so the store is back). The
        last one ends the outage and, when the store came back, says so in one line."""
        with self.lock:
            self.waiting -= 1
            if ok:
                self.gave_up, self.gone_since = False, None
            if self.waiting > 0 or self.lost_at is None:
                return
            waited = time.monotonic() - self.lost_at
            self.lost_at = None
            self.longest = max(self.longest, waited)
            say = ok and not self.quiet
        if say:
            print(f"warning: the store was unreachable for {waited:.1f} s; reconnected, nothing was lost",
                  file=sys.stderr, flush=True)


STATE = _State()


def retry(fn: Callable[[], T], what: str, limit_s: float | None = None, *,
          sleep: Callable[[float], None] = time.sleep, give_up: Callable[[], bool] | None = None,
          wrapped: bool = False) -> T:
    """``fn()``, tried again on a lost connection for up to ``limit_s`` seconds (see the module
    doc); StoreUnavailable once that has passed, at once when another statement of this
    process has already given up and none has gone through since, or when ``give_up()`` is
    true (a worker that is shutting down). ``wrapped``: see :func:`is_disconnect` (``fn``
    opens the store)."""
    limit = DEFAULT_LIMIT_S if limit_s is None else float(limit_s)
    started, delay, ok = None, 0.2, False
    try:
        while True:
            try:
                out = fn()
            except Exception as exc:  # noqa: BLE001 - only a lost connection is retried
                if not is_disconnect(exc, wrapped=wrapped):
                    raise
                now = time.monotonic()
                if started is None:
                    started = now
                    STATE.enter()
                waited = now - started
                if waited >= limit or STATE.gave_up or (give_up is not None and give_up()):
                    STATE.give_up()
                    waited = max(waited, STATE.lasted())
                    raise StoreUnavailable(f"the store stayed unreachable for {waited:.0f} s while {what} "
                                           f"({first_line(exc)})") from None
                sleep(min(delay, max(0.05, limit - waited)))
                delay = min(_BACKOFF_MAX_S, delay * 2)
                continue
            ok = True
            if STATE.gave_up:  # the store is back: the next outage is waited for again
                STATE.gave_up, STATE.gone_since = False, None
            return out
    finally:
        if started is not None:
            STATE.leave(ok)


def opening(fn: Callable[[], T], limit_s: float | None = None) -> T:
    """``fn()`` opening a worker's store: a store that is away (PostgreSQL shutting down,
    restarting) is waited for like a lost connection (:func:`retry`), after one line saying so
    — a mistyped host or port waits as long, and that line tells it at once."""
    limit = DEFAULT_LIMIT_S if limit_s is None else float(limit_s)
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - only a store that is away is waited for
        if not is_disconnect(exc, wrapped=True):
            raise
        print(f"warning: cannot reach the store ({first_line(exc)}); waiting up to {limit:.0f} s for it "
              "(worker.store_outage_s)", file=sys.stderr, flush=True)
    return retry(fn, "opening the store", limit, wrapped=True)


def limit_of(config) -> float:
    """``worker.store_outage_s`` of a config (DEFAULT_LIMIT_S without one)."""
    try:
        value = config.get("worker.store_outage_s", None) if config is not None else None
    except Exception:  # noqa: BLE001 - a config without the setting
        value = None
    return DEFAULT_LIMIT_S if value is None else float(value)
