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

The proposal is the slice that decides the most within the budget: whole documents picked by
the questions they carry per hour of build, the types balanced and a question over several
documents kept when all of them are (:mod:`ragrouter.decisions.slicepick`), or the first
chunks of a long document where that keeps more; never under :func:`min_chunks` chunks (the
corpus indicators the routers read need them). The slice it names is then cut for real, shrunk
(questions per type, then the last documents picked) until its exact figures fit, and what it
can decide is said per type (:func:`ragrouter.decisions.plan.detectable_gap`). When no slice
fits, :class:`BudgetError` says the budget that fits the smallest slice that keeps a question.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import shlex
from dataclasses import dataclass, field

from ragrouter.corpus.indicators import HUBNESS_K
from ragrouter.corpus.slicing import requirements, slice_dataset
from ragrouter.decisions.plan import cost_profile, detectable_gap, questions_for_gap
from ragrouter.decisions.slicepick import best_pick, value
from ragrouter.llm import tokens
from ragrouter.llm.pricing import estimate_usd
from ragrouter.stages import registry, storeio
from ragrouter.stages.base import Estimate, Scope, Unit
from ragrouter.stages.expect import active, expectations
from ragrouter.stages.services import Services
from ragrouter.stages.timing import wall_estimates

SAMPLE_PER_TYPE = 10
MAX_CANDIDATES = 30


def min_chunks() -> int:
    """The smallest slice proposed: every corpus indicator the routers read defined (hubness
    needs more chunk vectors than its k neighbours; metrics needs 3)."""
    return max(3, HUBNESS_K + 1)


class BudgetError(ValueError):
    """No slice fits the budget, or the corpus cannot be costed. ``smallest_s``: the expected
    seconds of the smallest slice that keeps a question, where one was costed."""

    def __init__(self, message: str, smallest_s: float | None = None):
        super().__init__(message)
        self.smallest_s = smallest_s


def hms(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class Proposal:
    mode: str                       # "doc" (these documents, whole) or "chunks" (the first n chunks)
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
    doc_ids: list[str] = field(default_factory=list)
    """mode "doc": the documents kept, in stored order."""
    doc_notes: list[tuple[list[str], int, float]] = field(default_factory=list)
    """(documents added together, the questions they completed, their build seconds), in the
    order they were picked."""
    decides: list[tuple[str, int, float | None]] = field(default_factory=list)
    """(type, questions, the smallest gap the rule finds on them; None: a smoke test)."""
    paradigms: int = 0
    power: float = 0.8
    smoke_needs: int | None = None
    """Questions of one type the rule needs for even a 50-point gap (said beside a smoke test)."""
    min_chunks: int = 0
    """The chunks the corpus indicators need (:func:`min_chunks`): a smaller slice is said."""

    def slice_args(self) -> dict:
        if self.mode == "doc":
            return {"doc_ids": list(self.doc_ids), "per_type": self.per_type}
        return {self.mode: self.n, "per_type": self.per_type}

    def command(self, source: str, new: str, global_opts: str = "", evidence_overlap: float = 0.75) -> str:
        if self.mode == "doc":
            picked = " ".join(f"--doc {shlex.quote(d)}" for d in self.doc_ids)
            cmd = f"python cli.py{global_opts} corpus slice {shlex.quote(source)} {shlex.quote(new)} {picked}"
        else:
            cmd = f"python cli.py{global_opts} corpus slice {shlex.quote(source)} {shlex.quote(new)} --{self.mode} {self.n}"
        if self.per_type is not None:
            cmd += f" --queries-per-type {self.per_type}"
        if evidence_overlap != 0.75:
            cmd += f" --evidence-overlap {evidence_overlap:g}"
        return cmd

    def decision_line(self) -> str:
        """What the slice can decide, per type: the smallest gap the rule finds, or a smoke test."""
        present = [(t, n, g) for t, n, g in self.decides if n]
        head = (f"what it can decide (run --until-decided, {self.paradigms} paradigms, plan's power "
                f"{self.power:g}, stated rates):")
        if not present or all(g is None for _t, _n, g in present):
            need = (f"; the rule needs about {self.smoke_needs} questions of a type for even a 50-point gap"
                    if self.smoke_needs else "")
            shown = ", ".join(f"{t} {n}" for t, n, _g in present) or "no questions"
            return f"{head} a smoke test, not a decision ({shown}{need})"
        parts = [f"{t} {n} → a gap of {round(g * 100)} points or more between the best paradigm and the rest"
                 if g is not None else f"{t} {n} → a smoke test, not a decision" for t, n, g in present]
        return f"{head} " + "; ".join(parts)

    def lines(self, source: str, new: str, global_opts: str = "", evidence_overlap: float = 0.75) -> list[str]:
        if self.mode == "doc":
            what = (f"{self.n} document{'s' if self.n != 1 else ''} ({self.chunks} chunks) chosen by the questions "
                    "they carry per hour of build")
        else:
            what = f"the first {self.n} chunks"
        per = "every question it keeps" if self.per_type is None else f"at most {self.per_type} questions per type"
        usd = "" if self.usd is None else f", US $ {self.usd:.2f}"
        kept = ", ".join(f"{t} {n}" for t, n in self.kept.items())
        w = self.whole
        out = [
            f"within {self.hours:g} h on '{source}': {what}, {per} → "
            f"{sum(self.kept.values())} questions ({kept}); expected {hms(self.seconds)} "
            f"(build {hms(self.build_s)}, questions {hms(self.questions_s)}){usd}",
        ]
        if self.doc_notes:
            shown = ", ".join(f"{' + '.join(d)} ({q} question{'s' if q != 1 else ''}, build {hms(b)})"
                              for d, q, b in self.doc_notes[:8])
            more = f", and {len(self.doc_notes) - 8} more" if len(self.doc_notes) > 8 else ""
            out.append(f"documents: {shown}{more}")
        if self.decides:
            out.append(self.decision_line())
        if self.chunks < self.min_chunks:
            out.append(f"note: {self.chunks} chunk{'s' if self.chunks != 1 else ''} in all: the corpus indicators the "
                       f"routers read need at least {self.min_chunks} (the metrics stage fails on fewer); add "
                       "documents to the corpus")
        out += [
            f"make it with: {self.command(source, new, global_opts, evidence_overlap)}",
            f"(the whole corpus: {w.get('docs')} document{'s' if w.get('docs') != 1 else ''}, {w.get('chunks')} chunks, {w.get('questions')} questions: "
            f"expected {hms(w.get('seconds', 0.0))}; time basis: {self.basis})",
        ]
        return out


def estimating_services(config, engine, command: str):
    """Services for an estimate: its gateway looks up the ledger and counts tokens, and records
    no worker run (an estimate changes nothing in the store)."""
    services = Services(config, engine, command=command)
    services.__dict__["worker_run_id"] = None  # the cached property, set: no worker_runs row
    return services


@dataclass
class _Build:
    """Each chunk's extraction estimate and tokens; the dry-run rows of the build of any chunks."""

    extract: list[Estimate]
    tokens: list[int]
    rate: float
    batch: int
    model_x: str
    model_e: str

    def extract_row(self, chunk_ids) -> Estimate:
        acc = Estimate(stage="extract", model=self.model_x)
        for k in chunk_ids:
            e = self.extract[k]
            acc.calls += e.calls
            acc.cached_calls += e.cached_calls
            acc.prompt_tokens += e.prompt_tokens
            acc.completion_tokens += e.completion_tokens
            acc.completion_cap += e.completion_cap
            acc.basis = e.basis or acc.basis
        return acc

    def embed_row(self, chunk_ids) -> Estimate:
        n = len(chunk_ids)
        entities = round(self.rate * n)
        return Estimate(stage="embed", model=self.model_e, calls=-(-n // self.batch) + -(-entities // self.batch),
                        prompt_tokens=sum(self.tokens[k] for k in chunk_ids) + 4 * entities)

    def rows(self, chunk_ids, docs: int) -> list[Estimate]:
        chunk_ids = list(chunk_ids)
        return [Estimate(stage="chunk", model="-", units=docs), self.extract_row(chunk_ids), self.embed_row(chunk_ids),
                Estimate(stage="metrics", model="-", units=1)]


def _build(services, req) -> _Build:
    """The extraction requests of every chunk (free where the ledger holds them), estimated as
    the dry run estimates them."""
    cfg = services.config
    extract = registry.all_stages()["extract"]
    exp = expectations(services)
    rate, _ = exp.entities_per_chunk(storeio.extractor_key(cfg))
    out = _Build([], [], rate, int(cfg.backend(cfg.role("embedder")).get("batch_size", 32)),
                 storeio.model_key(cfg, "extractor"), storeio.model_key(cfg, "embedder"))
    with active(exp):
        for i, text_ in enumerate(req.chunk_texts):
            acc = Estimate(stage="extract", model=out.model_x)
            for e in extract.estimate(None, [Unit(f"chunk:{i}", {"text": text_})], services):
                acc.calls += e.calls
                acc.cached_calls += e.cached_calls
                acc.prompt_tokens += e.prompt_tokens
                acc.completion_tokens += e.completion_tokens
                acc.completion_cap += e.completion_cap
                acc.basis = e.basis or acc.basis
            out.extract.append(acc)
            out.tokens.append(tokens.count(text_))
    return out


def _doc_seconds(config, services, build: _Build, spans: list[range]) -> tuple[list[float], float]:
    """(build seconds each document adds, the build's fixed seconds): one dry run whose rows are
    each document's extraction and embedding, after a one-call row of each model that takes its
    load (and the chunk and metrics stages, timed once)."""
    rows = [Estimate(stage="chunk", model="-", units=len(spans)), Estimate(stage="extract", model=build.model_x, calls=1)]
    rows += [build.extract_row(span) for span in spans]
    rows.append(Estimate(stage="embed", model=build.model_e, calls=1))
    rows += [build.embed_row(span) for span in spans]
    rows.append(Estimate(stage="metrics", model="-", units=1))
    secs = [float(r["expected_wall_s"]) for r in wall_estimates(config, rows, services)["stages"]]
    n = len(spans)
    per_doc = [secs[2 + i] + secs[3 + n + i] for i in range(n)]
    return per_doc, secs[0] + secs[1] + secs[2 + n] + secs[-1]


def _sample_queries(services, source: str) -> list[int]:
    from sqlalchemy import text

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
    """The slice of stored corpus ``source`` (its :class:`Dataset` ``ds``) that the configured
    backends are expected to finish within ``hours`` and that decides the most (see the module
    doc); :class:`BudgetError` when none fits."""
    window, overlap = int(config.get("chunking.window")), int(config.get("chunking.overlap"))
    req = requirements(ds, window, overlap, evidence_overlap)
    if not req.chunk_texts:
        raise BudgetError(f"corpus '{source}' has no text to slice")
    doc_prefix, acc = [], 0
    for n in req.doc_chunks:
        acc += n
        doc_prefix.append(acc)  # chunks of the first i + 1 documents
    spans = [range(end - n, end) for end, n in zip(doc_prefix, req.doc_chunks)]
    services = estimating_services(config, engine, "corpus slice --for-budget")
    try:
        per_q, usd_q, fixed_s, basis = question_costs(services, source)
        build = _build(services, req)
        cache: dict = {}

        def build_of(key, chunk_ids, docs: int) -> tuple[float, float | None]:
            if key not in cache:
                w = wall_estimates(config, build.rows(chunk_ids, docs), services)
                cache[key] = (float(w["expected_wall_s"]), w["usd"])
            return cache[key]

        def prefix(c: int) -> tuple[float, float | None]:
            docs = min(len(doc_prefix), bisect.bisect_left(doc_prefix, c) + 1)  # the documents c chunks touch
            return build_of(("chunks", c), range(c), docs)

        def docset(ids) -> tuple[float, float | None]:
            ids = sorted(ids)
            return build_of(("docs", tuple(ids)), [k for i in ids for k in spans[i]], len(ids))

        budget_s = hours * 3600.0
        total_chunks = len(req.chunk_texts)
        floor = min(min_chunks(), total_chunks)
        n_docs = len(doc_prefix)

        def usd_of(b_usd, n: int):
            return None if b_usd is None and usd_q is None else (b_usd or 0.0) + n * (usd_q or 0.0)

        by_chunks = None  # the first chunks in stored order: a long document cut
        for c in _candidates(total_chunks):
            if c < floor:
                continue
            b_s, b_usd = prefix(c)
            room = budget_s - b_s - fixed_s
            n_max = int(math.floor(room / per_q)) if per_q > 0 else (1 << 30) if room >= 0 else -1
            fit = _fit(req.kept(chunks=c), n_max)
            if fit is None:
                continue
            k, n = fit
            got = {t: (v if k is None else min(k, v)) for t, v in req.kept(chunks=c).items()}
            if by_chunks is None or (value(got), n, c) > (value(by_chunks.kept), sum(by_chunks.kept.values()),
                                                          by_chunks.n):
                by_chunks = Proposal("chunks", c, k, c, got, b_s + fixed_s + n * per_q, b_s, fixed_s + n * per_q,
                                     usd_of(b_usd, n), hours, basis=basis)
        by_docs = None
        doc_s: list[float] = []
        build_fixed = 0.0
        if n_docs > 1:  # whole documents, picked by the questions they carry per hour of build
            doc_s, build_fixed = _doc_seconds(config, services, build, spans)
            pick = best_pick(doc_s, req.need_sets, req.qtypes, per_q, fixed_s + build_fixed, budget_s,
                             req.doc_chunks, floor)
            if pick is not None:
                b_s, b_usd = docset(pick.docs)
                n = sum(pick.counts.values())
                ids = [ds.documents[i].external_id for i in sorted(pick.docs)]
                by_docs = Proposal("doc", len(ids), pick.cap, sum(req.doc_chunks[i] for i in pick.docs),
                                   {t: pick.counts.get(t, 0) for t in req.kept(docs=n_docs)},
                                   b_s + fixed_s + n * per_q, b_s, fixed_s + n * per_q, usd_of(b_usd, n), hours,
                                   basis=basis, doc_ids=ids,
                                   doc_notes=[([ds.documents[i].external_id for i in docs], n_q,
                                                sum(doc_s[i] for i in docs)) for docs, n_q in pick.bundles])
        best = by_docs
        if by_chunks is not None and (best is None or (value(by_chunks.kept), sum(by_chunks.kept.values()))
                                      > (value(best.kept), sum(best.kept.values()))):
            best = by_chunks
        whole_b, _ = prefix(total_chunks)
        whole = {"docs": n_docs, "chunks": total_chunks, "questions": len(ds.questions),
                 "seconds": whole_b + fixed_s + len(ds.questions) * per_q}
        if best is None:
            raise _none_fits(source, hours, basis, req, floor, fixed_s + per_q, prefix, docset, doc_s, build_fixed)
        _trim(best, ds, req, budget_s, fixed_s, per_q, prefix, docset, usd_of, window, overlap, evidence_overlap,
              slice_dataset)
        best.whole = whole
        best.min_chunks = min_chunks()
        _decides(best, config)
        return best
    finally:
        services.finish()


def _none_fits(source, hours, basis, req, floor, one_q_s, prefix, docset, doc_s, build_fixed) -> BudgetError:
    """No slice fits: the smallest that keeps a question, its expected time, as a BudgetError."""
    options = []
    small = min((max(n, floor) for n in req.need_chunks if n is not None), default=None)
    if small is not None:
        options.append((prefix(small)[0] + one_q_s, f"--chunks {small}"))
    if doc_s:
        by_cost = sorted(range(len(doc_s)), key=lambda i: doc_s[i])

        def grown(g: frozenset[int]) -> frozenset[int]:  # up to the chunks the indicators need
            out = set(g)
            for i in by_cost:
                if sum(req.doc_chunks[j] for j in out) >= floor:
                    break
                out.add(i)
            return frozenset(out)

        sets = {grown(n) for n in req.need_sets if n}
        if sets:
            cheapest = min(sets, key=lambda g: (sum(doc_s[i] for i in g), sorted(g)))
            options.append((docset(cheapest)[0] + one_q_s, f"{len(cheapest)} document{'s' if len(cheapest) > 1 else ''}"))
    if not options:
        return BudgetError(f"no slice of '{source}' keeps a question (none records evidence that a slice can hold): "
                           "slice it by --docs yourself")
    seconds, what = min(options)
    need_h = math.ceil(seconds / 360.0) / 10  # the budget that fits, in tenths of an hour
    return BudgetError(f"no slice of '{source}' fits in {hours:g} h: the smallest that keeps a question ({what}, "
                       f"1 question) is expected to take {hms(seconds)} (time basis: {basis}); --for-budget "
                       f"{need_h:g} fits it", smallest_s=seconds)


def _trim(best: Proposal, ds, req, budget_s, fixed_s, per_q, prefix, docset, usd_of, window, overlap,
          evidence_overlap, slice_dataset) -> None:
    """Cut the proposal for real and shrink it (questions per type, then the last document
    picked) until its exact figures are within the budget."""
    index = {d.external_id: i for i, d in enumerate(ds.documents)}
    cap0 = best.per_type
    while True:
        part = slice_dataset(ds, **best.slice_args(), window=window, overlap_tokens=overlap,
                             evidence_overlap=evidence_overlap)
        n = len(part.questions)
        if best.mode == "doc":
            best.chunks = sum(req.doc_chunks[index[d]] for d in best.doc_ids)
            b_s, b_usd = docset([index[d] for d in best.doc_ids])
        else:
            b_s, b_usd = prefix(best.chunks)
        seconds = b_s + fixed_s + n * per_q
        counts = part.qtype_counts()
        if seconds <= budget_s:
            break
        if best.per_type is None and max(counts.values()) > 1:
            best.per_type = max(counts.values()) - 1
        elif best.per_type is not None and best.per_type > 1:
            best.per_type -= 1
        elif best.mode == "doc" and len(best.doc_ids) > 1:
            gone = set(best.doc_notes.pop()[0])
            best.doc_ids = [d for d in best.doc_ids if d not in gone]
            best.n, best.per_type = len(best.doc_ids), cap0
        else:
            break
    best.kept, best.build_s = counts, b_s
    best.seconds, best.questions_s = seconds, fixed_s + n * per_q
    best.usd = usd_of(b_usd, n)


def _decides(best: Proposal, config) -> None:
    """What the slice can decide per type (:func:`ragrouter.decisions.plan.detectable_gap`)."""
    k = len(list(config.get("paradigms.enabled")))
    best.paradigms = k
    best.power = float(config.get("decisions.plan_power", 0.8))
    best.decides = [(t, n, detectable_gap(config, n, k) if n else None) for t, n in best.kept.items()]
    if all(g is None for _t, _n, g in best.decides):
        best.smoke_needs = questions_for_gap(config, 0.5, k)


# ------------------------------------------------------------------------ run --budget-*


def build_over_budget(config, services, estimates, budget, corpus: str | None) -> str | None:
    """One line when the dry-run ``estimates`` of a run's corpus build (the stages before
    answer) exceed ``budget`` (``decisions.driver.Budget``): what it is expected to take or
    bill, over which flag, and the slice that would fit; None when it fits."""
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
