"""The whole benchmark as relational tables (SQLAlchemy 2 ORM, one module).

Every artefact of RAGRouter-Bench is a row here. Each table has a *natural* unique key
(docs/explanation/architecture.md §2) so that every stage upserts idempotently: a unit of work is done when its
result row exists, and ``pending = expected − done`` is one anti-join.

Portability rules (docs/explanation/architecture.md §2): integer keys come from a ``Sequence`` (DuckDB rejects
``SERIAL``/``Identity``); floats are ``Double``; JSON is ``JSON`` (``JSONB`` on PostgreSQL);
no ``ON DELETE CASCADE``; foreign keys are emitted on PostgreSQL only (DuckDB forbids
updating rows that others reference, which upserts do), and every constraint has a name.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Double,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Sequence,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JsonType = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    """Declarative base carrying the naming convention for every constraint."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _id(table: str) -> Mapped[int]:
    seq = Sequence(f"{table}_id_seq")
    return mapped_column(
        Integer, seq, server_default=seq.next_value(), primary_key=True, doc="Surrogate key."
    )


def _fk(column: str, target: str) -> ForeignKeyConstraint:
    """A foreign key emitted on PostgreSQL only (see module docstring)."""
    return ForeignKeyConstraint([column], [target]).ddl_if(dialect="postgresql")


def _created() -> Mapped[dt.datetime]:
    return mapped_column(
        DateTime(timezone=False), server_default=func.now(), nullable=False, doc="When the row was written."
    )


class Corpus(Base):
    """A named collection of documents (one retrieval environment)."""

    __tablename__ = "corpora"
    __table_args__ = (UniqueConstraint("name"),)

    id: Mapped[int] = _id("corpora")
    name: Mapped[str] = mapped_column(String(200), nullable=False, doc="User-facing corpus name, e.g. 'medical'.")
    source_format: Mapped[str | None] = mapped_column(String(50), doc="Loader that ingested it (e.g. 'graphrag-bench').")
    meta: Mapped[dict | None] = mapped_column(JsonType, doc="Free-form facts about the corpus (source files, counts).")
    created_at: Mapped[dt.datetime] = _created()


class Document(Base):
    """One source document of a corpus, as ingested."""

    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("corpus_id", "external_id"), _fk("corpus_id", "corpora.id"))

    id: Mapped[int] = _id("documents")
    corpus_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Owning corpus.")
    external_id: Mapped[str] = mapped_column(String(300), nullable=False, doc="The dataset's own document id.")
    title: Mapped[str] = mapped_column(Text, nullable=False, default="", doc="Title ('' when the dataset has none).")
    text: Mapped[str] = mapped_column(Text, nullable=False, doc="Full document text.")
    n_tokens: Mapped[int | None] = mapped_column(Integer, doc="cl100k_base tokens of the text (without title).")
    meta: Mapped[dict | None] = mapped_column(JsonType, doc="Loader-specific extras.")
    created_at: Mapped[dt.datetime] = _created()


class Chunk(Base):
    """A sliding-window segment of a document (paper App. A.1: 512 tokens, overlap 100)."""

    __tablename__ = "chunks"
    __table_args__ = (
        UniqueConstraint("document_id", "chunker", "chunk_index"),
        Index(None, "corpus_id"),
        _fk("document_id", "documents.id"),
        _fk("corpus_id", "corpora.id"),
    )

    id: Mapped[int] = _id("chunks")
    document_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Source document.")
    corpus_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Corpus of the document (denormalised).")
    chunker: Mapped[str] = mapped_column(String(100), nullable=False, doc="Chunker key, e.g. 'cl100k:512:100'.")
    chunk_index: Mapped[int] = mapped_column(Integer, nullable=False, doc="0-based position in the document.")
    text: Mapped[str] = mapped_column(Text, nullable=False, doc="Decoded chunk text.")
    n_tokens: Mapped[int] = mapped_column(Integer, nullable=False, doc="Tokens in the chunk.")
    token_start: Mapped[int] = mapped_column(Integer, nullable=False, doc="First token offset in title⊕text.")
    token_end: Mapped[int] = mapped_column(Integer, nullable=False, doc="One past the last token offset.")
    char_start: Mapped[int] = mapped_column(Integer, nullable=False, doc="First character offset in title⊕text.")
    char_end: Mapped[int] = mapped_column(Integer, nullable=False, doc="One past the last character offset.")
    created_at: Mapped[dt.datetime] = _created()


class Vector(Base):
    """An embedding (float32 bytes, L2-normalised) of a chunk, entity or query — the truth
    from which FAISS index files are derived."""

    __tablename__ = "vectors"
    __table_args__ = (UniqueConstraint("owner_kind", "owner_id", "embedder"),)

    id: Mapped[int] = _id("vectors")
    owner_kind: Mapped[str] = mapped_column(String(20), nullable=False, doc="'chunk', 'entity' or 'query'.")
    owner_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Id in the owner's table.")
    embedder: Mapped[str] = mapped_column(String(200), nullable=False, doc="Embedder backend/model key.")
    dim: Mapped[int] = mapped_column(Integer, nullable=False, doc="Vector dimension.")
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False, doc="float32 little-endian bytes.")
    created_at: Mapped[dt.datetime] = _created()


class ChunkExtraction(Base):
    """The extract stage's unit: one chunk read by one extractor (even when it yields no triple)."""

    __tablename__ = "chunk_extractions"
    __table_args__ = (UniqueConstraint("chunk_id", "extractor"), _fk("chunk_id", "chunks.id"))

    id: Mapped[int] = _id("chunk_extractions")
    chunk_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="The chunk read.")
    extractor: Mapped[str] = mapped_column(String(200), nullable=False, doc="Extractor model + prompt version key.")
    n_triples: Mapped[int] = mapped_column(Integer, nullable=False, doc="Triples kept from this chunk.")
    llm_call_id: Mapped[int | None] = mapped_column(Integer, doc="Ledger row of the extraction call.")
    created_at: Mapped[dt.datetime] = _created()


class Entity(Base):
    """A normalised knowledge-graph node of a corpus."""

    __tablename__ = "entities"
    __table_args__ = (UniqueConstraint("corpus_id", "extractor", "name"), _fk("corpus_id", "corpora.id"))

    id: Mapped[int] = _id("entities")
    corpus_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Owning corpus.")
    extractor: Mapped[str] = mapped_column(String(200), nullable=False, doc="Extractor key that produced it.")
    name: Mapped[str] = mapped_column(Text, nullable=False, doc="Normalised entity name.")
    created_at: Mapped[dt.datetime] = _created()


class Triple(Base):
    """A (subject, relation, object) edge extracted from one chunk."""

    __tablename__ = "triples"
    __table_args__ = (
        UniqueConstraint("chunk_id", "extractor", "subject_id", "relation", "object_id"),
        Index(None, "corpus_id", "extractor"),
        _fk("chunk_id", "chunks.id"),
        _fk("subject_id", "entities.id"),
        _fk("object_id", "entities.id"),
    )

    id: Mapped[int] = _id("triples")
    corpus_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Owning corpus (denormalised).")
    chunk_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Source chunk of the triple.")
    extractor: Mapped[str] = mapped_column(String(200), nullable=False, doc="Extractor key.")
    subject_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Subject entity.")
    relation: Mapped[str] = mapped_column(Text, nullable=False, doc="Relation phrase as extracted (normalised).")
    object_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Object entity.")
    created_at: Mapped[dt.datetime] = _created()


class CorpusMetric(Base):
    """One structural or semantic corpus indicator (paper Tables 8 and 9)."""

    __tablename__ = "corpus_metrics"
    __table_args__ = (UniqueConstraint("corpus_id", "metric", "variant"), _fk("corpus_id", "corpora.id"))

    id: Mapped[int] = _id("corpus_metrics")
    corpus_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Measured corpus.")
    metric: Mapped[str] = mapped_column(String(100), nullable=False, doc="Metric name, e.g. 'lcc_ratio'.")
    variant: Mapped[str] = mapped_column(String(300), nullable=False, doc="Embedder or extractor the metric depends on.")
    value: Mapped[float | None] = mapped_column(Double, doc="Metric value (NULL when undefined).")
    created_at: Mapped[dt.datetime] = _created()


class Query(Base):
    """A benchmark question, imported from a dataset or generated (paper §3.2)."""

    __tablename__ = "queries"
    __table_args__ = (UniqueConstraint("corpus_id", "external_id"), Index(None, "corpus_id", "qtype"), _fk("corpus_id", "corpora.id"))

    id: Mapped[int] = _id("queries")
    corpus_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Corpus the question is asked against.")
    external_id: Mapped[str] = mapped_column(String(300), nullable=False, doc="Dataset id, or 'gen:<type>:<seed>:<model>'.")
    origin: Mapped[str] = mapped_column(String(20), nullable=False, doc="'imported' or 'generated'.")
    qtype: Mapped[str] = mapped_column(String(20), nullable=False, doc="'factual', 'reasoning' or 'summary'.")
    hops: Mapped[int | None] = mapped_column(Integer, doc="Reasoning hops when known.")
    question: Mapped[str] = mapped_column(Text, nullable=False, doc="Question text.")
    answer: Mapped[str] = mapped_column(Text, nullable=False, doc="Gold answer.")
    supporting_doc_ids: Mapped[list | None] = mapped_column(JsonType, doc="External ids of supporting documents.")
    supporting_chunk_ids: Mapped[list | None] = mapped_column(JsonType, doc="Chunk ids the question was built from.")
    evidence: Mapped[list | None] = mapped_column(JsonType, doc="Evidence sentences/triples given by the dataset.")
    status: Mapped[str] = mapped_column(String(20), nullable=False, doc="'accepted', 'pending' or 'rejected'.")
    generator_model: Mapped[str | None] = mapped_column(String(200), doc="Model that generated it (generated only).")
    seed: Mapped[int | None] = mapped_column(Integer, doc="Sampling seed of a generated query.")
    meta: Mapped[dict | None] = mapped_column(JsonType, doc="Loader/generator extras.")
    unanswerable: Mapped[bool | None] = mapped_column(
        Boolean, server_default=text("false"), default=False,
        doc="True when the honest answer is a refusal (ingest key 'unanswerable'); NULL reads as false.")
    created_at: Mapped[dt.datetime] = _created()


class QueryCheck(Base):
    """One verify-then-filter check of a query (paper App. A.2) with its evidence."""

    __tablename__ = "query_checks"
    __table_args__ = (UniqueConstraint("query_id", "check_name", "model"), _fk("query_id", "queries.id"))

    id: Mapped[int] = _id("query_checks")
    query_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Checked query.")
    check_name: Mapped[str] = mapped_column(String(50), nullable=False, doc="'grounding', 'shortcut', 'lexical_leak', 'parametric_leak'.")
    model: Mapped[str] = mapped_column(String(200), nullable=False, doc="Evaluator model key ('' for non-LLM checks).")
    passed: Mapped[bool] = mapped_column(Boolean, nullable=False, doc="Whether the query passed this check.")
    evidence: Mapped[dict | None] = mapped_column(JsonType, doc="Why: the answers compared, the judge's reason.")
    created_at: Mapped[dt.datetime] = _created()


class WorkerRun(Base):
    """One invocation of a worker process (what 'this run' means for billed tokens)."""

    __tablename__ = "worker_runs"

    id: Mapped[int] = _id("worker_runs")
    host: Mapped[str] = mapped_column(String(200), nullable=False, doc="Hostname of the worker.")
    pid: Mapped[int] = mapped_column(Integer, nullable=False, doc="Process id of the worker.")
    command: Mapped[str] = mapped_column(Text, nullable=False, doc="Command line (never secrets).")
    started_at: Mapped[dt.datetime] = _created()
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=False), doc="Clean exit time.")
    config: Mapped[dict | None] = mapped_column(JsonType, doc="The merged config the process ran stages with (no secrets).")
    stages: Mapped[list | None] = mapped_column(JsonType, doc="Names of the stages it ran units of.")


class LLMCall(Base):
    """The ledger and cache: one row per distinct model request that got a response.

    ``request_hash`` = sha256 of (model, messages/input, decoding params, response format,
    sample index); a second identical request reads this row and makes no HTTP call. Tokens
    here are what the call cost when it was made (billed once, by ``worker_run_id``)."""

    __tablename__ = "llm_calls"
    __table_args__ = (UniqueConstraint("request_hash"), Index(None, "stage", "model"))

    id: Mapped[int] = _id("llm_calls")
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False, doc="sha256 cache key of the request.")
    kind: Mapped[str] = mapped_column(String(20), nullable=False, doc="'chat' or 'embedding'.")
    backend: Mapped[str] = mapped_column(String(100), nullable=False, doc="Backend name from the config (never a key).")
    model: Mapped[str] = mapped_column(String(200), nullable=False, doc="Model name sent to the endpoint.")
    stage: Mapped[str | None] = mapped_column(String(50), doc="Stage that made the call (extract, answer, judge, …).")
    phase: Mapped[str | None] = mapped_column(String(50), doc="Phase within the stage (retrieval, generation, …).")
    messages: Mapped[list | dict | None] = mapped_column(JsonType, doc="Chat messages, or embedding inputs.")
    params: Mapped[dict | None] = mapped_column(JsonType, doc="Decoding params and response format.")
    response: Mapped[str | None] = mapped_column(Text, doc="Assistant text (chat) or NULL (embedding; see vectors).")
    response_json: Mapped[dict | list | None] = mapped_column(JsonType, doc="Parsed structured output when requested.")
    response_vectors: Mapped[bytes | None] = mapped_column(LargeBinary, doc="Embeddings: float32 bytes, n × dim, row-major.")
    prompt_tokens: Mapped[int] = mapped_column(Integer, nullable=False, doc="Input tokens.")
    completion_tokens: Mapped[int] = mapped_column(Integer, nullable=False, doc="Output tokens (a reasoning model's hidden reasoning included).")
    reasoning_tokens: Mapped[int | None] = mapped_column(
        Integer, doc="Hidden reasoning tokens (usage.completion_tokens_details.reasoning_tokens), already part of "
                     "completion_tokens (never add them again); NULL when the endpoint reported none.")
    token_source: Mapped[str] = mapped_column(String(20), nullable=False, doc="'usage' (endpoint) or 'tiktoken' (cl100k).")
    latency_s: Mapped[float] = mapped_column(Double, nullable=False, doc="Wall seconds of the successful HTTP call.")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, doc="HTTP attempts it took (1 = no retry).")
    worker_run_id: Mapped[int | None] = mapped_column(Integer, doc="Worker run that paid for this call.")
    created_at: Mapped[dt.datetime] = _created()


class LLMFailure(Base):
    """A model request that failed for good after its retries; retried by the next run."""

    __tablename__ = "llm_failures"
    __table_args__ = (Index(None, "request_hash"),)

    id: Mapped[int] = _id("llm_failures")
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False, doc="Cache key of the failed request.")
    backend: Mapped[str] = mapped_column(String(100), nullable=False, doc="Backend name.")
    model: Mapped[str] = mapped_column(String(200), nullable=False, doc="Model name.")
    stage: Mapped[str | None] = mapped_column(String(50), doc="Stage that made the call.")
    phase: Mapped[str | None] = mapped_column(String(50), doc="Phase within the stage.")
    error: Mapped[str] = mapped_column(Text, nullable=False, doc="Reason (HTTP status, timeout, unparseable reply, …).")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, doc="Attempts made.")
    response: Mapped[str | None] = mapped_column(Text, doc="The unusable reply, when one arrived.")
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, doc="Input tokens billed for an unusable reply.")
    completion_tokens: Mapped[int | None] = mapped_column(Integer, doc="Output tokens billed for an unusable reply.")
    reasoning_tokens: Mapped[int | None] = mapped_column(
        Integer, doc="Of completion_tokens, the hidden reasoning tokens the endpoint reported (e.g. a reply that spent "
                     "its whole reasoning allowance).")
    worker_run_id: Mapped[int | None] = mapped_column(Integer, doc="Worker run that tried.")
    created_at: Mapped[dt.datetime] = _created()


class UnitFailure(Base):
    """A work unit that failed in its last attempt, with the reason; removed when it succeeds."""

    __tablename__ = "unit_failures"
    __table_args__ = (UniqueConstraint("stage", "unit_key"),)

    id: Mapped[int] = _id("unit_failures")
    stage: Mapped[str] = mapped_column(String(50), nullable=False, doc="Stage name.")
    unit_key: Mapped[str] = mapped_column(String(500), nullable=False, doc="Natural key of the unit, as text.")
    error: Mapped[str] = mapped_column(Text, nullable=False, doc="Why it failed.")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, doc="Failed attempts so far.")
    updated_at: Mapped[dt.datetime] = _created()


class ParadigmRun(Base):
    """What one paradigm answered to one query with one generator, and what it cost."""

    __tablename__ = "paradigm_runs"
    __table_args__ = (
        UniqueConstraint("query_id", "paradigm", "generator", "config_hash"),
        Index(None, "paradigm", "generator"),
        _fk("query_id", "queries.id"),
    )

    id: Mapped[int] = _id("paradigm_runs")
    query_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Answered query.")
    paradigm: Mapped[str] = mapped_column(String(50), nullable=False, doc="Paradigm registry name.")
    generator: Mapped[str] = mapped_column(String(200), nullable=False, doc="Generator backbone (backend name).")
    config_hash: Mapped[str] = mapped_column(String(64), nullable=False, doc="Hash of the paradigm config and prompt versions.")
    config: Mapped[dict | None] = mapped_column(JsonType, doc="The paradigm config the hash covers.")
    answer: Mapped[str] = mapped_column(Text, nullable=False, doc="Final answer text.")
    retrieved_chunk_ids: Mapped[list | None] = mapped_column(JsonType, doc="Chunk ids put in the context, in order.")
    context_tokens: Mapped[int] = mapped_column(Integer, nullable=False, doc="Tokens of the final context.")
    iterations: Mapped[int] = mapped_column(Integer, nullable=False, doc="Retrieval rounds (0 for one-shot paradigms).")
    trace: Mapped[dict | list | None] = mapped_column(JsonType, doc="Sub-questions, evaluations, retrieval details.")
    ret_in_tokens: Mapped[int] = mapped_column(Integer, nullable=False, doc="Retrieval-phase input tokens consumed.")
    ret_out_tokens: Mapped[int] = mapped_column(Integer, nullable=False, doc="Retrieval-phase output tokens consumed.")
    gen_in_tokens: Mapped[int] = mapped_column(Integer, nullable=False, doc="Generation-phase input tokens consumed.")
    gen_out_tokens: Mapped[int] = mapped_column(Integer, nullable=False, doc="Generation-phase output tokens consumed.")
    latency_s: Mapped[float | None] = mapped_column(Double, doc="Wall seconds the unit took (cache hits included).")
    created_at: Mapped[dt.datetime] = _created()


class RunCall(Base):
    """Link between a paradigm run and the ledger rows it consumed, with the phase."""

    __tablename__ = "run_calls"
    __table_args__ = (UniqueConstraint("run_id", "seq"), Index(None, "llm_call_id"), _fk("run_id", "paradigm_runs.id"), _fk("llm_call_id", "llm_calls.id"))

    id: Mapped[int] = _id("run_calls")
    run_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Paradigm run.")
    seq: Mapped[int] = mapped_column(Integer, nullable=False, doc="Order of the call within the run.")
    llm_call_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Ledger row.")
    phase: Mapped[str] = mapped_column(String(50), nullable=False, doc="'retrieval' or 'generation'.")


class Judgment(Base):
    """LLM-as-a-judge verdict on one run by one judge model (paper App. C.1)."""

    __tablename__ = "judgments"
    __table_args__ = (UniqueConstraint("run_id", "judge", "sample_index"), _fk("run_id", "paradigm_runs.id"))

    id: Mapped[int] = _id("judgments")
    run_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Judged paradigm run.")
    judge: Mapped[str] = mapped_column(String(200), nullable=False, doc="Judge key: backend/prompt version[/gate] (judge.judge_key).")
    sample_index: Mapped[int] = mapped_column(Integer, nullable=False, default=0, doc="Repeat index when judging k times.")
    label: Mapped[str] = mapped_column(String(20), nullable=False, doc="'correct', 'incorrect' or 'incomplete'.")
    reason: Mapped[str | None] = mapped_column(Text, doc="The judge's reason (a rule's fixed reason when no call was made, e.g. a hallucination on a question marked unanswerable).")
    is_calibration: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, doc="Judgment of a calibration case.")
    llm_call_id: Mapped[int | None] = mapped_column(Integer, doc="Ledger row of the judge call.")
    created_at: Mapped[dt.datetime] = _created()
    raw_label: Mapped[str | None] = mapped_column(String(20), doc="The judge model's own verdict; differs from label when the evidence gate (judge.gate) overruled it.")
    refusal: Mapped[bool | None] = mapped_column(
        Boolean, doc="True when the answer is a refusal (judge.rule_verdict; labelled without a call); NULL before 0009.")
    review: Mapped[str | None] = mapped_column(
        Text, doc="Why a rule left the verdict to a person's review (the figures rule abstained: a figure it could not "
                  "compare with confidence); NULL when none did, and before 0012.")


class AnswerScore(Base):
    """A quantitative quality metric of one run (semantic F1, coverage, faithfulness)."""

    __tablename__ = "answer_scores"
    __table_args__ = (UniqueConstraint("run_id", "metric", "scorer"), _fk("run_id", "paradigm_runs.id"))

    id: Mapped[int] = _id("answer_scores")
    run_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Scored paradigm run.")
    metric: Mapped[str] = mapped_column(String(50), nullable=False, doc="'semantic_f1', 'coverage', 'faith_hard', 'faith_soft'.")
    scorer: Mapped[str] = mapped_column(String(200), nullable=False, doc="Encoder key used.")
    value: Mapped[float | None] = mapped_column(Double, doc="Score (NULL when not applicable).")
    created_at: Mapped[dt.datetime] = _created()


class RouterPrediction(Base):
    """A router's choice for one query in one CV fold."""

    __tablename__ = "router_predictions"
    __table_args__ = (
        UniqueConstraint("router", "features", "encoder", "generator", "dataset", "fold", "query_key"),
        Index(None, "router", "features"),
    )

    id: Mapped[int] = _id("router_predictions")
    router: Mapped[str] = mapped_column(String(50), nullable=False, doc="Router registry name.")
    features: Mapped[str] = mapped_column(String(10), nullable=False, doc="'q', 'c' or 'qc'.")
    encoder: Mapped[str] = mapped_column(String(200), nullable=False, doc="Query encoder ('onehot' for classical).")
    generator: Mapped[str] = mapped_column(String(200), nullable=False, doc="Generator backbone the labels come from.")
    dataset: Mapped[str] = mapped_column(String(200), nullable=False, doc="'store' or the imported dataset's name.")
    fold: Mapped[int] = mapped_column(Integer, nullable=False, doc="CV fold (0–4).")
    query_key: Mapped[str] = mapped_column(String(300), nullable=False, doc="Query id (store id or imported id).")
    query_id: Mapped[int | None] = mapped_column(Integer, doc="queries.id when the query is in the store.")
    predicted: Mapped[str] = mapped_column(String(50), nullable=False, doc="Routed paradigm or 'cannot_answer'.")
    true_label: Mapped[str] = mapped_column(String(50), nullable=False, doc="Oracle label.")
    probabilities: Mapped[dict | None] = mapped_column(JsonType, doc="Class → probability.")
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64), doc="MLflow run of the fold.")
    created_at: Mapped[dt.datetime] = _created()


class StoreInfo(Base):
    """The store's identity: one row, a uuid4 made at ``db upgrade`` (migration 0006)."""

    __tablename__ = "store_info"

    store_id: Mapped[str] = mapped_column(String(36), primary_key=True, doc="uuid4 of this store.")
    created_at: Mapped[dt.datetime] = _created()


class RouterFoldMetric(Base):
    """Every metric of one CV fold of one router run (the numbers MLflow logs; v_router_scores
    aggregates them)."""

    __tablename__ = "router_fold_metrics"
    __table_args__ = (UniqueConstraint("router", "features", "encoder", "generator", "dataset", "fold"),)

    id: Mapped[int] = _id("router_fold_metrics")
    router: Mapped[str] = mapped_column(String(50), nullable=False, doc="Router registry name.")
    features: Mapped[str] = mapped_column(String(10), nullable=False, doc="'q', 'c', 'qc' or 'none'.")
    encoder: Mapped[str] = mapped_column(String(200), nullable=False, doc="Query encoder ('onehot', 'none' or a backend).")
    generator: Mapped[str] = mapped_column(String(200), nullable=False, doc="Generator backbone the labels come from.")
    dataset: Mapped[str] = mapped_column(String(200), nullable=False, doc="'store' or the imported dataset's name.")
    fold: Mapped[int] = mapped_column(Integer, nullable=False, doc="CV fold.")
    judge: Mapped[str | None] = mapped_column(String(200), doc="Judge whose labels trained the router (NULL: imported).")
    n_train: Mapped[int] = mapped_column(Integer, nullable=False, doc="Training rows of the fold.")
    n_test: Mapped[int] = mapped_column(Integer, nullable=False, doc="Test rows of the fold.")
    fallback: Mapped[str | None] = mapped_column(String(50), doc="Paradigm run for 'cannot_answer' (training fold's most frequent label).")
    routing_accuracy: Mapped[float | None] = mapped_column(Double, doc="Share of test rows predicted = label.")
    macro_f1: Mapped[float | None] = mapped_column(Double, doc="Macro-F1 over the classes present in the fold (true or predicted).")
    mrr: Mapped[float | None] = mapped_column(Double, doc="Mean reciprocal rank of the label (unrounded probabilities).")
    correct_rate: Mapped[float | None] = mapped_column(Double, doc="Share of test rows whose routed paradigm is correct.")
    avg_tokens: Mapped[float | None] = mapped_column(Double, doc="Mean tokens of the routed paradigm.")
    abstain_rate: Mapped[float | None] = mapped_column(Double, doc="Share of 'cannot_answer' predictions.")
    lambda_swept: Mapped[bool] = mapped_column(Boolean, nullable=False, doc="Whether a cost-aware λ sweep ran.")
    aiq: Mapped[float | None] = mapped_column(Double, doc="Area under the λ sweep's cost–quality frontier (sweep only).")
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64), doc="MLflow run of the router.")
    created_at: Mapped[dt.datetime] = _created()


class WorkLease(Base):
    """A lease on a work unit, so that many workers on PostgreSQL share a stage."""

    __tablename__ = "work_leases"
    __table_args__ = (UniqueConstraint("stage", "unit_key"), Index(None, "stage", "state", "leased_until"))

    id: Mapped[int] = _id("work_leases")
    stage: Mapped[str] = mapped_column(String(50), nullable=False, doc="Stage name.")
    unit_key: Mapped[str] = mapped_column(String(500), nullable=False, doc="Natural key of the unit, as text.")
    state: Mapped[str] = mapped_column(String(20), nullable=False, doc="'pending', 'leased' or 'done'.")
    holder: Mapped[str | None] = mapped_column(String(200), doc="Worker holding the lease (host:pid:run).")
    leased_until: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=False), doc="Lease expiry.")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0, doc="Times the unit was leased.")
    updated_at: Mapped[dt.datetime] = _created()


class DecisionCell(Base):
    """The anytime-valid comparison of the paradigms of one cell (corpus × query type ×
    generator, under one judge) that ``run --until-decided`` updates after every batch
    (``ragrouter.decisions``): its state, the queries and runs it rests on and the bound."""

    __tablename__ = "decision_cells"
    __table_args__ = (UniqueConstraint("corpus_id", "qtype", "generator", "judge"),)

    id: Mapped[int] = _id("decision_cells")
    corpus_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Corpus of the cell.")
    qtype: Mapped[str] = mapped_column(String(20), nullable=False, doc="Query type of the cell.")
    generator: Mapped[str] = mapped_column(String(200), nullable=False, doc="Generator backend of the cell's runs.")
    judge: Mapped[str] = mapped_column(String(200), nullable=False, doc="Judgment key the correct rates come from.")
    state: Mapped[str] = mapped_column(String(20), nullable=False, doc="'decided', 'equivalent' or 'undecided'.")
    winner: Mapped[str | None] = mapped_column(String(50), doc="Decided: the best paradigm; else the current leader.")
    n_queries: Mapped[int] = mapped_column(Integer, nullable=False, doc="Queries of the sequence judged so far.")
    n_runs: Mapped[int] = mapped_column(Integer, nullable=False, doc="Paradigm runs those queries took.")
    bound: Mapped[float | None] = mapped_column(Double, doc="Decided: the smallest lower confidence bound of the winner's "
                                                "lead over another paradigm; equivalent/undecided: the largest |difference| "
                                                "the confidence sequences allow among the paradigms still run.")
    alpha: Mapped[float] = mapped_column(Double, nullable=False, doc="Error level of the whole cell (all pairs together).")
    margin: Mapped[float] = mapped_column(Double, nullable=False, doc="Equivalence margin on the difference in correct rates.")
    stop_reason: Mapped[str | None] = mapped_column(Text, doc="Why the sequence stopped (decided, equivalent, budget, exhausted) or NULL while it goes on.")
    detail: Mapped[dict | None] = mapped_column(JsonType, doc="Per-paradigm correct counts, per-pair discordant counts, e-values and intervals, active paradigms, seed.")
    updated_at: Mapped[dt.datetime] = _created()


class StageTiming(Base):
    """Wall time one worker spent on one stage's units (what ``run --dry-run`` learns time per
    unit from, for the stages whose time is not model calls)."""

    __tablename__ = "stage_timings"
    __table_args__ = (Index(None, "stage"),)

    id: Mapped[int] = _id("stage_timings")
    worker_run_id: Mapped[int | None] = mapped_column(Integer, doc="Worker run that did the units.")
    stage: Mapped[str] = mapped_column(String(50), nullable=False, doc="Stage name.")
    units: Mapped[int] = mapped_column(Integer, nullable=False, doc="Units completed.")
    seconds: Mapped[float] = mapped_column(Double, nullable=False, doc="Wall seconds from the first unit to the last write.")
    model_calls: Mapped[int] = mapped_column(Integer, nullable=False, default=0, doc="HTTP model requests those units made.")
    created_at: Mapped[dt.datetime] = _created()


class HumanLabel(Base):
    """A person's label on one reviewed item, pulled back from the MLflow review experiment
    (``review pull``): a paradigm run's correctness (what the judge's verdict is measured
    against) or a generated query's acceptance. One row per (trace, reviewer): the reviewer's
    latest valid human assessment of that trace (``ragrouter.review``)."""

    __tablename__ = "human_labels"
    __table_args__ = (UniqueConstraint("trace_id", "reviewer"), Index(None, "run_id"), Index(None, "query_id"))

    id: Mapped[int] = _id("human_labels")
    kind: Mapped[str] = mapped_column(String(20), nullable=False, doc="'run' (a judged answer) or 'query' (a generated question).")
    run_id: Mapped[int | None] = mapped_column(Integer, doc="Reviewed paradigm run (kind 'run').")
    query_id: Mapped[int] = mapped_column(Integer, nullable=False, doc="Reviewed query, or the query of the reviewed run.")
    trace_id: Mapped[str] = mapped_column(String(64), nullable=False, doc="MLflow trace the label was recorded on.")
    assessment_id: Mapped[str] = mapped_column(String(64), nullable=False, doc="MLflow assessment id of the label.")
    experiment: Mapped[str] = mapped_column(String(200), nullable=False, doc="MLflow review experiment name.")
    reviewer: Mapped[str] = mapped_column(String(200), nullable=False, doc="Who labelled it (the assessment's source id; '' when the UI gave none).")
    label: Mapped[str] = mapped_column(String(20), nullable=False, doc="Run: 'correct', 'incorrect' or 'incomplete'; query: 'accepted' or 'rejected'.")
    comment: Mapped[str | None] = mapped_column(Text, doc="The reviewer's rationale.")
    judge: Mapped[str | None] = mapped_column(String(200), doc="Judge key whose verdict the trace showed (kind 'run').")
    judge_label: Mapped[str | None] = mapped_column(String(20), doc="The verdict the trace showed: the judge's label (run) or the checks' outcome (query: 'accepted'/'rejected').")
    labelled_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=False), nullable=False, doc="When the reviewer last set the label (UTC).")
    created_at: Mapped[dt.datetime] = _created()


TABLES = [t.name for t in Base.metadata.sorted_tables]
