"""judgments.raw_label: the judge model's own verdict beside the (possibly gated) label

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-01

The evidence gate (``judge.gate``) may turn a "correct" verdict into "incorrect"; the label
the figures use is ``label``, the model's reply is kept in ``raw_label`` (NULL on rows
written before this revision). Additive only.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('judgments', sa.Column('raw_label', sa.String(length=20), nullable=True))


def downgrade() -> None:
    op.drop_column('judgments', 'raw_label')
