"""The five RAG paradigms (paper §3.1, App. B.2, Algorithm 3) and their registry.

Every paradigm has the same entry point::

    PARADIGMS[name].run(query_text, query_vector_provider, index, gateway, generator_backend, config)
        -> ParadigmResult

``query_vector_provider`` is a :class:`~ragrouter.paradigms.query_context.QueryContext`
(share one per query so the paradigms of that query embed, search and extract once), the
query's stored vector, a callable ``texts -> vectors``, or ``None`` (embed via the gateway).
``generator_backend`` is a backend name; it answers, and it also does the LLM work of
retrieval (query entity extraction, self-evaluation), so a run's costs belong to one model.
LLM calls are made with stage ``answer`` and phase ``retrieval`` or ``generation``.

Paradigms (``PARADIGMS``):
    ``llm_only``  DIRECT prompt, ``paradigms.llm_only.temperature`` (0.7); no retrieval.
    ``naive``     NaiveRetriever → budget → GENERATION prompt.
    ``graph``     GraphRetriever → its triples, each with its source sentences, filled greedily
                  into the budget (Algorithm 4 phase 3) → GENERATION prompt.
    ``hybrid``    RRF (``retrieval.rrf_k``) over the full naive and graph chunk lists (eq. 9),
                  de-duplicated → budget → GENERATION prompt (passages only).
    ``iterative`` Algorithm 3 over ``paradigms.iterative.base_retriever`` (graph by default);
                  its contexts hold passages only (Algorithm 3 accumulates chunks).
    ``iterative_naive``  the same over the naive retriever.

IterativeRAG details (Algorithm 3; our readings where the pseudo-code is loose):
    * Round 0: DIRECT answer at the generation temperature, then SELF_EVAL (question and
      answer) at ``paradigms.iterative.eval_temperature``. Sufficient → stop (0 rounds).
      Otherwise the next query is the evaluator's sub-question, or the question itself when
      it gives none (Algorithm 3, line 14).
    * Rounds 1..``max_rounds``: retrieve with the current query; the context accumulates the
      rounds' ranked lists **interleaved by rank** (round 1's first chunk, round 2's first
      chunk, …, then everyone's second, …), de-duplicated, packed into the budget. Round 1
      alone is exactly the base retriever's context; later rounds' evidence enters even when
      round 1 alone would fill the budget. The answer is always to the *original* question;
      SELF_EVAL then sees question, answer and context.
    * Stop rules after a round ≥ 1: ``sufficient``; ``no_sub_question`` (empty/absent);
      ``repeated_sub_question`` (normalised — casefolded, punctuation dropped, whitespace
      collapsed — equal to the question or any earlier query, round 0's sub-question
      included); ``max_rounds``.
    * An unusable evaluation reply (gateway reasons empty/unparseable/schema mismatch) is
      read as ``{sufficient: false, sub_question: ""}`` and recorded in the trace; transport
      errors are raised.
    * ``iterations`` = retrieval rounds run; the stored context and chunk ids are the final
      round's (empty when round 0 sufficed).

Empty contexts: every retrieving run's trace has ``empty_context`` (true when the generator got
no passage / fact at all, so it answered from the "(no passages retrieved)" marker) and
``context.empty``; LLM-only runs and IterativeRAG runs that stopped at round 0 retrieve nothing
and carry no such key.

Timeouts: answer, direct, self-evaluation calls use ``generation.timeout_s``, query entity
extraction ``extraction.timeout_s`` (null: the backend's ``timeout_s``).

Token phases: entity extraction and self-evaluation are ``retrieval``; answers (incl. round
0's direct answer) are ``generation`` (paper Table 16).
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from typing import Any

from ragrouter.paradigms import prompts
from ragrouter.paradigms.context import Context, FactContext, build_context, build_fact_context, rrf_fuse
from ragrouter.paradigms.query_context import STAGE, QueryContext, make_context
from ragrouter.paradigms.results import CallUse, ParadigmResult, Retrieval
from ragrouter.paradigms.retrievers import UNUSABLE_REPLY, _gateway_error_reason
from ragrouter.paradigms.settings import Settings, config_hash, paradigm_config

EMPTY_CONTEXT = "(no passages retrieved)"
TRACE_SCORE_DIGITS = 6


def _settings(ctx: QueryContext) -> Settings:
    return ctx.settings


def _generate(gateway, backend: str, question: str, context: Context, s: Settings) -> tuple[str, CallUse]:
    """GENERATION prompt over ``context`` (a marker text when it is empty)."""
    messages = prompts.GENERATION.messages(context=context.text or EMPTY_CONTEXT, question=question)
    result = gateway.chat(backend, messages, temperature=s.gen_temperature, max_tokens=s.gen_max_tokens,
                          stage=STAGE, phase="generation", timeout_s=s.gen_timeout_s, **s.answer_sampling())
    return (result.text or "").strip(), CallUse.of(result, "generation", "answer")


def _direct(gateway, backend: str, question: str, temperature: float, max_tokens: int,
            timeout_s: float | None = None, sampling: dict | None = None) -> tuple[str, CallUse]:
    result = gateway.chat(backend, prompts.DIRECT.messages(question=question), temperature=temperature,
                          max_tokens=max_tokens, stage=STAGE, phase="generation", timeout_s=timeout_s,
                          **(sampling or {}))
    return (result.text or "").strip(), CallUse.of(result, "generation", "direct")


def _scores_of(context: Context, ranked: dict[int, float]) -> list[float]:
    return [round(float(ranked[c]), TRACE_SCORE_DIGITS) for c in context.chunk_ids]


def _context_trace(context: Context, s: Settings) -> dict:
    out = {"chunks": len(context.chunk_ids), "tokens": context.tokens, "budget": s.token_budget,
           "facts": len(context.facts), "empty": not context.text}
    if isinstance(context, FactContext):
        out.update(sentences=context.sentences, skipped_facts=context.skipped)
    return out


class Paradigm(ABC):
    """Base class: a name, the config it depends on, and :meth:`run`."""

    name = ""

    def config(self, config) -> dict:
        """The hyperparameters and prompt versions this paradigm's output depends on."""
        return paradigm_config(self.name, config)

    def config_hash(self, config) -> str:
        return config_hash(self.name, config)

    def run(self, query_text: str, query_vector_provider, index, gateway, generator_backend: str,
            config) -> ParadigmResult:
        ctx = make_context(query_text, query_vector_provider, index, gateway, config)
        t0 = time.perf_counter()
        result = self._run(query_text, ctx, gateway, generator_backend)
        result.trace.setdefault("paradigm", self.name)
        result.trace["wall_s"] = round(time.perf_counter() - t0, 4)
        return result

    @abstractmethod
    def _run(self, q: str, ctx: QueryContext, gateway, backend: str) -> ParadigmResult:
        """The paradigm itself (retrieve, pack, generate, …)."""


class LLMOnly(Paradigm):
    """Retrieval-free baseline (Figure 14 prompt, temperature 0.7)."""

    name = "llm_only"

    def _run(self, q, ctx, gateway, backend):
        s = _settings(ctx)
        answer, use = _direct(gateway, backend, q, s.llm_only_temperature, s.llm_only_max_tokens, s.gen_timeout_s,
                              s.answer_sampling())
        return ParadigmResult.build(answer=answer, retrieved_chunk_ids=[], context_tokens=0, iterations=0,
                                    trace={}, uses=[use], finish_reason=use.finish_reason)


class _OneShot(Paradigm):
    """Retrieve once, pack, generate."""

    with_facts = False  # GraphRAG: the context is triples + source sentences (Algorithm 4)

    @abstractmethod
    def _retrieve(self, q: str, ctx: QueryContext, backend: str) -> tuple[list[int], dict[int, float], list[Retrieval], dict]:
        """Ranked chunk ids, their scores, the retrievals made and trace details."""

    def _run(self, q, ctx, gateway, backend):
        s = _settings(ctx)
        ranked, scores, retrievals, trace = self._retrieve(q, ctx, backend)
        if self.with_facts:
            facts = [f for r in retrievals for f in r.facts]
            context = build_fact_context(facts, ctx.index.texts, s.token_budget,
                                         sentences_of=getattr(ctx.index, "sentences", None))
        else:
            context = build_context(ranked, ctx.index.texts, s.token_budget, counts=ctx.index.passage_counts)
        answer, gen_use = _generate(gateway, backend, q, context, s)
        trace["context"] = _context_trace(context, s)
        trace["empty_context"] = not context.text
        trace["context_scores"] = _scores_of(context, scores)
        uses = [u for r in retrievals for u in r.calls] + [gen_use]
        return ParadigmResult.build(answer=answer, retrieved_chunk_ids=context.chunk_ids,
                                    context_tokens=context.tokens, iterations=0, trace=trace, uses=uses,
                                    finish_reason=gen_use.finish_reason)


class NaiveRAG(_OneShot):
    name = "naive"

    def _retrieve(self, q, ctx, backend):
        r = ctx.dense(q)
        return list(r.chunk_ids), dict(r.ranked()), [r], {"retrieval": r.details}


class GraphRAG(_OneShot):
    name = "graph"
    with_facts = True

    def _retrieve(self, q, ctx, backend):
        r = ctx.graph(q, backend)
        return list(r.chunk_ids), dict(r.ranked()), [r], {"retrieval": r.details}


class HybridRAG(_OneShot):
    """RRF over the naive and graph ranked lists (eq. 9)."""

    name = "hybrid"

    def _retrieve(self, q, ctx, backend):
        naive, graph = ctx.dense(q), ctx.graph(q, backend)
        fused = rrf_fuse([naive.chunk_ids, graph.chunk_ids], ctx.settings.rrf_k)
        trace = {
            "retrieval": {"naive": naive.details, "graph": graph.details, "fused": len(fused)},
        }
        return [c for c, _ in fused], dict(fused), [naive, graph], trace


_NON_WORD = re.compile(r"[^\w\s]+")


def normalise_query(text: str) -> str:
    """Casefolded, punctuation dropped, whitespace collapsed (for repeated sub-questions)."""
    return " ".join(_NON_WORD.sub(" ", text.casefold()).split())


def interleave(lists: list[tuple[int, ...]]) -> list[int]:
    """Round-robin by rank over ``lists`` (rank 1 of each list, then rank 2, …), de-duplicated."""
    out: list[int] = []
    seen: set[int] = set()
    depth = max((len(x) for x in lists), default=0)
    for i in range(depth):
        for lst in lists:
            if i < len(lst) and lst[i] not in seen:
                seen.add(lst[i])
                out.append(lst[i])
    return out


class IterativeRAG(Paradigm):
    """Algorithm 3 over a base retriever (``None``: ``paradigms.iterative.base_retriever``)."""

    def __init__(self, name: str = "iterative", base: str | None = None):
        self.name = name
        self.base = base

    def config(self, config) -> dict:
        return paradigm_config(self.name, config, base_retriever=self.base)

    def config_hash(self, config) -> str:
        return config_hash(self.name, config, base_retriever=self.base)

    def _evaluate(self, gateway, backend: str, q: str, answer: str, context_text: str | None,
                  s: Settings) -> tuple[dict, list[CallUse]]:
        messages = prompts.self_eval_messages(q, answer, context_text)
        try:
            result = gateway.chat(backend, messages, temperature=s.iter_eval_temperature,
                                  max_tokens=s.eval_max_tokens or s.gen_max_tokens,
                                  json_schema=prompts.SELF_EVAL_SCHEMA, stage=STAGE, phase="retrieval",
                                  timeout_s=s.gen_timeout_s)
        except Exception as exc:
            reason = _gateway_error_reason(exc)
            if reason in UNUSABLE_REPLY:
                return {"sufficient": False, "reason": "", "sub_question": "", "error": reason}, []
            raise
        return parse_evaluation(result.data), [CallUse.of(result, "retrieval", "self_eval")]

    def _run(self, q, ctx, gateway, backend):
        s = _settings(ctx)
        base = self.base or s.iter_base_retriever
        uses: list[CallUse] = []
        rounds: list[dict[str, Any]] = []

        answer, use = _direct(gateway, backend, q, s.gen_temperature, s.gen_max_tokens, s.gen_timeout_s,
                              s.answer_sampling())
        uses.append(use)
        last = use  # the call of the answer returned
        ev, ev_uses = self._evaluate(gateway, backend, q, answer, None, s)
        uses += ev_uses
        rounds.append({"round": 0, "query": q, "answer": answer, "eval": ev})
        context = Context()
        iterations = 0
        if ev["sufficient"]:
            stop = "sufficient"
        else:
            current = ev["sub_question"] or q
            history = {normalise_query(q), normalise_query(current)}
            lists: list[tuple[int, ...]] = []
            seen: set[int] = set()
            scores: dict[int, float] = {}
            stop = "max_rounds"
            for t in range(1, s.iter_max_rounds + 1):
                r = ctx.retrieve(base, current, backend)
                uses += r.calls
                new = [c for c in r.chunk_ids if c not in seen]
                seen.update(r.chunk_ids)
                for c, sc in r.ranked():
                    scores.setdefault(c, sc)
                lists.append(r.chunk_ids)
                context = build_context(interleave(lists), ctx.index.texts, s.token_budget, counts=ctx.index.passage_counts)
                answer, use = _generate(gateway, backend, q, context, s)
                uses.append(use)
                last = use
                ev, ev_uses = self._evaluate(gateway, backend, q, answer, context.text or EMPTY_CONTEXT, s)
                uses += ev_uses
                iterations = t
                rounds.append({"round": t, "query": current, "retrieval": r.details, "new_chunks": len(new),
                               "context": _context_trace(context, s), "answer": answer, "eval": ev})
                if ev["sufficient"]:
                    stop = "sufficient"
                    break
                nxt = ev["sub_question"]
                if not nxt:
                    stop = "no_sub_question"
                    break
                if normalise_query(nxt) in history:
                    stop = "repeated_sub_question"
                    break
                history.add(normalise_query(nxt))
                current = nxt
        trace = {"base_retriever": base, "rounds": rounds, "stop": stop}
        if iterations:
            trace["context"] = _context_trace(context, s)
            trace["context_scores"] = _scores_of(context, scores)
            trace["empty_context"] = not context.text
        return ParadigmResult.build(answer=answer, retrieved_chunk_ids=context.chunk_ids,
                                    context_tokens=context.tokens, iterations=iterations, trace=trace, uses=uses,
                                    finish_reason=last.finish_reason)


def parse_evaluation(data) -> dict:
    """{sufficient: bool, reason: str, sub_question: str} from a SELF_EVAL reply (tolerant:
    "true"/"false" strings, a missing or null sub-question, extra keys ignored)."""
    if not isinstance(data, dict):
        return {"sufficient": False, "reason": "", "sub_question": "", "error": "not_an_object"}
    raw = data.get("sufficient")
    if isinstance(raw, str):
        sufficient = raw.strip().casefold() in ("true", "yes", "1")
    else:
        sufficient = bool(raw) if raw is not None else False
    sub = data.get("sub_question")
    sub = " ".join(sub.split()) if isinstance(sub, str) else ""
    if sub.casefold() in ("none", "null", "n/a"):
        sub = ""
    reason = data.get("reason")
    return {"sufficient": sufficient, "reason": reason if isinstance(reason, str) else "", "sub_question": sub}


PARADIGMS: dict[str, Paradigm] = {
    "llm_only": LLMOnly(),
    "naive": NaiveRAG(),
    "graph": GraphRAG(),
    "hybrid": HybridRAG(),
    "iterative": IterativeRAG("iterative"),
    "iterative_naive": IterativeRAG("iterative_naive", base="naive"),
}


def get(name: str) -> Paradigm:
    """The registered paradigm ``name`` (KeyError naming the known ones)."""
    try:
        return PARADIGMS[name]
    except KeyError:
        raise KeyError(f"unknown paradigm {name!r}; known: {', '.join(PARADIGMS)}") from None


def run(name: str, query_text: str, query_vector_provider, index, gateway, generator_backend: str,
        config) -> ParadigmResult:
    """Run the registered paradigm ``name`` (see the module docstring)."""
    return get(name).run(query_text, query_vector_provider, index, gateway, generator_backend, config)
