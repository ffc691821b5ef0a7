"""Human labels into the store (``human_labels``), idempotently: one row per (trace, reviewer),
updated when the reviewer changed their label in MLflow, unchanged when pulled twice. A label
of a run or query this store does not hold (the review experiment outlived a rebuilt store,
or a trace's tag was edited) is not stored: :func:`known` sets it aside with a warning."""

from __future__ import annotations

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine

from ragrouter.db import models
from ragrouter.db.engine import write_lock
from ragrouter.review.traces import HumanAssessment

UPDATED = ("assessment_id", "label", "comment", "judge", "judge_label", "labelled_at", "experiment")


def save(engine: Engine, experiment: str, labels: list[HumanAssessment]) -> int:
    """Upsert ``labels`` (pulled from ``experiment``); returns how many rows were written."""
    if not labels:
        return 0
    rows = [{"kind": h.kind, "run_id": h.run_id, "query_id": h.query_id, "trace_id": h.trace_id,
             "assessment_id": h.assessment_id, "experiment": experiment, "reviewer": h.reviewer, "label": h.label,
             "comment": h.comment, "judge": h.judge, "judge_label": h.judge_label, "labelled_at": h.labelled_at}
            for h in labels]
    stmt = insert(models.HumanLabel.__table__).values(rows)
    stmt = stmt.on_conflict_do_update(index_elements=["trace_id", "reviewer"],
                                      set_={c: stmt.excluded[c] for c in UPDATED})
    with write_lock(engine), engine.begin() as conn:
        conn.execute(stmt)
    return len(rows)


def _present(engine: Engine, table: str, ids: set[int]) -> set[int]:
    if not ids:
        return set()
    stmt = text(f"SELECT id FROM {table} WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))
    with engine.connect() as conn:
        return {int(r[0]) for r in conn.execute(stmt, {"ids": sorted(ids)})}


def known(engine: Engine, labels: list[HumanAssessment]) -> tuple[list[HumanAssessment], list[str]]:
    """(the labels whose run — or, for a query label, query — is in the store, one warning
    line per other label naming its trace, reviewer and the missing id)."""
    runs = _present(engine, "paradigm_runs", {h.run_id for h in labels if h.kind == "run"})
    queries = _present(engine, "queries", {h.query_id for h in labels if h.kind == "query"})
    kept, warnings = [], []
    for h in labels:
        if (h.run_id in runs) if h.kind == "run" else (h.query_id in queries):
            kept.append(h)
            continue
        what = f"run {h.run_id}" if h.kind == "run" else f"query {h.query_id}"
        warnings.append(f"warning: trace {h.trace_id}: {what} is not in this store; the label of reviewer "
                        f"{h.reviewer or '(unnamed)'} skipped")
    return kept, warnings
