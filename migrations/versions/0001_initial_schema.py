"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-29

Keep migrations additive (DuckDB allows only ADD COLUMN on tables with dependants) and give
every integer key a Sequence (create it before its table, drop it after).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


SEQUENCES = ['corpora_id_seq', 'llm_calls_id_seq', 'llm_failures_id_seq', 'router_predictions_id_seq', 'unit_failures_id_seq', 'vectors_id_seq', 'work_leases_id_seq', 'worker_runs_id_seq', 'corpus_metrics_id_seq', 'documents_id_seq', 'entities_id_seq', 'queries_id_seq', 'chunks_id_seq', 'paradigm_runs_id_seq', 'query_checks_id_seq', 'answer_scores_id_seq', 'chunk_extractions_id_seq', 'judgments_id_seq', 'run_calls_id_seq', 'triples_id_seq']

# Foreign keys exist on PostgreSQL only: DuckDB refuses to update rows that others
# reference, which idempotent upserts do.
FOREIGN_KEYS = [('fk_corpus_metrics_corpus_id_corpora', 'corpus_metrics', 'corpora', 'corpus_id'), ('fk_documents_corpus_id_corpora', 'documents', 'corpora', 'corpus_id'), ('fk_entities_corpus_id_corpora', 'entities', 'corpora', 'corpus_id'), ('fk_queries_corpus_id_corpora', 'queries', 'corpora', 'corpus_id'), ('fk_chunks_corpus_id_corpora', 'chunks', 'corpora', 'corpus_id'), ('fk_chunks_document_id_documents', 'chunks', 'documents', 'document_id'), ('fk_paradigm_runs_query_id_queries', 'paradigm_runs', 'queries', 'query_id'), ('fk_query_checks_query_id_queries', 'query_checks', 'queries', 'query_id'), ('fk_answer_scores_run_id_paradigm_runs', 'answer_scores', 'paradigm_runs', 'run_id'), ('fk_chunk_extractions_chunk_id_chunks', 'chunk_extractions', 'chunks', 'chunk_id'), ('fk_judgments_run_id_paradigm_runs', 'judgments', 'paradigm_runs', 'run_id'), ('fk_run_calls_llm_call_id_llm_calls', 'run_calls', 'llm_calls', 'llm_call_id'), ('fk_run_calls_run_id_paradigm_runs', 'run_calls', 'paradigm_runs', 'run_id'), ('fk_triples_object_id_entities', 'triples', 'entities', 'object_id'), ('fk_triples_chunk_id_chunks', 'triples', 'chunks', 'chunk_id'), ('fk_triples_subject_id_entities', 'triples', 'entities', 'subject_id')]


def upgrade() -> None:
    for name in SEQUENCES:
        op.execute(sa.schema.CreateSequence(sa.Sequence(name)))
    op.create_table('corpora',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('corpora_id_seq')"), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('source_format', sa.String(length=50), nullable=True),
    sa.Column('meta', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_corpora')),
    sa.UniqueConstraint('name', name=op.f('uq_corpora_name'))
    )
    op.create_table('llm_calls',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('llm_calls_id_seq')"), nullable=False),
    sa.Column('request_hash', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('backend', sa.String(length=100), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('stage', sa.String(length=50), nullable=True),
    sa.Column('phase', sa.String(length=50), nullable=True),
    sa.Column('messages', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('params', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('response', sa.Text(), nullable=True),
    sa.Column('response_json', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('response_vectors', sa.LargeBinary(), nullable=True),
    sa.Column('prompt_tokens', sa.Integer(), nullable=False),
    sa.Column('completion_tokens', sa.Integer(), nullable=False),
    sa.Column('token_source', sa.String(length=20), nullable=False),
    sa.Column('latency_s', sa.Double(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('worker_run_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_llm_calls')),
    sa.UniqueConstraint('request_hash', name=op.f('uq_llm_calls_request_hash'))
    )
    op.create_index(op.f('ix_llm_calls_stage_model'), 'llm_calls', ['stage', 'model'], unique=False)
    op.create_table('llm_failures',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('llm_failures_id_seq')"), nullable=False),
    sa.Column('request_hash', sa.String(length=64), nullable=False),
    sa.Column('backend', sa.String(length=100), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('stage', sa.String(length=50), nullable=True),
    sa.Column('phase', sa.String(length=50), nullable=True),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('response', sa.Text(), nullable=True),
    sa.Column('prompt_tokens', sa.Integer(), nullable=True),
    sa.Column('completion_tokens', sa.Integer(), nullable=True),
    sa.Column('worker_run_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_llm_failures'))
    )
    op.create_index(op.f('ix_llm_failures_request_hash'), 'llm_failures', ['request_hash'], unique=False)
    op.create_table('router_predictions',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('router_predictions_id_seq')"), nullable=False),
    sa.Column('router', sa.String(length=50), nullable=False),
    sa.Column('features', sa.String(length=10), nullable=False),
    sa.Column('encoder', sa.String(length=200), nullable=False),
    sa.Column('generator', sa.String(length=200), nullable=False),
    sa.Column('dataset', sa.String(length=200), nullable=False),
    sa.Column('fold', sa.Integer(), nullable=False),
    sa.Column('query_key', sa.String(length=300), nullable=False),
    sa.Column('query_id', sa.Integer(), nullable=True),
    sa.Column('predicted', sa.String(length=50), nullable=False),
    sa.Column('true_label', sa.String(length=50), nullable=False),
    sa.Column('probabilities', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('mlflow_run_id', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_router_predictions')),
    sa.UniqueConstraint('router', 'features', 'encoder', 'generator', 'dataset', 'fold', 'query_key', name=op.f('uq_router_predictions_router_features_encoder_generator_dataset_fold_query_key'))
    )
    op.create_index(op.f('ix_router_predictions_router_features'), 'router_predictions', ['router', 'features'], unique=False)
    op.create_table('unit_failures',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('unit_failures_id_seq')"), nullable=False),
    sa.Column('stage', sa.String(length=50), nullable=False),
    sa.Column('unit_key', sa.String(length=500), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_unit_failures')),
    sa.UniqueConstraint('stage', 'unit_key', name=op.f('uq_unit_failures_stage_unit_key'))
    )
    op.create_table('vectors',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('vectors_id_seq')"), nullable=False),
    sa.Column('owner_kind', sa.String(length=20), nullable=False),
    sa.Column('owner_id', sa.Integer(), nullable=False),
    sa.Column('embedder', sa.String(length=200), nullable=False),
    sa.Column('dim', sa.Integer(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_vectors')),
    sa.UniqueConstraint('owner_kind', 'owner_id', 'embedder', name=op.f('uq_vectors_owner_kind_owner_id_embedder'))
    )
    op.create_table('work_leases',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('work_leases_id_seq')"), nullable=False),
    sa.Column('stage', sa.String(length=50), nullable=False),
    sa.Column('unit_key', sa.String(length=500), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('holder', sa.String(length=200), nullable=True),
    sa.Column('leased_until', sa.DateTime(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_work_leases')),
    sa.UniqueConstraint('stage', 'unit_key', name=op.f('uq_work_leases_stage_unit_key'))
    )
    op.create_index(op.f('ix_work_leases_stage_state_leased_until'), 'work_leases', ['stage', 'state', 'leased_until'], unique=False)
    op.create_table('worker_runs',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('worker_runs_id_seq')"), nullable=False),
    sa.Column('host', sa.String(length=200), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('command', sa.Text(), nullable=False),
    sa.Column('started_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_worker_runs'))
    )
    op.create_table('corpus_metrics',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('corpus_metrics_id_seq')"), nullable=False),
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('metric', sa.String(length=100), nullable=False),
    sa.Column('variant', sa.String(length=300), nullable=False),
    sa.Column('value', sa.Double(), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_corpus_metrics')),
    sa.UniqueConstraint('corpus_id', 'metric', 'variant', name=op.f('uq_corpus_metrics_corpus_id_metric_variant'))
    )
    op.create_table('documents',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('documents_id_seq')"), nullable=False),
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('external_id', sa.String(length=300), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('n_tokens', sa.Integer(), nullable=True),
    sa.Column('meta', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_documents')),
    sa.UniqueConstraint('corpus_id', 'external_id', name=op.f('uq_documents_corpus_id_external_id'))
    )
    op.create_table('entities',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('entities_id_seq')"), nullable=False),
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('extractor', sa.String(length=200), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_entities')),
    sa.UniqueConstraint('corpus_id', 'extractor', 'name', name=op.f('uq_entities_corpus_id_extractor_name'))
    )
    op.create_table('queries',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('queries_id_seq')"), nullable=False),
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('external_id', sa.String(length=300), nullable=False),
    sa.Column('origin', sa.String(length=20), nullable=False),
    sa.Column('qtype', sa.String(length=20), nullable=False),
    sa.Column('hops', sa.Integer(), nullable=True),
    sa.Column('question', sa.Text(), nullable=False),
    sa.Column('answer', sa.Text(), nullable=False),
    sa.Column('supporting_doc_ids', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('supporting_chunk_ids', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('evidence', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('generator_model', sa.String(length=200), nullable=True),
    sa.Column('seed', sa.Integer(), nullable=True),
    sa.Column('meta', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_queries')),
    sa.UniqueConstraint('corpus_id', 'external_id', name=op.f('uq_queries_corpus_id_external_id'))
    )
    op.create_index(op.f('ix_queries_corpus_id_qtype'), 'queries', ['corpus_id', 'qtype'], unique=False)
    op.create_table('chunks',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('chunks_id_seq')"), nullable=False),
    sa.Column('document_id', sa.Integer(), nullable=False),
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('chunker', sa.String(length=100), nullable=False),
    sa.Column('chunk_index', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('n_tokens', sa.Integer(), nullable=False),
    sa.Column('token_start', sa.Integer(), nullable=False),
    sa.Column('token_end', sa.Integer(), nullable=False),
    sa.Column('char_start', sa.Integer(), nullable=False),
    sa.Column('char_end', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chunks')),
    sa.UniqueConstraint('document_id', 'chunker', 'chunk_index', name=op.f('uq_chunks_document_id_chunker_chunk_index'))
    )
    op.create_index(op.f('ix_chunks_corpus_id'), 'chunks', ['corpus_id'], unique=False)
    op.create_table('paradigm_runs',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('paradigm_runs_id_seq')"), nullable=False),
    sa.Column('query_id', sa.Integer(), nullable=False),
    sa.Column('paradigm', sa.String(length=50), nullable=False),
    sa.Column('generator', sa.String(length=200), nullable=False),
    sa.Column('config_hash', sa.String(length=64), nullable=False),
    sa.Column('config', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('answer', sa.Text(), nullable=False),
    sa.Column('retrieved_chunk_ids', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('context_tokens', sa.Integer(), nullable=False),
    sa.Column('iterations', sa.Integer(), nullable=False),
    sa.Column('trace', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('ret_in_tokens', sa.Integer(), nullable=False),
    sa.Column('ret_out_tokens', sa.Integer(), nullable=False),
    sa.Column('gen_in_tokens', sa.Integer(), nullable=False),
    sa.Column('gen_out_tokens', sa.Integer(), nullable=False),
    sa.Column('latency_s', sa.Double(), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_paradigm_runs')),
    sa.UniqueConstraint('query_id', 'paradigm', 'generator', 'config_hash', name=op.f('uq_paradigm_runs_query_id_paradigm_generator_config_hash'))
    )
    op.create_index(op.f('ix_paradigm_runs_paradigm_generator'), 'paradigm_runs', ['paradigm', 'generator'], unique=False)
    op.create_table('query_checks',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('query_checks_id_seq')"), nullable=False),
    sa.Column('query_id', sa.Integer(), nullable=False),
    sa.Column('check_name', sa.String(length=50), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('passed', sa.Boolean(), nullable=False),
    sa.Column('evidence', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_query_checks')),
    sa.UniqueConstraint('query_id', 'check_name', 'model', name=op.f('uq_query_checks_query_id_check_name_model'))
    )
    op.create_table('answer_scores',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('answer_scores_id_seq')"), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('metric', sa.String(length=50), nullable=False),
    sa.Column('scorer', sa.String(length=200), nullable=False),
    sa.Column('value', sa.Double(), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_answer_scores')),
    sa.UniqueConstraint('run_id', 'metric', 'scorer', name=op.f('uq_answer_scores_run_id_metric_scorer'))
    )
    op.create_table('chunk_extractions',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('chunk_extractions_id_seq')"), nullable=False),
    sa.Column('chunk_id', sa.Integer(), nullable=False),
    sa.Column('extractor', sa.String(length=200), nullable=False),
    sa.Column('n_triples', sa.Integer(), nullable=False),
    sa.Column('llm_call_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chunk_extractions')),
    sa.UniqueConstraint('chunk_id', 'extractor', name=op.f('uq_chunk_extractions_chunk_id_extractor'))
    )
    op.create_table('judgments',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('judgments_id_seq')"), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('judge', sa.String(length=200), nullable=False),
    sa.Column('sample_index', sa.Integer(), nullable=False),
    sa.Column('label', sa.String(length=20), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('is_calibration', sa.Boolean(), nullable=False),
    sa.Column('llm_call_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_judgments')),
    sa.UniqueConstraint('run_id', 'judge', 'sample_index', name=op.f('uq_judgments_run_id_judge_sample_index'))
    )
    op.create_table('run_calls',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('run_calls_id_seq')"), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('llm_call_id', sa.Integer(), nullable=False),
    sa.Column('phase', sa.String(length=50), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_calls')),
    sa.UniqueConstraint('run_id', 'seq', name=op.f('uq_run_calls_run_id_seq'))
    )
    op.create_index(op.f('ix_run_calls_llm_call_id'), 'run_calls', ['llm_call_id'], unique=False)
    op.create_table('triples',
    sa.Column('id', sa.Integer(), server_default=sa.text("nextval('triples_id_seq')"), nullable=False),
    sa.Column('corpus_id', sa.Integer(), nullable=False),
    sa.Column('chunk_id', sa.Integer(), nullable=False),
    sa.Column('extractor', sa.String(length=200), nullable=False),
    sa.Column('subject_id', sa.Integer(), nullable=False),
    sa.Column('relation', sa.Text(), nullable=False),
    sa.Column('object_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_triples')),
    sa.UniqueConstraint('chunk_id', 'extractor', 'subject_id', 'relation', 'object_id', name=op.f('uq_triples_chunk_id_extractor_subject_id_relation_object_id'))
    )
    op.create_index(op.f('ix_triples_corpus_id_extractor'), 'triples', ['corpus_id', 'extractor'], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        for name, table, referred, column in FOREIGN_KEYS:
            op.create_foreign_key(name, table, referred, [column], ["id"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name, table, _referred, _column in FOREIGN_KEYS:
            op.drop_constraint(name, table, type_="foreignkey")
    op.drop_index(op.f('ix_triples_corpus_id_extractor'), table_name='triples')
    op.drop_table('triples')
    op.drop_index(op.f('ix_run_calls_llm_call_id'), table_name='run_calls')
    op.drop_table('run_calls')
    op.drop_table('judgments')
    op.drop_table('chunk_extractions')
    op.drop_table('answer_scores')
    op.drop_table('query_checks')
    op.drop_index(op.f('ix_paradigm_runs_paradigm_generator'), table_name='paradigm_runs')
    op.drop_table('paradigm_runs')
    op.drop_index(op.f('ix_chunks_corpus_id'), table_name='chunks')
    op.drop_table('chunks')
    op.drop_index(op.f('ix_queries_corpus_id_qtype'), table_name='queries')
    op.drop_table('queries')
    op.drop_table('entities')
    op.drop_table('documents')
    op.drop_table('corpus_metrics')
    op.drop_table('worker_runs')
    op.drop_index(op.f('ix_work_leases_stage_state_leased_until'), table_name='work_leases')
    op.drop_table('work_leases')
    op.drop_table('vectors')
    op.drop_table('unit_failures')
    op.drop_index(op.f('ix_router_predictions_router_features'), table_name='router_predictions')
    op.drop_table('router_predictions')
    op.drop_index(op.f('ix_llm_failures_request_hash'), table_name='llm_failures')
    op.drop_table('llm_failures')
    op.drop_index(op.f('ix_llm_calls_stage_model'), table_name='llm_calls')
    op.drop_table('llm_calls')
    op.drop_table('corpora')
    for name in SEQUENCES:
        op.execute(sa.schema.DropSequence(sa.Sequence(name)))
