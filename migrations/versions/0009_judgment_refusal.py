"""judgments.refusal (the judged answer is a refusal)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

The judge stage decides refusals by rule, without a model call
(``ragrouter.evaluation.judge.rule_verdict``): on an answerable question a refusal is
incomplete, on a question marked unanswerable (0008) it is correct and any other answer is
incorrect, a hallucination. ``refusal`` records what the rule found, so the abstention figures
(refusal rate on unanswerable vs. answerable questions, ``v_abstention``) and
``v_run_judged.hallucination`` are read from the store, not re-derived from answer texts.
NULL on rows written before this revision (``v_judgment`` then reads the refusal reason).

Additive only (nullable, no default: DuckDB adds no constrained column to a table with indexes).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('judgments', sa.Column('refusal', sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column('judgments', 'refusal')
