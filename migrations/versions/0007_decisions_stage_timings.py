"""sequential decisions per cell and measured stage timings

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

* ``decision_cells``: the state of the anytime-valid paradigm comparison of each cell
  (corpus × query type × generator, one judge) that ``run --until-decided`` keeps after every
  batch: decided / equivalent / undecided, N, the bound (``ragrouter.decisions``).
* ``stage_timings``: wall seconds per stage and worker run, so ``run --dry-run`` estimates the
  time of stages that are not model calls from this store's own history.

Additive only (new tables, Sequences for the integer keys).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(sa.schema.CreateSequence(sa.Sequence('decision_cells_id_seq')))
    op.create_table('decision_cells',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('decision_cells_id_seq')"), nullable=False),
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('qtype', sa.String(length=20), nullable=False),
    sa.Column('generator', sa.String(length=200), nullable=False),
    sa.Column('judge', sa.String(length=200), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('winner', sa.String(length=50), nullable=True),
    sa.Column('n_queries', sa.Integer(), nullable=False),
    sa.Column('n_runs', sa.Integer(), nullable=False),
    sa.Column('bound', sa.Double(), nullable=True),
    sa.Column('alpha', sa.Double(), nullable=False),
    sa.Column('margin', sa.Double(), nullable=False),
    sa.Column('stop_reason', sa.Text(), nullable=True),
    sa.Column('detail', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('updated_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_decision_cells')),
    sa.UniqueConstraint('corpus_id', 'qtype', 'generator', 'judge',
                        name=op.f('uq_decision_cells_corpus_id_qtype_generator_judge'))
    )
    op.execute(sa.schema.CreateSequence(sa.Sequence('stage_timings_id_seq')))
    op.create_table('stage_timings',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('stage_timings_id_seq')"), nullable=False),
    sa.Column('worker_run_id', sa.Integer(), nullable=True),
    sa.Column('stage', sa.String(length=50), nullable=False),
    sa.Column('units', sa.Integer(), nullable=False),
    sa.Column('seconds', sa.Double(), nullable=False),
    sa.Column('model_calls', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_stage_timings'))
    )
    op.create_index(op.f('ix_stage_timings_stage'), 'stage_timings', ['stage'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_stage_timings_stage'), table_name='stage_timings')
    op.drop_table('stage_timings')
    op.execute(sa.schema.DropSequence(sa.Sequence('stage_timings_id_seq')))
    op.drop_table('decision_cells')
    op.execute(sa.schema.DropSequence(sa.Sequence('decision_cells_id_seq')))
