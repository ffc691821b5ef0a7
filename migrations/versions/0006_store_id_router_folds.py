"""store id and per-fold router metrics

Revision ID: 0006
Revises: 0001
Create Date: 2026-12-01

* ``store_info``: one row, the store's id (a uuid4 made when this migration runs), so MLflow
  runs can say which store they were trained on and ``ask`` / ``routers compare`` use only
  this store's routers.
* ``router_fold_metrics``: every metric of every CV fold of every router run, computed once
  in Python (``ragrouter.routers.evaluate``) and logged to MLflow as the same numbers;
  ``v_router_scores`` aggregates them (fold mean ± std).

Additive only (new tables, a Sequence for the integer key).
"""

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('store_info',
    sa.Column('store_id', sa.String(length=36), nullable=False),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('store_id', name=op.f('pk_store_info'))
    )
    op.execute(sa.text("INSERT INTO store_info (store_id) VALUES (:sid)").bindparams(sid=str(uuid.uuid4())))
    op.execute(sa.schema.CreateSequence(sa.Sequence('router_fold_metrics_id_seq')))
    op.create_table('router_fold_metrics',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('router_fold_metrics_id_seq')"), nullable=False),
    sa.Column('router', sa.String(length=50), nullable=False),
    sa.Column('features', sa.String(length=10), nullable=False),
    sa.Column('encoder', sa.String(length=200), nullable=False),
    sa.Column('generator', sa.String(length=200), nullable=False),
    sa.Column('dataset', sa.String(length=200), nullable=False),
    sa.Column('fold', sa.Integer(), nullable=False),
    sa.Column('judge', sa.String(length=200), nullable=True),
    sa.Column('n_train', sa.Integer(), nullable=False),
    sa.Column('n_test', sa.Integer(), nullable=False),
    sa.Column('fallback', sa.String(length=50), nullable=True),
    sa.Column('routing_accuracy', sa.Double(), nullable=True),
    sa.Column('macro_f1', sa.Double(), nullable=True),
    sa.Column('mrr', sa.Double(), nullable=True),
    sa.Column('correct_rate', sa.Double(), nullable=True),
    sa.Column('avg_tokens', sa.Double(), nullable=True),
    sa.Column('abstain_rate', sa.Double(), nullable=True),
    sa.Column('lambda_swept', sa.Boolean(), nullable=False),
    sa.Column('aiq', sa.Double(), nullable=True),
    sa.Column('mlflow_run_id', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_router_fold_metrics')),
    sa.UniqueConstraint('router', 'features', 'encoder', 'generator', 'dataset', 'fold',
                        name=op.f('uq_router_fold_metrics_router_features_encoder_generator_dataset_fold'))
    )


def downgrade() -> None:
    op.drop_table('router_fold_metrics')
    op.execute(sa.schema.DropSequence(sa.Sequence('router_fold_metrics_id_seq')))
    op.drop_table('store_info')
