"""Work leases: many workers on one PostgreSQL store share a stage (docs/explanation/architecture.md §3).

Each worker registers the units it sees pending, then claims a few at a time with
``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT k) RETURNING``. A lease expires
after ``worker.lease_seconds`` (a worker alive but stuck); a dead worker's units are claimed
by another at once (below). A unit is completed only by its lease holder, in the same
transaction as its result rows.

A worker known to be dead does not make the others wait for its leases: each worker holds a
session-level advisory lock on its holder name (``pg_advisory_lock(LIVE_CLASS,
hashtext(holder))``) for as long as it runs, on a connection of its own. PostgreSQL drops the
lock the moment that session ends — the process exited or was killed, the server restarted
(a machine that vanished from the network is noticed only when TCP keepalives fail; its
leases then expire as before) — and a lease whose holder's lock is gone is claimable at once,
expired or not. A worker that reconnects after an outage takes its lock again with its next
claim. Every statement waits out a lost connection (:mod:`ragrouter.db.outage`).
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import uuid

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ragrouter.db import outage

LIVE_CLASS = 0x52474C56  # 'RGLV': the two-int advisory locks saying "this holder is alive"
# The holders whose session holds its liveness lock (pg_locks shows a two-int advisory lock
# as classid = key 1, objid = key 2, objsubid = 2); read once per statement, not per row.
_LIVE_KEYS = ("(SELECT l.objid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted "
              f"AND l.classid = {LIVE_CLASS} AND l.objsubid = 2 AND l.database = "
              "(SELECT oid FROM pg_database WHERE datname = current_database()))")
_HOLDER_ALIVE = f"hashtext(work_leases.holder)::oid IN {_LIVE_KEYS}"


class LeaseManager:
    def __init__(self, engine, stage: str, lease_seconds: int) -> None:
        self.engine = engine
        self.stage = stage
        self.lease_seconds = int(lease_seconds)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.retaken = 0
        self.keys: list[str] = []
        self.outage_s = outage.DEFAULT_LIMIT_S
        self._live = None  # the connection whose session holds this holder's liveness lock
        self._live_lock = threading.Lock()
        self._said_wait = False

    def _retry(self, fn, what: str):
        return outage.retry(fn, f"{what} (stage {self.stage})", self.outage_s)

    def _hold_alive(self) -> None:
        """Make sure this holder's liveness lock is held (again, after a reconnect)."""
        with self._live_lock:
            if self._live is not None:
                try:
                    self._live.exec_driver_sql("SELECT 1").scalar()
                    return
                except Exception:  # noqa: BLE001 - a lost session: take the lock again below
                    try:
                        self._live.invalidate()
                    except Exception:  # noqa: BLE001
                        pass
                    self._live = None
            conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(text("SELECT pg_advisory_lock(:c, hashtext(:h))"), {"c": LIVE_CLASS, "h": self.holder})
            self._live = conn

    def close(self) -> None:
        """End this holder's session lock (its leases become claimable at once)."""
        with self._live_lock:
            conn, self._live = self._live, None
        if conn is None:
            return
        try:  # the connection goes back to the pool, its session (and a session lock) with it
            conn.execute(text("SELECT pg_advisory_unlock(:c, hashtext(:h))"), {"c": LIVE_CLASS, "h": self.holder})
            conn.close()
        except Exception:  # noqa: BLE001 - a lost session has dropped the lock anyway
            try:
                conn.invalidate()
            except Exception:  # noqa: BLE001
                pass

    def register(self, keys: list[str], ordered: bool = False) -> None:
        """Make sure every key has a lease row; failed units become claimable again.

        Units are claimed in registration order. ``ordered=True``: ``keys`` already come in a
        canonical order that every worker computes alike (a stage's scheduling order), which
        is kept; otherwise they are sorted. Either way every worker inserts in one order, so
        concurrent inserts wait and never deadlock."""
        keys = list(keys) if ordered else sorted(keys)
        self.keys = keys  # this worker claims and waits only for units of its own scope
        self._retry(self._hold_alive, "taking the worker's liveness lock")
        for i in range(0, len(keys), 1000):
            part = keys[i:i + 1000]
            self._retry(lambda: self._register_part(part), "registering units")

    def _register_part(self, part: list[str]) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO work_leases (stage, unit_key, state, attempts) "
                "SELECT :s, t.k, 'pending', 0 FROM unnest(CAST(:keys AS text[])) WITH ORDINALITY AS t(k, n) ORDER BY t.n "
                "ON CONFLICT (stage, unit_key) DO NOTHING"), {"s": self.stage, "keys": part})
        with self.engine.begin() as conn:
            conn.execute(text(
                "UPDATE work_leases SET state = 'pending', holder = NULL, updated_at = now() "
                "WHERE stage = :s AND state = 'failed' AND unit_key = ANY(:keys)"),
                {"s": self.stage, "keys": part})

    def claim(self, limit: int) -> list[str]:
        """Lease up to ``limit`` units that are pending, whose lease expired, or whose holder is
        dead (its liveness lock is gone)."""
        def once():
            self._hold_alive()
            with self.engine.begin() as conn:
                return conn.execute(text(
                    "UPDATE work_leases SET state = 'leased', holder = :h, attempts = attempts + 1, "
                    "leased_until = now() + make_interval(secs => :secs), updated_at = now() "
                    "WHERE id IN (SELECT id FROM work_leases WHERE stage = :s AND unit_key = ANY(:keys) AND "
                    "(state = 'pending' OR (state = 'leased' AND (leased_until < now() OR holder IS NULL "
                    f"OR NOT {_HOLDER_ALIVE}))) "
                    "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT :k) RETURNING unit_key, attempts"),
                    {"h": self.holder, "secs": self.lease_seconds, "s": self.stage, "k": int(limit),
                     "keys": self.keys}).all()

        rows = self._retry(once, "claiming units")
        self.retaken += sum(1 for r in rows if int(r[1]) > 1)
        return [r[0] for r in rows]

    def outstanding(self) -> int:
        """Units of the stage that other workers hold (unexpired) or that are still pending."""
        def once():
            with self.engine.begin() as conn:
                return int(conn.execute(text(
                    "SELECT COUNT(*) FROM work_leases WHERE stage = :s AND unit_key = ANY(:keys) AND "
                    "(state = 'pending' OR (state = 'leased' AND holder <> :h))"),
                    {"s": self.stage, "h": self.holder, "keys": self.keys}).scalar())

        return self._retry(once, "counting the units other workers hold")

    def waiting_for(self) -> tuple[int, list[str], dt.datetime | None]:
        """(units other live workers hold, their holders, when the last of those leases expires)."""
        def once():
            with self.engine.begin() as conn:  # seconds left, measured by the server (naive timestamps)
                return conn.execute(text(
                    "SELECT holder, COUNT(*), EXTRACT(EPOCH FROM MAX(leased_until) - LOCALTIMESTAMP) "
                    "FROM work_leases WHERE stage = :s AND unit_key = ANY(:keys) AND state = 'leased' "
                    f"AND holder <> :h AND {_HOLDER_ALIVE} AND leased_until >= LOCALTIMESTAMP "
                    "GROUP BY holder ORDER BY holder"),
                    {"s": self.stage, "h": self.holder, "keys": self.keys}).all()

        rows = self._retry(once, "reading other workers' leases")
        left = max((float(r[2]) for r in rows if r[2] is not None), default=None)
        until = None if left is None else dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=left)
        return sum(int(r[1]) for r in rows), [r[0] for r in rows], until

    def say_waiting(self, echo) -> None:
        """One line, once per stage: what this worker waits for, and until when at the latest
        (then the leases expire and it takes the units over)."""
        if self._said_wait:
            return
        n, holders, until = self.waiting_for()
        if not n:
            return
        self._said_wait = True
        when = until.strftime("%H:%M:%S UTC") if until is not None else "?"
        echo(f"waiting for {n} unit(s) of stage {self.stage} leased by {len(holders)} other live worker(s) "
             f"({', '.join(holders[:3])}{', ...' if len(holders) > 3 else ''}) until {when} at the latest")

    def complete(self, conn: Connection, key: str, failed: bool = False) -> bool:
        """Mark a unit done (or failed) — only if this worker still holds its lease."""
        row = conn.execute(text(
            "UPDATE work_leases SET state = :state, leased_until = NULL, updated_at = now() "
            "WHERE stage = :s AND unit_key = :k AND holder = :h AND state = 'leased' RETURNING id"),
            {"state": "failed" if failed else "done", "s": self.stage, "k": key, "h": self.holder}).first()
        return row is not None

    def complete_many(self, conn: Connection, done: list[str], failed: list[str] = ()) -> set[str]:
        """Mark units done / failed in one statement each; the keys this worker still held
        (the others' leases expired and another worker took them over)."""
        held: set[str] = set()
        for state, keys in (("done", list(done)), ("failed", list(failed))):
            if keys:
                held.update(r[0] for r in conn.execute(text(
                    "UPDATE work_leases SET state = :state, leased_until = NULL, updated_at = now() "
                    "WHERE stage = :s AND unit_key = ANY(:keys) AND holder = :h AND state = 'leased' "
                    "RETURNING unit_key"),
                    {"state": state, "s": self.stage, "keys": keys, "h": self.holder}).all())
        return held

    def release(self, keys: list[str]) -> None:
        """Give back leases not worked on (e.g. on Ctrl-C)."""
        if not keys:
            return
        try:  # no waiting: a store that is away cannot be told, and our lock's end frees them anyway
            with self.engine.begin() as conn:
                conn.execute(text("UPDATE work_leases SET state = 'pending', holder = NULL, leased_until = NULL "
                                  "WHERE stage = :s AND holder = :h AND state = 'leased' AND unit_key = ANY(:keys)"),
                             {"s": self.stage, "h": self.holder, "keys": keys})
        except Exception as exc:  # noqa: BLE001 - only a lost connection is let go
            if not outage.is_disconnect(exc):
                raise
