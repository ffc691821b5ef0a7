"""queries.unanswerable (a question whose honest answer is a refusal)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

A question can be marked unanswerable at ingest (the ``unanswerable`` key of the jsonl and
ragrouter formats; loaders whose datasets mark it map it). For such a question a refusal is
the correct answer and any other answer a hallucination; its oracle label is
``unanswerable`` (v_oracle_label), apart from ``cannot_answer`` (answerable, but no
paradigm got it). NULL on rows written before this revision reads as false.

Additive only (DuckDB adds no column with a constraint to a table with indexes: nullable,
default false). DuckDB cannot drop a column of a table other tables reference (queries is
referenced by paradigm_runs and query_checks), so on DuckDB the downgrade leaves the column in
place (harmless: nothing before 0008 reads it) and the upgrade adds it only when it is missing.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _has_column() -> bool:
    return op.get_bind().execute(sa.text(
        "SELECT COUNT(*) FROM information_schema.columns "
        "WHERE table_name = 'queries' AND column_name = 'unanswerable'")).scalar() > 0


def upgrade() -> None:
    if not _has_column():
        op.add_column('queries', sa.Column('unanswerable', sa.Boolean(), server_default=sa.text('false'), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name != 'duckdb':
        op.drop_column('queries', 'unanswerable')
