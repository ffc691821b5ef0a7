"""llm_calls.reasoning_tokens, llm_failures.reasoning_tokens (a reasoning model's hidden tokens)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03

A reasoning model (OpenAI o1/o3/o4/gpt-5, DeepSeek's reasoner) spends hidden reasoning tokens
before its visible reply and reports them as ``usage.completion_tokens_details.reasoning_tokens``.
They are stored per ledger row, next to ``completion_tokens``, which already includes them (OpenAI
bills them as output tokens and counts them in ``completion_tokens``): costs price
``completion_tokens`` and never add ``reasoning_tokens`` on top. A failure row keeps them too: a
reply that spent its whole allowance (``reasoning_exhausted``) was paid. NULL when the endpoint
reported none (a model that does not reason, a local server, rows written before this revision).

Additive only (nullable, no default: DuckDB adds no constrained column to a table with indexes).
DuckDB cannot drop a column of a table with indexes either: there the downgrade keeps the columns
(NULL-able, unused by older code) and a later upgrade finds them in place.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


TABLES = ('llm_calls', 'llm_failures')


def _has_column(table: str) -> bool:
    return op.get_bind().execute(sa.text(
        "SELECT COUNT(*) FROM information_schema.columns "
        "WHERE table_name = :t AND column_name = 'reasoning_tokens'"), {"t": table}).scalar() > 0


def upgrade() -> None:
    for table in TABLES:
        if not _has_column(table):
            op.add_column(table, sa.Column('reasoning_tokens', sa.Integer(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name != 'duckdb':
        for table in reversed(TABLES):
            op.drop_column(table, 'reasoning_tokens')
