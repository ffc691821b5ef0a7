"""Human labels into the store (``human_labels``), idempotently: one row per (trace, reviewer),
updated when the reviewer changed their label in MLflow, unchanged when pulled twice."""

from __future__ import annotations

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
