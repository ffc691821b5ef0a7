"""judgments.raw_label (the judge model's own verdict) and worker_runs.config (the config a run used)

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-01

The evidence gate (``judge.gate``) may turn a "correct" verdict into "incorrect"; the label
the figures use is ``label``, the model's reply is kept in ``raw_label`` (NULL on rows
written before this revision). ``worker_runs.config`` is the merged configuration a worker
process ran stages with (no secrets: the config names environment variables, never keys),
and ``worker_runs.stages`` the stages it ran units of, so ``status`` and ``report`` can say what the store's runs expect without their --config.
Additive only.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0003'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('judgments', sa.Column('raw_label', sa.String(length=20), nullable=True))
    op.add_column('worker_runs', sa.Column('config', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True))
    op.add_column('worker_runs', sa.Column('stages', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True))


def downgrade() -> None:
    op.drop_column('worker_runs', 'stages')
    op.drop_column('worker_runs', 'config')
    op.drop_column('judgments', 'raw_label')
