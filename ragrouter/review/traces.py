"""Review items as MLflow traces, and the human assessments read back from them.

One trace per item in the review experiment (``review-<store id prefix>`` unless named), tagged
with the store id, the item's kind (``run`` or ``query``) and its key, so a second
``review start`` skips what is already there and ``review pull`` knows what each label is of.

A judged run: a root CHAIN span (question, gold answer → answer), a RETRIEVER span whose outputs
are the chunks put into the context (MLflow ``Document``s, the UI lists them), an LLM span
with the answer and its generation tokens (``mlflow.chat.tokenUsage``), and the judge's verdict
as feedback ``label`` from an LLM judge (source LLM_JUDGE, the judge key) with its reason.
A generated query: the root span (question, answer), a RETRIEVER span with the chunks it was
built from, a CHAIN span ``chain`` with the generator's plan (documents, bridges, descriptions,
steps from ``queries.meta``), one EVALUATOR span and one LLM-judge feedback ``check:<name>``
per check, and the checks' outcome as feedback ``accepted``.

A reviewer's label is a HUMAN feedback named ``label`` (runs: correct / incorrect / incomplete;
a boolean reads as correct / incorrect) or ``accepted`` (queries: true / false, or accepted /
rejected). Overriding the judge's assessment in the UI writes exactly that.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

RUN_LABEL = "label"
QUERY_LABEL = "accepted"
TAG_STORE = "ragrouter.store_id"
TAG_KIND = "ragrouter.kind"
TAG_RUN = "ragrouter.run_id"
TAG_QUERY = "ragrouter.query_id"
TAG_JUDGE = "ragrouter.judge"
TAG_JUDGE_LABEL = "ragrouter.judge_label"
TAG_CHANGES = "ragrouter.changes_oracle"  # its flip would change the query's oracle label (review start --prefer-changing)
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
GENAI_KIND = "genai_development"  # MLflow 3 opens such an experiment on its Traces page
RUN_LABELS = ("correct", "incorrect", "incomplete")


def experiment_name(store_id: str) -> str:
    return f"review-{store_id[:8]}"


def open_experiment(tracking_uri: str, name: str) -> str:
    """The review experiment's id (created with the GenAI kind when missing); sets the tracking
    URI and the active experiment for the fluent tracing API."""
    import mlflow

    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.routers import tracking

    client = tracking.client(tracking_uri)
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp is not None else client.create_experiment(
        name, artifact_location=tracking.default_artifact_location(tracking_uri))
    if exp is None or exp.tags.get(EXPERIMENT_KIND_TAG) != GENAI_KIND:
        client.set_experiment_tag(exp_id, EXPERIMENT_KIND_TAG, GENAI_KIND)
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


def find_experiment(tracking_uri: str, name: str) -> str | None:
    """The review experiment's id, or None when the store has none of that name (nothing is
    created: a pull only reads)."""
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.routers import tracking

    exp = tracking.client(tracking_uri).get_experiment_by_name(name)
    return exp.experiment_id if exp is not None else None


# The store's ids are INTEGER columns (32-bit on DuckDB and PostgreSQL): a tag beyond them names
# no row and would overflow the query that looks it up.
ID_MAX = 2**31 - 1


def _int_tag(tags: dict, key: str) -> int | None:
    """The tag as a store id (an integer 1..ID_MAX), None when it is missing or not one."""
    try:
        value = int(str(tags[key]).strip())
    except (KeyError, ValueError):
        return None
    return value if 1 <= value <= ID_MAX else None


def _traces(tracking_uri: str, exp_id: str, spans: bool = False) -> list:
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.routers import tracking

    client = tracking.client(tracking_uri)
    out, token = [], None
    while True:
        page = client.search_traces(locations=[exp_id], max_results=200, page_token=token, include_spans=spans)
        out.extend(page)
        token = page.token
        if not token:
            return out


def logged_keys(tracking_uri: str, exp_id: str, store_id: str) -> set[tuple[str, int]]:
    """(kind, run or query id) of this store's items already in the experiment."""
    keys = set()
    for t in _traces(tracking_uri, exp_id):
        tags = t.info.tags
        if tags.get(TAG_STORE) != store_id:
            continue
        kind = tags.get(TAG_KIND)
        key = _int_tag(tags, TAG_RUN if kind == "run" else TAG_QUERY)
        if kind and key is not None:  # a trace whose id tag is not an integer is no item of the store
            keys.add((kind, key))
    return keys


def _documents(chunks: list[dict]):
    from mlflow.entities import Document

    return [Document(page_content=c["text"], metadata={"doc_uri": f"{c['document']}#chunk{c['chunk_id']}",
                                                        "chunk_id": str(c["chunk_id"]), "rank": str(i + 1)},
                     id=str(c["chunk_id"])) for i, c in enumerate(chunks)]


def finish() -> None:
    """Write what is still queued and stop MLflow's trace-logging threads, so that nothing is
    left for its exit hook (which said "Flushing the async trace logging queue" on the console)."""
    import mlflow

    mlflow.flush_trace_async_logging(terminate=True)


def log_run(item: dict, judge: str, store_id: str) -> str:
    """Log one judged run as a trace (see module docstring); returns the trace id."""
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType, SpanType
    from mlflow.tracing.constant import SpanAttributeKey, TokenUsageKey

    with mlflow.start_span(f"{item['paradigm']} run {item['run_id']}", span_type=SpanType.CHAIN) as root:
        root.set_inputs({"question": item["question"], "gold_answer": item["gold_answer"],
                         "corpus": item["corpus"], "query_type": item["qtype"],
                         "unanswerable": item["unanswerable"]})
        root.set_attributes({"paradigm": item["paradigm"], "generator": item["generator"]})
        if item["paradigm"] != "llm_only":
            with mlflow.start_span("retrieve", span_type=SpanType.RETRIEVER) as span:
                span.set_inputs({"query": item["question"]})
                span.set_attributes({"context_tokens": int(item["context_tokens"]),
                                     "retrieval_input_tokens": int(item["ret_in_tokens"]),
                                     "retrieval_output_tokens": int(item["ret_out_tokens"])})
                span.set_outputs(_documents(item["chunks"]))
        with mlflow.start_span(f"generate ({item['generator']})", span_type=SpanType.LLM) as span:
            span.set_inputs({"question": item["question"], "context_chunks": len(item["chunks"]),
                             "context_tokens": int(item["context_tokens"])})
            span.set_outputs(item["answer"])
            span.set_attribute(SpanAttributeKey.CHAT_USAGE, {
                TokenUsageKey.INPUT_TOKENS: int(item["gen_in_tokens"]),
                TokenUsageKey.OUTPUT_TOKENS: int(item["gen_out_tokens"]),
                TokenUsageKey.TOTAL_TOKENS: int(item["gen_in_tokens"]) + int(item["gen_out_tokens"])})
        root.set_outputs({"answer": item["answer"]})
        mlflow.update_current_trace(
            tags={TAG_STORE: store_id, TAG_KIND: "run", TAG_RUN: str(item["run_id"]),
                  TAG_QUERY: str(item["query_id"]), TAG_JUDGE: judge, TAG_JUDGE_LABEL: item["judge_label"],
                  "paradigm": item["paradigm"], "query_type": item["qtype"], "corpus": item["corpus"],
                  **({TAG_CHANGES: "true"} if item.get("changes_oracle") else {})},
            request_preview=item["question"], response_preview=item["answer"])
        trace_id = root.trace_id
    mlflow.flush_trace_async_logging(terminate=False)
    mlflow.log_feedback(trace_id=trace_id, name=RUN_LABEL, value=item["judge_label"],
                        source=AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=judge),
                        rationale=item.get("judge_reason") or None)
    return trace_id


def log_query(item: dict, store_id: str) -> str:
    """Log one generated query as a trace (see module docstring); returns the trace id."""
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType, SpanType

    meta = item["meta"]
    chain = {k: meta[k] for k in ("strategy", "bridges", "descriptions", "steps", "entity", "templates",
                                  "single_hop_question", "substituted_question", "rewrite") if k in meta}
    chain["documents"] = item.get("supporting_doc_ids") or []
    with mlflow.start_span(f"{item['qtype']} query {item['query_id']}", span_type=SpanType.CHAIN) as root:
        root.set_inputs({"corpus": item["corpus"], "query_type": item["qtype"], "hops": item["hops"],
                         "generator": item["generator_model"]})
        with mlflow.start_span("source chunks", span_type=SpanType.RETRIEVER) as span:
            span.set_outputs(_documents(item["chunks"]))
        with mlflow.start_span("chain", span_type=SpanType.CHAIN) as span:
            span.set_inputs(chain)
            span.set_outputs({"question": item["question"], "answer": item["gold_answer"]})
        for c in item["checks"]:
            with mlflow.start_span(f"check {c['check']}", span_type=SpanType.EVALUATOR) as span:
                span.set_inputs({"model": c["model"]})
                span.set_outputs({"passed": c["passed"], "evidence": c["evidence"]})
        root.set_outputs({"question": item["question"], "answer": item["gold_answer"], "status": item["status"]})
        mlflow.update_current_trace(
            tags={TAG_STORE: store_id, TAG_KIND: "query", TAG_QUERY: str(item["query_id"]),
                  TAG_JUDGE: "checks", TAG_JUDGE_LABEL: item["status"], "query_type": item["qtype"],
                  "corpus": item["corpus"]},
            request_preview=item["question"], response_preview=item["gold_answer"])
        trace_id = root.trace_id
    mlflow.flush_trace_async_logging(terminate=False)
    for c in item["checks"]:
        ev = c["evidence"] if isinstance(c["evidence"], dict) else {}
        mlflow.log_feedback(trace_id=trace_id, name=f"check:{c['check']}", value=bool(c["passed"]),
                            source=AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE,
                                                    source_id=c["model"] or "rule"),
                            rationale=str(ev.get("reason")) if ev.get("reason") else None)
    mlflow.log_feedback(trace_id=trace_id, name=QUERY_LABEL, value=item["status"] == "accepted",
                        source=AssessmentSource(source_type=AssessmentSourceType.CODE, source_id="ragrouter checks"),
                        rationale=f"status {item['status']} after {len(item['checks'])} checks")
    return trace_id


@dataclass
class HumanAssessment:
    """One reviewer's latest valid label on one trace."""

    kind: str
    run_id: int | None
    query_id: int
    trace_id: str
    assessment_id: str
    reviewer: str
    label: str
    comment: str | None
    judge: str | None
    judge_label: str | None
    labelled_at: dt.datetime


def normalise(kind: str, value) -> str | None:
    """A feedback value as a stored label (None when it is not one)."""
    if kind == "run":
        if isinstance(value, bool):
            return "correct" if value else "incorrect"
        v = str(value).strip().lower()
        return v if v in RUN_LABELS else None
    if isinstance(value, bool):
        return "accepted" if value else "rejected"
    v = str(value).strip().lower()
    return {"accepted": "accepted", "accept": "accepted", "true": "accepted", "yes": "accepted",
            "rejected": "rejected", "reject": "rejected", "false": "rejected", "no": "rejected"}.get(v)


@dataclass
class Pulled:
    """What :func:`human_assessments` read."""

    labels: list[HumanAssessment]
    not_labels: int  # human feedbacks whose value is not a label
    bad_traces: list[str]  # one warning line per trace skipped for a missing or non-integer id tag


def _bad_tag(trace_id: str, kind: str, tags: dict) -> str | None:
    """The warning for a trace whose run / query id tag is missing or not a store id, else None."""
    for key in ((TAG_RUN, TAG_QUERY) if kind == "run" else (TAG_QUERY,)):
        if _int_tag(tags, key) is None:
            value = f"{tags[key]!r} is not a store id (an integer 1..{ID_MAX})" if key in tags else "is missing"
            return f"warning: trace {trace_id}: tag {key} {value}; trace skipped"
    return None


def human_assessments(tracking_uri: str, exp_id: str, store_id: str) -> Pulled:
    """This store's latest valid HUMAN label per (trace, reviewer), the number of human
    feedbacks skipped because their value is not a label, and the traces skipped because
    their id tag is not an integer (edited by hand, or another tool's)."""
    from mlflow.entities import AssessmentSourceType, Feedback

    found: dict[tuple[str, str], HumanAssessment] = {}
    stamp: dict[tuple[str, str], int] = {}
    skipped = 0
    bad: list[str] = []
    for t in _traces(tracking_uri, exp_id):
        tags = t.info.tags
        kind = tags.get(TAG_KIND)
        if tags.get(TAG_STORE) != store_id or kind not in ("run", "query"):
            continue
        warning = _bad_tag(t.info.trace_id, kind, tags)
        if warning:
            bad.append(warning)
            continue
        name = RUN_LABEL if kind == "run" else QUERY_LABEL
        for a in t.info.assessments or []:
            if (not isinstance(a, Feedback) or a.name != name or not a.valid
                    or a.source.source_type != AssessmentSourceType.HUMAN):
                continue
            label = normalise(kind, a.value)
            if label is None:
                skipped += 1
                continue
            when = a.last_update_time_ms or a.create_time_ms
            key = (t.info.trace_id, a.source.source_id or "")
            if key in stamp and stamp[key] >= when:
                continue
            stamp[key] = when
            found[key] = HumanAssessment(
                kind=kind, run_id=_int_tag(tags, TAG_RUN) if kind == "run" else None,
                query_id=_int_tag(tags, TAG_QUERY),
                trace_id=t.info.trace_id, assessment_id=a.assessment_id, reviewer=a.source.source_id or "",
                label=label, comment=a.rationale, judge=tags.get(TAG_JUDGE) if kind == "run" else None,
                judge_label=tags.get(TAG_JUDGE_LABEL),
                labelled_at=dt.datetime.fromtimestamp(when / 1000, dt.timezone.utc).replace(tzinfo=None))
    return Pulled(sorted(found.values(), key=lambda h: (h.trace_id, h.reviewer)), skipped, bad)
