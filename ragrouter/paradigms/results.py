"""Result types: the LLM calls a paradigm consumed, a retrieval, and a paradigm run.

Token attribution (docs/explanation/architecture.md §4–5): a run records the tokens it *consumed*, i.e. the
``prompt_tokens``/``completion_tokens`` of every :class:`ChatResult` it used, whether the
gateway served it from the ledger cache or not — what a cold run would pay. Phases:
``retrieval`` (query entity extraction, self-evaluation) and ``generation`` (answers).
Within one run each ledger row counts once (a call reused inside the run, e.g. an
identical generation request in two IterativeRAG rounds, is one call). Across runs nothing
is shared in the accounting: when a :class:`~ragrouter.paradigms.query_context.QueryContext`
serves one graph retrieval to both GraphRAG and HybridRAG, *each* run lists the extraction
call's ``call_id`` with phase ``retrieval`` and counts its tokens, exactly as if it had made
the call itself; the ledger (``llm_calls``) still holds and bills the call once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

PHASES = ("retrieval", "generation")


@dataclass(frozen=True)
class CallUse:
    """One ledger call a paradigm consumed, with its phase and what it was for."""

    call_id: int
    phase: str
    purpose: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool = False
    finish_reason: str | None = None  # why the endpoint ended the reply ('stop', 'length'; None: not said)

    @classmethod
    def of(cls, result: Any, phase: str, purpose: str) -> "CallUse":
        """From a gateway ``ChatResult``."""
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
        return cls(
            call_id=int(result.call_id),
            phase=phase,
            purpose=purpose,
            prompt_tokens=int(result.prompt_tokens or 0),
            completion_tokens=int(result.completion_tokens or 0),
            cached=bool(getattr(result, "cached", False)),
            finish_reason=getattr(result, "finish_reason", None),
        )


@dataclass(frozen=True)
class Retrieval:
    """A retriever's ranked chunk list (no budget applied yet) and what it did.

    ``chunk_ids``/``scores`` are parallel, best first, without duplicates. ``facts`` (graph
    retrieval) are the selected triples in rank order, each with its source chunk.
    ``details`` is JSON-able and goes into the run's trace; ``calls`` are the LLM calls the
    retrieval made (phase ``retrieval``)."""

    kind: str
    query: str
    chunk_ids: tuple[int, ...]
    scores: tuple[float, ...]
    details: dict = field(default_factory=dict)
    calls: tuple[CallUse, ...] = ()
    facts: tuple = ()

    def ranked(self) -> list[tuple[int, float]]:
        return list(zip(self.chunk_ids, self.scores))


@dataclass
class ParadigmResult:
    """One paradigm run, ready for the ``paradigm_runs`` and ``run_calls`` rows."""

    answer: str
    retrieved_chunk_ids: list[int]
    context_tokens: int
    iterations: int
    trace: dict
    calls: list[tuple[int, str]]
    ret_in: int
    ret_out: int
    gen_in: int
    gen_out: int
    call_details: list[CallUse] = field(default_factory=list)
    finish_reason: str | None = None  # the returned answer's call: 'length' when max_tokens cut it

    @classmethod
    def build(
        cls,
        *,
        answer: str,
        retrieved_chunk_ids: Iterable[int],
        context_tokens: int,
        iterations: int,
        trace: dict,
        uses: Iterable[CallUse],
        finish_reason: str | None = None,
    ) -> "ParadigmResult":
        """Sum the consumed tokens per phase over the distinct calls in ``uses`` (in order)."""
        distinct: list[CallUse] = []
        seen: set[int] = set()
        for use in uses:
            if use.call_id in seen:
                continue
            seen.add(use.call_id)
            distinct.append(use)
        ret = [u for u in distinct if u.phase == "retrieval"]
        gen = [u for u in distinct if u.phase == "generation"]
        return cls(
            answer=answer,
            retrieved_chunk_ids=[int(c) for c in retrieved_chunk_ids],
            context_tokens=int(context_tokens),
            iterations=int(iterations),
            trace=trace,
            calls=[(u.call_id, u.phase) for u in distinct],
            ret_in=sum(u.prompt_tokens for u in ret),
            ret_out=sum(u.completion_tokens for u in ret),
            gen_in=sum(u.prompt_tokens for u in gen),
            gen_out=sum(u.completion_tokens for u in gen),
            call_details=distinct,
            finish_reason=finish_reason,
        )
