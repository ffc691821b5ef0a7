"""Budgets in hours: the largest slice of a corpus the configured backends finish in time
(``corpus slice --for-budget``), and whether a run's corpus build fits its budget
(``run --budget-*``).

Both use the dry run's time model (:mod:`ragrouter.stages.timing`: this store's history of each
model, else this machine's probe, else the config's priors) on the dry run's estimates
(:mod:`ragrouter.stages.expect`). A slice of ``c`` chunks keeping ``n`` questions costs

* its **build**: chunk, extract and embed of its ``c`` chunks and the corpus indicators —
  estimated on the very chunks (their extraction requests, free where the ledger holds them),
  timed as one dry run times them, model loads included;
* its **questions**: ``n`` × one question's answer and judge calls for every enabled paradigm
  and generator (:func:`ragrouter.decisions.plan.cost_profile` on a sample of up to
  ``SAMPLE_PER_TYPE`` stored questions per type: their dry run, else this store's billed calls)
  and the score stage's runs; plus the fixed costs (model loads, stage starts) once.

The proposal maximises the questions kept, then the documents (whole documents where they
keep as many questions as a cut one, else chunks): the largest ``--docs D --queries-per-type K`` (``--chunks C`` …) whose expected wall
time is within the budget, never under :func:`min_chunks` chunks (the corpus indicators the
routers read need them). The slice it names is then cut for real and its own figures printed.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from dataclasses import dataclass, field

from ragrouter.stages.base import Estimate, Scope, Unit

SAMPLE_PER_TYPE = 10
MAX_CANDIDATES = 30


def min_chunks() -> int:
    """The smallest slice proposed: every corpus indicator the routers read defined (hubness
    needs more chunk vectors than its k neighbours; metrics needs 3)."""
    from ragrouter.corpus.indicators import HUBNESS_K

    return max(3, HUBNESS_K + 1)


class BudgetError(ValueError):
    """No slice fits the budget, or the corpus cannot be costed."""


def hms(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class Costs:
    """Seconds (and US $, None where unpriced) of a slice as a function of its chunks and questions."""

    build: list[tuple[float, float | None]]
    """Per prefix of ``i + 1`` chunks: (build seconds, build US $)."""
    question_s: float
    question_usd: float | None
    fixed_s: float
    basis: str

    def seconds(self, chunks: int, questions: int) -> float:
        return self.build[chunks - 1][0] + self.fixed_s + questions * self.question_s

    def usd(self, chunks: int, questions: int) -> float | None:
        b = self.build[chunks - 1][1]
        if b is None and self.question_usd is None:
            return None
        return (b or 0.0) + questions * (self.question_usd or 0.0)


@dataclass
class Proposal:
    mode: str                       # "docs" or "chunks"
    n: int                          # documents or chunks
    per_type: int | None            # None: every question the slice keeps
    chunks: int
    kept: dict[str, int]
    seconds: float
    build_s: float
    questions_s: float
    usd: float | None
    hours: float
    whole: dict = field(default_factory=dict)
    basis: str = ""

    def slice_args(self) -> dict:
        return {self.mode: self.n, "per_type": self.per_type}

    def command(self, source: str, new: str, global_opts: str = "", evidence_overlap: float = 0.75) -> str:
        cmd = f"python cli.py{global_opts} corpus slice {source} {new} --{self.mode} {self.n}"
        if self.per_type is not None:
            cmd += f" --queries-per-type {self.per_type}"
        if evidence_overlap != 0.75:
            cmd += f" --evidence-overlap {evidence_overlap:g}"
        return cmd

    def lines(self, source: str, new: str, global_opts: str = "", evidence_overlap: float = 0.75) -> list[str]:
        what = (f"{self.n} document{'s' if self.n != 1 else ''} ({self.chunks} chunks)" if self.mode == "docs"
                else f"the first {self.n} chunks")
        per = "every question it keeps" if self.per_type is None else f"at most {self.per_type} questions per type"
        usd = "" if self.usd is None else f", US $ {self.usd:.2f}"
        kept = ", ".join(f"{t} {n}" for t, n in self.kept.items())
        w = self.whole
        return [
            f"within {self.hours:g} h on '{source}': {what}, {per} → "
            f"{sum(self.kept.values())} questions ({kept}); expected {hms(self.seconds)} "
            f"(build {hms(self.build_s)}, questions {hms(self.questions_s)}){usd}",
            f"make it with: {self.command(source, new, global_opts, evidence_overlap)}",
            f"(the whole corpus: {w.get('docs')} document{'s' if w.get('docs') != 1 else ''}, {w.get('chunks')} chunks, {w.get('questions')} questions: "
            f"expected {hms(w.get('seconds', 0.0))}; time basis: {self.basis})",
        ]


def estimating_services(config, engine, command: str):
    """Services for an estimate: its gateway looks up the ledger and counts tokens, and records
    no worker run (an estimate changes nothing in the store)."""
    from ragrouter.stages.services import Services

    services = Services(config, engine, command=command)
    services.__dict__["worker_run_id"] = None  # the cached property, set: no worker_runs row
    return services


def _prefix_estimates(services, req, doc_prefix: list[int]) -> list[list[Estimate]]:
    """Per chunk prefix (1 … all chunks): the dry-run rows of its build."""
    from ragrouter.corpus import storeio
    from ragrouter.llm import tokens
    from ragrouter.stages import registry
    from ragrouter.stages.expect import active, expectations

    cfg = services.config
    extract = registry.all_stages()["extract"]
    model_x = storeio.model_key(cfg, "extractor")
    model_e = storeio.model_key(cfg, "embedder")
    exp = expectations(services)
    rate, _ = exp.entities_per_chunk(storeio.extractor_key(cfg))
    batch = int(cfg.backend(cfg.role("embedder")).get("batch_size", 32))
    acc = Estimate(stage="extract", model=model_x)
    chunk_tokens = 0
    out = []
    with active(exp):
        for i, text_ in enumerate(req.chunk_texts):
            for e in extract.estimate(None, [Unit(f"chunk:{i}", {"text": text_})], services):
                acc.calls += e.calls
                acc.cached_calls += e.cached_calls
                acc.prompt_tokens += e.prompt_tokens
                acc.completion_tokens += e.completion_tokens
                acc.completion_cap += e.completion_cap
                acc.basis = e.basis or acc.basis
            chunk_tokens += tokens.count(text_)
            n = i + 1
            entities = round(rate * n)
            embed = Estimate(stage="embed", model=model_e, calls=-(-n // batch) + -(-entities // batch),
                             prompt_tokens=chunk_tokens + 4 * entities)
            docs = min(len(doc_prefix), bisect.bisect_left(doc_prefix, n) + 1)  # the documents n chunks touch
            out.append([Estimate(stage="chunk", model="-", units=docs), dataclasses.replace(acc), embed,
                        Estimate(stage="metrics", model="-", units=1)])
    return out


def _sample_queries(services, source: str) -> list[int]:
    from sqlalchemy import text

    from ragrouter.corpus import storeio

    with services.db_lock, services.engine.connect() as conn:
        cid = storeio.corpus_ids(conn, source)[0][0]
        rows = conn.execute(text("SELECT id, qtype FROM queries WHERE corpus_id = :c AND status = 'accepted' "
                                 "AND origin IN ('imported', 'generated', 'human-reviewed') ORDER BY id"),
                            {"c": cid}).all()
    picked: dict[str, list[int]] = {}
    for qid, qtype in rows:
        got = picked.setdefault(str(qtype), [])
        if len(got) < SAMPLE_PER_TYPE:
            got.append(int(qid))
    return [q for ids in picked.values() for q in ids]


def question_costs(services, source: str) -> tuple[float, float | None, float, str]:
    """(seconds per question, US $ per question, fixed seconds, basis) of answering, judging and
    scoring one question of ``source`` by every enabled paradigm and generator."""
    from ragrouter.decisions.plan import cost_profile
    from ragrouter.stages.timing import wall_estimates

    cfg = services.config
    paradigms = list(cfg.get("paradigms.enabled"))
    sample = _sample_queries(services, source)
    if not sample:
        raise BudgetError(f"corpus '{source}' has no accepted questions: nothing to slice for a budget")
    prof = cost_profile(services, Scope(corpus=source, config=cfg), sample, paradigms)
    if prof["basis"].startswith("unknown"):
        raise BudgetError(f"cannot time the questions of '{source}': {prof['basis']}")
    runs = len(paradigms) * len(cfg.generators())
    one = wall_estimates(cfg, [Estimate(stage="score", model="-", units=runs * 10)], services)["expected_wall_s"]
    two = wall_estimates(cfg, [Estimate(stage="score", model="-", units=runs * 20)], services)["expected_wall_s"]
    score_per_q = max(0.0, (two - one) / 10)
    score_fixed = max(0.0, 2 * one - two)
    per_q = prof["wall_s"] * len(paradigms) + score_per_q
    usd = None if prof["usd"] is None else prof["usd"] * len(paradigms)
    return per_q, usd, prof["fixed_s"] + score_fixed, f"answer and judge: {prof['basis']}"


def _candidates(total: int) -> list[int]:
    if total <= MAX_CANDIDATES:
        return list(range(1, total + 1))
    grid = {1, total}
    for i in range(MAX_CANDIDATES):
        grid.add(max(1, round(total ** (i / (MAX_CANDIDATES - 1)))))  # geometric: small slices finely
        grid.add(max(1, round(total * (i + 1) / MAX_CANDIDATES)))
    return sorted(grid)


def _fit(kept: dict[str, int], n_max: int) -> tuple[int | None, int] | None:
    """(questions per type — None: all —, questions) of the most questions within ``n_max``."""
    total = sum(kept.values())
    if total == 0 or n_max < 1:
        return None
    if total <= n_max:
        return None, total
    best = None
    for k in range(1, max(kept.values()) + 1):
        n = sum(min(k, v) for v in kept.values())
        if n > n_max:
            break
        best = (k, n)
    return best


def propose(config, engine, source: str, ds, hours: float, evidence_overlap: float = 0.75, echo=None) -> Proposal:
    """The largest slice of stored corpus ``source`` (its :class:`Dataset` ``ds``) that the
    configured backends are expected to finish within ``hours`` (see the module doc)."""
    from ragrouter.corpus.slicing import requirements, slice_dataset
    from ragrouter.stages.timing import wall_estimates

    window, overlap = int(config.get("chunking.window")), int(config.get("chunking.overlap"))
    req = requirements(ds, window, overlap, evidence_overlap)
    if not req.chunk_texts:
        raise BudgetError(f"corpus '{source}' has no text to slice")
    doc_prefix, acc = [], 0
    for n in req.doc_chunks:
        acc += n
        doc_prefix.append(acc)  # chunks of the first i + 1 documents
    services = estimating_services(config, engine, "corpus slice --for-budget")
    try:
        per_q, usd_q, fixed_s, basis = question_costs(services, source)
        rows = _prefix_estimates(services, req, doc_prefix)
        build: dict[int, tuple[float, float | None]] = {}

        def build_of(c: int) -> tuple[float, float | None]:
            if c not in build:
                w = wall_estimates(config, rows[c - 1], services)
                build[c] = (float(w["expected_wall_s"]), w["usd"])
            return build[c]

        budget_s = hours * 3600.0
        total_chunks = len(req.chunk_texts)

        floor = min(min_chunks(), total_chunks)

        def search(mode: str) -> Proposal | None:
            best = None
            points = _candidates(len(doc_prefix)) if mode == "docs" else _candidates(total_chunks)
            for p in points:
                chunks = doc_prefix[p - 1] if mode == "docs" else p
                if chunks < floor:
                    continue
                b_s, b_usd = build_of(chunks)
                room = budget_s - b_s - fixed_s
                n_max = int(math.floor(room / per_q)) if per_q > 0 else (1 << 30) if room >= 0 else -1
                kept = req.kept(docs=p) if mode == "docs" else req.kept(chunks=p)
                fit = _fit(kept, n_max)
                if fit is None:
                    continue
                k, n = fit
                if best is None or (n, p) > (sum(best.kept.values()), best.n):
                    got = {t: (v if k is None else min(k, v)) for t, v in kept.items()}
                    usd = None if b_usd is None and usd_q is None else (b_usd or 0.0) + n * (usd_q or 0.0)
                    best = Proposal(mode, p, k, chunks, got, b_s + fixed_s + n * per_q, b_s, fixed_s + n * per_q,
                                    usd, hours, basis=basis)
            return best

        by_docs = search("docs") if len(doc_prefix) > 1 else None
        by_chunks = search("chunks")  # whole documents where they keep as many questions
        best = by_docs
        if by_chunks is not None and (best is None or sum(by_chunks.kept.values()) > sum(best.kept.values())):
            best = by_chunks
        whole_b, _ = build_of(total_chunks)
        whole = {"docs": len(doc_prefix), "chunks": total_chunks, "questions": len(ds.questions),
                 "seconds": whole_b + fixed_s + len(ds.questions) * per_q}
        if best is None:
            small = min((max(n, floor) for n in req.need_chunks if n is not None), default=None)
            if small is None:
                raise BudgetError(f"no slice of '{source}' keeps a question (none records evidence that a slice "
                                  "can hold): slice it by --docs yourself")
            s, _ = build_of(small)
            raise BudgetError(f"no slice of '{source}' fits in {hours:g} h: the smallest that keeps a question "
                              f"(--chunks {small}, 1 question) is expected to take {hms(s + fixed_s + per_q)} "
                              f"(time basis: {basis}); raise the budget, or use faster backends")
        # the slice itself: the figures of what the command will make
        while True:
            part = slice_dataset(ds, **best.slice_args(), window=window, overlap_tokens=overlap,
                                 evidence_overlap=evidence_overlap)
            n = len(part.questions)
            seconds = build_of(min(best.chunks, total_chunks))[0] + fixed_s + n * per_q
            if seconds <= budget_s or not best.per_type or best.per_type <= 1:
                break
            best.per_type -= 1
        best.kept = part.qtype_counts()
        best.seconds, best.questions_s = seconds, fixed_s + n * per_q
        b_usd = build_of(best.chunks)[1]
        best.usd = None if b_usd is None and usd_q is None else (b_usd or 0.0) + n * (usd_q or 0.0)
        best.whole = whole
        return best
    finally:
        services.finish()


# ------------------------------------------------------------------------ run --budget-*


def build_over_budget(config, services, estimates, budget, corpus: str | None) -> str | None:
    """One line when the dry-run ``estimates`` of a run's corpus build (the stages before
    answer) exceed ``budget`` (``decisions.driver.Budget``): what it is expected to take or
    bill, over which flag, and the slice that would fit; None when it fits."""
    from ragrouter.stages.timing import wall_estimates

    timed = wall_estimates(config, estimates, services)
    names = list(dict.fromkeys(e.stage for e in estimates if e.calls or e.units))  # the stages with work
    seconds, usd = float(timed["expected_wall_s"]), timed["usd"]
    tokens = sum(int(e.prompt_tokens) + int(e.completion_tokens) for e in estimates if e.model != "-")
    chunks = sum(int(e.calls) for e in estimates if e.stage == "extract")  # one extraction call a chunk
    share = None
    if budget.hours is not None and seconds > budget.hours * 3600:
        over = f"expected to take {hms(seconds)}, over --budget-hours {budget.hours:g}"
    elif budget.tokens is not None and tokens > budget.tokens:
        over = f"expected to bill {tokens:,} tokens, over --budget-tokens {budget.tokens}"
        share = budget.tokens / tokens
    elif budget.usd is not None and usd is not None and usd > budget.usd:
        over = f"expected to cost US $ {usd:.2f}, over --budget-usd {budget.usd:g}"
        share = budget.usd / usd
    else:
        return None
    name = corpus or "CORPUS"
    if share is None:
        cut = f"python cli.py corpus slice {name} NEW --for-budget {budget.hours:g} proposes a slice that fits"
    elif int(chunks * share) >= 1:
        k = int(chunks * share)
        cut = f"a slice of at most {k} of its {chunks} chunks fits the build (python cli.py corpus slice {name} NEW " \
              f"--chunks {k})"
    else:
        return (f"the corpus build alone ({', '.join(names)}) is {over}: nothing was run; not one of its {chunks} "
                "chunks fits: raise the budget")
    return (f"the corpus build alone ({', '.join(names)}) is {over}: nothing was run; {cut}, then run on NEW; "
            "or raise the budget")


def spent_since(services, mark: int) -> tuple[int, float]:
    """(tokens, US $) the ledger billed after row ``mark`` (``stages.expect.ledger_mark``), at
    each model's price (unpriced models cost nothing)."""
    from sqlalchemy import text

    from ragrouter.llm.pricing import estimate_usd

    with services.db_lock, services.engine.connect() as conn:
        rows = conn.execute(text("SELECT model, SUM(prompt_tokens), SUM(completion_tokens) FROM llm_calls "
                                 "WHERE id > :m GROUP BY model"), {"m": int(mark)}).all()
    tokens, usd = 0, 0.0
    for model, pt, ct in rows:
        tokens += int(pt or 0) + int(ct or 0)
        try:
            usd += estimate_usd(services.config, str(model), int(pt or 0), int(ct or 0)) or 0.0
        except Exception:  # noqa: BLE001 - a model no backend prices costs nothing here
            pass
    return tokens, usd
