"""human_labels (a reviewer's labels pulled back from MLflow)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

``review start`` logs a sample of judged runs (or generated queries) to an MLflow review
experiment as traces with the judge's verdict as an LLM-judge assessment; a reviewer records
their own label as human feedback; ``review pull`` stores it here, one row per (trace,
reviewer), keyed to the paradigm run or query (``ragrouter.review``).

Additive only (a new table, a Sequence for its key).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(sa.schema.CreateSequence(sa.Sequence('human_labels_id_seq')))
    op.create_table('human_labels',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('human_labels_id_seq')"), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('query_id', sa.Integer(), nullable=False),
    sa.Column('trace_id', sa.String(length=64), nullable=False),
    sa.Column('assessment_id', sa.String(length=64), nullable=False),
    sa.Column('experiment', sa.String(length=200), nullable=False),
    sa.Column('reviewer', sa.String(length=200), nullable=False),
    sa.Column('label', sa.String(length=20), nullable=False),
    sa.Column('comment', sa.Text(), nullable=True),
    sa.Column('judge', sa.String(length=200), nullable=True),
    sa.Column('judge_label', sa.String(length=20), nullable=True),
    sa.Column('labelled_at', sa.DateTime(), nullable=False),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_human_labels')),
    sa.UniqueConstraint('trace_id', 'reviewer', name=op.f('uq_human_labels_trace_id_reviewer'))
    )
    op.create_index(op.f('ix_human_labels_run_id'), 'human_labels', ['run_id'], unique=False)
    op.create_index(op.f('ix_human_labels_query_id'), 'human_labels', ['query_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_human_labels_query_id'), table_name='human_labels')
    op.drop_index(op.f('ix_human_labels_run_id'), table_name='human_labels')
    op.drop_table('human_labels')
    op.execute(sa.schema.DropSequence(sa.Sequence('human_labels_id_seq')))
