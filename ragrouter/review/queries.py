"""A reviewer's verdict on generated queries decides whether they are in the benchmark.

After ``review pull`` stores the labels (``human_labels`` kind 'query'), each reviewed generated
query whose checks are in (accepted or rejected) gets the reviewers' verdict — each reviewer's
latest label, accepted when more reviewers accepted it than not (a tie rejects; the same rule as
``v_generated_query.human_status``). Where the verdict differs from the checks' status the query
takes it — a query the checks rejected and a person accepted enters the benchmark (the answer
stages see it as pending work), one the checks accepted and a person rejected leaves it — with
``origin = 'human-reviewed'``, the checks' status kept in ``meta.checks_status`` and the
reviewers in ``meta.reviewed_by``. Where a later pull finds the verdict back in line with the
checks, the query returns to ``origin = 'generated'`` and the checks' status. Table 6 keeps
counting the checks' verdicts from ``query_checks``, beside the reviewers'.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import text, update
from sqlalchemy.engine import Engine

from ragrouter.db import models
from ragrouter.db.engine import write_lock
from ragrouter.db.values import json_value
from ragrouter.querygen.generate import QUERY_ORIGIN as GENERATED_ORIGIN
from ragrouter.querygen.generate import REVIEWED_ORIGIN


@dataclass
class Applied:
    entered: list[int]  # rejected by the checks, accepted by the reviewer: now in the benchmark
    left: list[int]  # accepted by the checks, rejected by the reviewer: now out of it
    restored: list[int]  # the reviewer's verdict is back in line with the checks


def verdicts(conn) -> dict[int, tuple[str, list[str]]]:
    """{query id: (the reviewers' verdict, reviewers)} of every reviewed query."""
    latest: dict[tuple[int, str], tuple] = {}
    for qid, reviewer, label, at, hid in conn.execute(text(
            "SELECT query_id, reviewer, label, labelled_at, id FROM human_labels WHERE kind = 'query'")):
        key = (int(qid), reviewer)
        if key not in latest or (at, hid) > latest[key][1:]:
            latest[key] = (label, at, hid)
    votes: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for (qid, reviewer), (label, _, _) in latest.items():
        votes[qid].append((reviewer, label))
    return {q: ("accepted" if 2 * sum(lab == "accepted" for _, lab in v) > len(v) else "rejected",
                sorted(r for r, _ in v)) for q, v in votes.items()}


def _set(conn, qid: int, origin: str, status: str, meta: dict) -> None:
    q = models.Query.__table__
    conn.execute(update(q).where(q.c.id == qid).values(origin=origin, status=status, meta=meta))


def apply(engine: Engine) -> Applied:
    """Bring every reviewed generated query's status and origin in line with its reviewers (see
    the module docstring); returns what changed."""
    out = Applied([], [], [])
    with write_lock(engine), engine.begin() as conn:
        found = verdicts(conn)
        if not found:
            return out
        ids = ",".join(str(q) for q in sorted(found))
        rows = conn.execute(text(
            f"SELECT id, origin, status, meta FROM queries WHERE id IN ({ids}) AND origin IN (:g, :h)"),
            {"g": GENERATED_ORIGIN, "h": REVIEWED_ORIGIN}).all()
        for qid, origin, status, meta in rows:
            meta = json_value(meta) or {}
            checks = meta.get("checks_status", status) if origin == REVIEWED_ORIGIN else status
            if checks not in ("accepted", "rejected"):
                continue  # the checks are not in yet: nothing to outrank
            verdict, reviewers = found[int(qid)]
            if verdict != checks:
                new = {**meta, "checks_status": checks, "reviewed_by": reviewers}
                if (origin, status, meta) == (REVIEWED_ORIGIN, verdict, new):
                    continue
                _set(conn, int(qid), REVIEWED_ORIGIN, verdict, new)
                if (origin, status) != (REVIEWED_ORIGIN, verdict):
                    (out.entered if verdict == "accepted" else out.left).append(int(qid))
            elif origin == REVIEWED_ORIGIN:
                new = {k: v for k, v in meta.items() if k not in ("checks_status", "reviewed_by")}
                _set(conn, int(qid), GENERATED_ORIGIN, checks, new)
                out.restored.append(int(qid))
    return out
