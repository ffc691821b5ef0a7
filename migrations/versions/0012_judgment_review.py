"""judgments.review (why a rule left the verdict to a person)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07

The judge's figures rule abstains where it cannot compare a figure with confidence (a unit no
library reads, a numeric date that reads day-first and month-first, a fiscal against a calendar
quarter, zones without a fixed offset): it leaves the model's verdict and says why
(``ragrouter.evaluation.precision.judge_figures``). ``review`` stores that reason, so that the
report's judge line counts the abstentions and ``review start`` draws those runs first. NULL
when no rule abstained (and on rows written before this revision).

Additive only (nullable, no default: DuckDB adds no constrained column to a table with indexes).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0012'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('judgments', sa.Column('review', sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column('judgments', 'review')
