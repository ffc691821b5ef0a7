"""Work leases: many workers on one PostgreSQL store share a stage (docs/architecture.md §3).

Each worker registers the units it sees pending, then claims a few at a time with
``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT k) RETURNING``. A lease expires
after ``worker.lease_seconds``; a killed worker's units are then claimed by another. A unit
is completed only by its lease holder, in the same transaction as its result rows.
"""

from __future__ import annotations

import os
import socket
import uuid

from sqlalchemy import text
from sqlalchemy.engine import Connection


class LeaseManager:
    def __init__(self, engine, stage: str, lease_seconds: int) -> None:
        self.engine = engine
        self.stage = stage
        self.lease_seconds = int(lease_seconds)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.retaken = 0
        self.keys: list[str] = []

    def register(self, keys: list[str], ordered: bool = False) -> None:
        """Make sure every key has a lease row; failed units become claimable again.

        Units are claimed in registration order. ``ordered=True``: ``keys`` already come in a
        canonical order that every worker computes alike (a stage's scheduling order), which
        is kept; otherwise they are sorted. Either way every worker inserts in one order, so
        concurrent inserts wait and never deadlock."""
        keys = list(keys) if ordered else sorted(keys)
        self.keys = keys  # this worker claims and waits only for units of its own scope
        for i in range(0, len(keys), 1000):
            part = keys[i:i + 1000]
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
        """Lease up to ``limit`` units that are pending or whose lease expired."""
        with self.engine.begin() as conn:
            rows = conn.execute(text(
                "UPDATE work_leases SET state = 'leased', holder = :h, attempts = attempts + 1, "
                "leased_until = now() + make_interval(secs => :secs), updated_at = now() "
                "WHERE id IN (SELECT id FROM work_leases WHERE stage = :s AND unit_key = ANY(:keys) AND "
                "(state = 'pending' OR (state = 'leased' AND leased_until < now())) "
                "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT :k) RETURNING unit_key, attempts"),
                {"h": self.holder, "secs": self.lease_seconds, "s": self.stage, "k": int(limit),
                 "keys": self.keys}).all()
        self.retaken += sum(1 for r in rows if int(r[1]) > 1)
        return [r[0] for r in rows]

    def outstanding(self) -> int:
        """Units of the stage that other workers hold (unexpired) or that are still pending."""
        with self.engine.begin() as conn:
            return int(conn.execute(text(
                "SELECT COUNT(*) FROM work_leases WHERE stage = :s AND unit_key = ANY(:keys) AND "
                "(state = 'pending' OR (state = 'leased' AND holder <> :h))"),
                {"s": self.stage, "h": self.holder, "keys": self.keys}).scalar())

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
        with self.engine.begin() as conn:
            conn.execute(text("UPDATE work_leases SET state = 'pending', holder = NULL, leased_until = NULL "
                              "WHERE stage = :s AND holder = :h AND state = 'leased' AND unit_key = ANY(:keys)"),
                         {"s": self.stage, "h": self.holder, "keys": keys})
