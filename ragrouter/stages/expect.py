"""What a dry run expects the pending calls to cost, beyond what the requests themselves say.

A request's prompt is known before it is sent (counted with cl100k); three things are not:
how long the reply will be, how many rounds IterativeRAG will take, and how much context a
retriever will find. :class:`Expectations` answers each from **this store's history** when it
holds enough of it (``dry_run.history_min`` observations), else from a **prior** in the
config (``dry_run.completion_share``, ``dry_run.iterative_rounds``) or from the structure of the
work (whole chunks packed into the token budget). Every figure says which it used
(:meth:`Expectations.basis`), and the dry run keeps the upper bound (the ``max_tokens`` caps,
the maximum rounds) beside the expectation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from contextlib import contextmanager
from contextvars import ContextVar

from sqlalchemy import text

CHUNK_PARADIGMS = ("naive", "hybrid")  # contexts of whole chunks (pack(): the first that does not fit stops)


_CAP = ("COALESCE(NULLIF(CAST(params->>'max_tokens' AS BIGINT), 0), "
        "CAST(params->>'max_completion_tokens' AS BIGINT))")
_REPLY_SQL = (f"SELECT stage, model, cap, COUNT(*), AVG(completion_tokens), "
              f"SUM(LEAST(1.0, completion_tokens * 1.0 / cap)) FROM "
              f"(SELECT stage, model, completion_tokens, {_CAP} AS cap FROM llm_calls WHERE kind = 'chat') c "
              f"WHERE cap > 0 GROUP BY stage, model, cap")


class Expectations:
    """History-or-prior expectations of one store, read once per dry run."""

    def __init__(self, engine, config, lock=None):
        section = config.section("dry_run") if hasattr(config, "section") else {}
        self.history_min = max(1, int(section.get("history_min", 5)))
        self.priors = {str(k): float(v) for k, v in dict(section.get("completion_share") or {}).items()}
        self.entities_prior = section.get("entities_per_chunk")
        self.judge_prior = section.get("judge_call_share")
        rounds = section.get("iterative_rounds")
        self.rounds_prior = None if rounds is None else float(rounds)
        shares: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self._lengths: dict[tuple[str, str, int], tuple[int, float]] = {}
        from contextlib import nullcontext

        with (lock or nullcontext()), engine.connect() as conn:
            # one row per (stage, model, cap), aggregated by the store (a paper-scale ledger has
            # ~200k calls); the cap is the request's max_tokens, else max_completion_tokens
            for stage, model, cap, n, mean, share_sum in conn.execute(text(_REPLY_SQL)):
                if not cap or int(cap) <= 0:
                    continue
                self._lengths[(str(stage), str(model), int(cap))] = (int(n), float(mean))
                acc = shares[(str(stage), str(model))]
                acc[0] += int(n)
                acc[1] += float(share_sum)
            self._rounds = {str(g): (int(n), float(m or 0.0)) for g, n, m in conn.execute(text(
                "SELECT generator, COUNT(*), AVG(iterations) FROM paradigm_runs WHERE paradigm LIKE 'iterative%' "
                "GROUP BY generator")).all()}
            self._context = {(str(p), str(g)): (int(n), float(m or 0.0)) for p, g, n, m in conn.execute(text(
                "SELECT paradigm, generator, COUNT(*), AVG(context_tokens) FROM paradigm_runs "
                "WHERE context_tokens IS NOT NULL GROUP BY paradigm, generator")).all()}
            self._chunk_tokens = {int(c): float(m or 0.0) for c, m in conn.execute(text(
                "SELECT d.corpus_id, AVG(c.n_tokens) FROM chunks c JOIN documents d ON d.id = c.document_id "
                "GROUP BY d.corpus_id")).all()}
            self._extracted = {str(x): (int(n), int(e)) for x, n, e in conn.execute(text(
                "SELECT x.extractor, COUNT(*), (SELECT COUNT(*) FROM entities e WHERE e.extractor = x.extractor) "
                "FROM chunk_extractions x GROUP BY x.extractor")).all()}
            row = conn.execute(text(
                "SELECT COUNT(*), COUNT(DISTINCT llm_call_id) FROM judgments WHERE NOT is_calibration")).one()
            self._judged = (int(row[0] or 0), int(row[1] or 0))
        self._shares = {k: (n, total / n) for k, (n, total) in shares.items() if n}

    # ---------------------------------------------------------------- replies
    def share(self, stage: str, model: str) -> tuple[float, str]:
        """Expected reply length as a share of ``max_tokens`` for calls of ``model`` in ``stage``,
        and its basis: ``history:<n calls>``, ``prior`` or ``cap`` (no prior: the upper bound)."""
        n, mean = self._shares.get((stage, model), (0, 0.0))
        if n >= self.history_min:
            return mean, f"history:{n}"
        if stage in self.priors:
            return self.priors[stage], "prior"
        if "default" in self.priors:
            return self.priors["default"], "prior"
        return 1.0, "cap"

    def reply(self, stage: str, model: str, cap: int) -> tuple[int, str]:
        """Expected tokens of one reply of ``model`` in ``stage`` capped at ``cap``, and its
        basis: the mean of this store's calls with that cap (``history:<n>``), else their
        mean share of the cap in the stage (calls of one stage can have different caps: an
        answer's entity call and its generation), else the prior share, else the cap."""
        n, mean = self._lengths.get((stage, model, int(cap)), (0, 0.0))
        if n >= self.history_min:
            return int(round(min(mean, cap))), f"history:{n}"
        share, basis = self.share(stage, model)
        return int(round(cap * share)), basis

    def reply_tokens(self, stage: str, model: str, cap: int) -> int:
        """Expected tokens of one reply capped at ``cap`` (e.g. an answer a judge prompt carries)."""
        return self.reply(stage, model, cap)[0]

    def judge_call_share(self) -> tuple[float, str]:
        """Share of judgments that cost a call: refusals are judged without one and a repeated
        answer is a cache hit. This store's judgments, else ``dry_run.judge_call_share``, else 1
        (every run a call: the bound)."""
        n, calls = self._judged
        if n >= self.history_min:
            return calls / n, f"history:{n}"
        if self.judge_prior is not None:
            return min(1.0, float(self.judge_prior)), "prior"
        return 1.0, "cap"

    def entities_per_chunk(self, extractor: str) -> tuple[float, str]:
        """Distinct graph entities per extracted chunk (what the embed stage will embed after
        extraction): this store's extractions by ``extractor``, else ``dry_run.entities_per_chunk``."""
        n, entities = self._extracted.get(extractor, (0, 0))
        if n >= self.history_min:
            return entities / n, f"history:{n}"
        if self.entities_prior is not None:
            return float(self.entities_prior), "prior"
        return 0.0, "unknown"

    # ---------------------------------------------------------------- IterativeRAG
    def rounds(self, generator: str, max_rounds: int) -> tuple[float, str]:
        """Expected retrieval rounds of an iterative run: the mean of this store's iterative runs
        of ``generator``, else ``dry_run.iterative_rounds``, else ``max_rounds`` (the bound)."""
        n, mean = self._rounds.get(generator, (0, 0.0))
        if n >= min(3, self.history_min):
            return mean, f"history:{n}"
        if self.rounds_prior is not None:
            return min(float(max_rounds), self.rounds_prior), "prior"
        return float(max_rounds), "cap"

    # ---------------------------------------------------------------- retrieval
    def context_tokens(self, paradigm: str, generator: str, corpus_id: int | None, budget: int,
                       corpus_tokens: int, top_k: int, window: int) -> int:
        """Expected context tokens of one generation prompt of ``paradigm``.

        History: the mean ``context_tokens`` of this store's runs of the paradigm and generator
        (capped by today's budget). Else the structure of the context: chunk contexts pack whole
        chunks until the next does not fit (``pack``), so they hold ``floor(budget / chunk)``
        chunks of the corpus' mean chunk size (stored chunks, else the chunking window), at most
        ``top_k``; graph contexts (triples and sentences) fill the budget at a fine grain. Never
        more than the corpus holds."""
        n, mean = self._context.get((paradigm, generator), (0, 0.0))
        bound = min(budget, corpus_tokens) if corpus_tokens else budget
        if n >= self.history_min:
            return int(round(min(mean, bound)))
        base = "naive" if paradigm.startswith("iterative") else paradigm
        if base in CHUNK_PARADIGMS:
            chunk = self._chunk_tokens.get(int(corpus_id)) if corpus_id is not None else None
            chunk = chunk or float(window)
            if chunk <= 0:
                return bound
            fit = min(int(top_k) if top_k else 1 << 30, math.floor(budget / chunk))
            return int(round(min(bound, fit * chunk)))
        return bound


_CURRENT: ContextVar[Expectations | None] = ContextVar("ragrouter_dry_run_expectations", default=None)


def expectations(services) -> Expectations:
    """The dry run's :class:`Expectations` of ``services``' store (read once, memoised)."""
    return services.memo(("dry-run-expectations",),
                         lambda: Expectations(services.engine, services.config, services.db_lock))


@contextmanager
def active(exp: Expectations):
    """Make ``exp`` what :func:`expected_reply` uses while a dry run estimates."""
    token = _CURRENT.set(exp)
    try:
        yield exp
    finally:
        _CURRENT.reset(token)


def expected_reply(stage: str, model: str, cap: int) -> tuple[int, str]:
    """(expected completion tokens, basis) of one call: the active dry run's expectation,
    else the cap (an estimate made outside a dry run stays an upper bound)."""
    exp = _CURRENT.get()
    if exp is None or not cap:
        return int(cap), "cap"
    return exp.reply(stage, model, cap)


def ledger_mark(conn) -> int:
    """The newest ledger row id: calls made after it are what a run billed (:func:`compare`)."""
    return int(conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM llm_calls")).scalar() or 0)


def compare(conn, estimates, since_id: int) -> list[dict]:
    """Each (stage, model)'s dry-run estimate beside what the ledger billed after ``since_id``:
    calls, prompt, completion and total tokens, and the ratios estimate / billed (None where
    nothing was billed). Calls no estimate names (the answer stage's question embeddings for
    retrieval, local and free) are left out."""
    billed = {(str(r[0]), str(r[1])): (int(r[2]), int(r[3] or 0), int(r[4] or 0)) for r in conn.execute(text(
        "SELECT stage, model, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens) FROM llm_calls WHERE id > :i "
        "GROUP BY stage, model"), {"i": int(since_id)})}
    per: dict[tuple[str, str], dict] = {}
    for e in estimates:
        if e.model == "-":
            continue
        row = per.setdefault((e.stage, e.model), {"stage": e.stage, "model": e.model, "est_calls": 0, "est_prompt": 0,
                                                  "est_completion": 0, "max_completion": 0, "basis": set()})
        row["est_calls"] += e.calls - e.cached_calls
        row["est_prompt"] += e.prompt_tokens
        row["est_completion"] += e.completion_tokens
        row["max_completion"] += e.completion_cap
        if e.basis:
            row["basis"].add(e.basis)
    out = []
    for key, row in per.items():
        calls, pt, ct = billed.get(key, (0, 0, 0))
        row.update(basis=",".join(sorted(row["basis"])) or "-", billed_calls=calls, billed_prompt=pt,
                   billed_completion=ct)
        for key, est, got in (("calls", row["est_calls"], calls), ("prompt", row["est_prompt"], pt),
                              ("completion", row["est_completion"], ct),
                              ("tokens", row["est_prompt"] + row["est_completion"], pt + ct)):
            row[f"ratio_{key}"] = (est / got) if got else None
        out.append(row)
    return out
