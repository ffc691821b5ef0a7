"""Judge calibration: answers whose label is known by construction, and how a judge agrees.

Every label, table and router rests on the LLM-as-a-judge, so a user must be able to see how
far to trust a judge. This module builds, from any imported queries with gold answers, a
*calibration set* of candidate answers whose true label follows from how they were made —
no LLM is involved in making them — and measures a judge against it (agreement per true
label, confusion matrix, Cohen's kappa).

How the cases are made — the case kinds, their rules and their limits — is described in
:mod:`ragrouter.evaluation.calibration_cases`.

Storage
    A source query gets one *mirror* query row (``origin = status = 'calibration'``, the same
    corpus, type, question and gold; ``external_id = 'calib:<source external id>'``) and each
    case is a ``paradigm_runs`` row on it: ``paradigm = 'calibration'``, ``generator`` = the
    construction version :data:`VERSION`, ``config_hash`` = the case kind, ``answer`` = the
    candidate answer, zero tokens, and ``config`` = {kind, true_label, rule, source_query_id,
    version}. The mirror keeps the cases out of everything that reads accepted queries (the
    judge and score stages, the paper's tables, the routers). Judgments of cases are ordinary
    ``judgments`` rows with ``is_calibration = true`` (``v_judgment`` leaves them out);
    ``v_judge_calibration`` aggregates them per judge and true label.

Selection
    :func:`select_sources` takes the imported queries (of one corpus, or all) that yield at
    least one correct and one not-correct case (a short gold such as "5:30 PM" does: gold,
    paraphrase, refusal, coarsened, other_gold, altered), ordered by a stable hash of their
    external id within each query type — first those with two cases of every label (a
    multi-clause gold), then the others — and interleaves the types (factual, reasoning,
    summary, then questions marked unanswerable as a group of their own) up to ``n``. The same
    store and ``n`` always give the same set; a larger ``n`` extends a smaller one.

Judging
    A case is judged exactly like a run (:class:`CalibrationStage`): the same prompt, and the
    same rules without a call (:func:`ragrouter.evaluation.judge.rule_verdict`) — on an
    answerable question the model is still asked about a refusal (its verdict is kept as
    ``raw_label``, the ``model`` variant), but the stored label is the rule's, as the judge
    stage's would be.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Iterable

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine

from ragrouter.db import models
from ragrouter.db.engine import write_lock
from ragrouter.db.values import json_value
from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.agreement import (  # re-exported: callers and tests use them from here
    JudgeFigures,
    binary_figures,
    cohen_kappa,
    confusion,
    kappa_from_confusion,
    kappa_interval,
)
from ragrouter.evaluation.calibration_cases import (  # re-exported: callers and tests use them from here
    KINDS,
    OTHER_GOLD_MAX_JACCARD,
    PARAPHRASE_LEADS,
    REFUSALS,
    SWAPS,
    VERSION,
    Case,
    Pool,
    Source,
    altered,
    build_cases,
    case_messages,
    coarsen,
    content_words,
    contradict,
    extra_clause,
    first_clause,
    jaccard,
    paraphrase,
    stable_hash,
)
from ragrouter.evaluation.calibration_render import render, render_variants  # re-exported
from ragrouter.evaluation.stages import JudgeStage, gate_f1
from ragrouter.stages import runner, storeio
from ragrouter.stages.base import Estimate, Scope, Stage, Unit

__all__ = [
    # defined here
    "LABELS", "ORIGIN", "PARADIGM", "STAGE", "STATUS", "CalibrationError", "CalibrationSet", "CalibrationStage",
    "JudgeFigures", "VARIANTS", "binary_figures", "cached_subset", "case_labels", "relabel", "variant_figures", "cohen_kappa", "confusion", "ensure_set", "figures",
    "judge_set", "kappa_from_confusion", "kappa_interval", "load_sources", "render", "render_variants", "resolve_judges",
    "select_sources",
    # from calibration_cases
    "KINDS", "OTHER_GOLD_MAX_JACCARD", "PARAPHRASE_LEADS", "REFUSALS", "SWAPS", "VERSION", "Case", "Pool",
    "Source", "altered", "build_cases", "case_messages", "coarsen", "content_words", "contradict", "extra_clause",
    "first_clause",
    "jaccard", "paraphrase", "stable_hash",
]

PARADIGM = "calibration"
ORIGIN = STATUS = "calibration"
STAGE = "calibrate"
LABELS = jd.LABELS  # ("correct", "incorrect", "incomplete")


class CalibrationError(ValueError):
    """The calibration set cannot be built or judged; the message says why and what to do."""


# --------------------------------------------------------------------------- the store

def load_sources(conn, corpus: str | None = None) -> list[Source]:
    """Imported queries with a non-empty gold answer (of one corpus, or all), with their
    evidence text (the dataset's evidence, else the text of their supporting documents) and
    whether they are marked unanswerable."""
    sql = ("SELECT q.id, q.external_id, q.corpus_id, q.qtype, q.question, q.answer, q.hops, q.evidence, "
           "q.supporting_doc_ids, COALESCE(q.unanswerable, FALSE) FROM queries q "
           "JOIN corpora c ON c.id = q.corpus_id WHERE q.origin = 'imported' AND TRIM(q.answer) <> ''")
    params = {}
    if corpus:
        params["cid"] = storeio.corpus_ids(conn, corpus)[0][0]
        sql += " AND q.corpus_id = :cid"
    rows = conn.execute(text(sql + " ORDER BY q.id"), params).all()
    docs: dict[tuple[int, str], str] = {}
    wanted = {(int(r[2]), str(d)) for r in rows if not _json(r[7]) for d in _json(r[8])}
    if wanted:
        for cid in sorted({c for c, _ in wanted}):
            for ext, body in conn.execute(text("SELECT external_id, text FROM documents WHERE corpus_id = :c"),
                                          {"c": cid}).all():
                if (cid, str(ext)) in wanted:
                    docs[(cid, str(ext))] = body
    out = []
    for r in rows:
        evidence = [str(e) for e in _json(r[7]) if str(e).strip()]
        context = evidence or [docs[(int(r[2]), str(d))] for d in _json(r[8]) if (int(r[2]), str(d)) in docs]
        out.append(Source(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5], r[6], tuple(context), bool(r[9])))
    return out


def _json(value) -> list:
    """A JSON list column's items ([] for NULL or anything but a list)."""
    value = json_value(value, [])
    return list(value) if isinstance(value, (list, tuple)) else []


def select_sources(sources: list[Source], n: int, pool: Pool | None = None) -> list[tuple[Source, list[Case]]]:
    """Up to ``n`` sources with a correct and a not-correct case, types interleaved (see module doc)."""
    if n < 1:
        raise CalibrationError(f"--n must be at least 1 (got {n})")
    pool = pool or Pool(sources)
    built = {s.id: build_cases(s, pool) for s in sources}
    ordered = sorted((s for s in sources if usable(built[s.id])), key=lambda s: stable_hash("select", s.external_id))
    # rich sources first (two cases of every label, as a multi-clause gold gives), then the others
    # (short golds); the sequence does not depend on n, so a larger n extends a smaller one
    sequence = _interleave([s for s in ordered if rich(built[s.id])]) + \
        _interleave([s for s in ordered if not rich(built[s.id])])
    return [(s, built[s.id]) for s in sequence[:n]]


def _interleave(sources: list[Source]) -> list[Source]:
    """factual, reasoning, summary, (other types by name), unanswerable, factual, …"""
    by_type: dict[str, list[Source]] = defaultdict(list)
    for s in sources:
        by_type[UNANSWERABLE if s.unanswerable else s.qtype].append(s)
    first = ("factual", "reasoning", "summary")
    order = [t for t in first if t in by_type] + \
        sorted(t for t in by_type if t not in first and t != UNANSWERABLE) + \
        ([UNANSWERABLE] if UNANSWERABLE in by_type else [])
    out = []
    for i in range(max((len(v) for v in by_type.values()), default=0)):
        out += [by_type[t][i] for t in order if i < len(by_type[t])]
    return out


UNANSWERABLE = "unanswerable"


def usable(cases: list[Case]) -> bool:
    """A source is selected when its cases include a correct and a not-correct one."""
    labels = {c.true_label for c in cases}
    return "correct" in labels and bool(labels - {"correct"})


def rich(cases: list[Case]) -> bool:
    """At least two cases of every label: such sources are taken first."""
    return all(sum(c.true_label == lab for c in cases) >= 2 for lab in LABELS)


@dataclasses.dataclass
class CalibrationSet:
    """What :func:`ensure_set` built: the case run ids, in source then kind order."""

    run_ids: list[int]
    sources: list[int]
    new_cases: int
    cases_by_label: dict[str, int]


def ensure_set(engine: Engine, *, n: int = 10, corpus: str | None = None) -> CalibrationSet:
    """Build (idempotently) the calibration cases of ``n`` sources and return their run ids."""
    with write_lock(engine), engine.connect() as conn:
        sources = load_sources(conn, corpus)
    if not sources:
        where = f"corpus '{corpus}'" if corpus else "the store"
        raise CalibrationError(f"{where} has no imported queries with gold answers: ingest a dataset first "
                               "(python cli.py ingest …)")
    chosen = select_sources(sources, n, Pool(sources))
    if not chosen:
        raise CalibrationError("no imported query yields a correct and a not-correct calibration case (a question "
                               "marked unanswerable needs another query's gold to contrast)")
    with write_lock(engine), engine.begin() as conn:
        mirrors = [{"corpus_id": s.corpus_id, "external_id": f"calib:{s.external_id}"[:300], "origin": ORIGIN,
                    "qtype": s.qtype, "hops": s.hops, "question": s.question, "answer": s.answer, "status": STATUS,
                    "unanswerable": bool(s.unanswerable),
                    "meta": {"source_query_id": s.id, "calibration_version": VERSION}} for s, _ in chosen]
        conn.execute(insert(models.Query).values(mirrors).on_conflict_do_nothing(
            index_elements=["corpus_id", "external_id"]))
        ids = {(int(r[0]), r[1]): int(r[2]) for r in conn.execute(text(
            "SELECT corpus_id, external_id, id FROM queries WHERE origin = :o"), {"o": ORIGIN}).all()}
        rows = []
        for s, cases in chosen:
            mirror_id = ids[(s.corpus_id, f"calib:{s.external_id}"[:300])]
            for c in cases:
                rows.append({"query_id": mirror_id, "paradigm": PARADIGM, "generator": VERSION, "config_hash": c.kind,
                             "config": {"kind": c.kind, "true_label": c.true_label, "rule": c.rule,
                                        "source_query_id": s.id, "version": VERSION},
                             "answer": c.answer, "retrieved_chunk_ids": [], "context_tokens": 0, "iterations": 0,
                             "ret_in_tokens": 0, "ret_out_tokens": 0, "gen_in_tokens": 0, "gen_out_tokens": 0,
                             "latency_s": 0.0})
        new = conn.execute(insert(models.ParadigmRun).values(rows).on_conflict_do_nothing(
            index_elements=["query_id", "paradigm", "generator", "config_hash"]).returning(models.ParadigmRun.id)).all()
        mirror_ids = sorted({ids[(s.corpus_id, f"calib:{s.external_id}"[:300])] for s, _ in chosen})
        found = conn.execute(text(
            "SELECT r.id, r.query_id, r.config_hash FROM paradigm_runs r WHERE r.paradigm = :p AND r.generator = :g "
            f"AND r.query_id IN ({','.join(str(i) for i in mirror_ids)})"), {"p": PARADIGM, "g": VERSION}).all()
    by_key = {(int(r[1]), r[2]): int(r[0]) for r in found}
    run_ids = []
    labels: dict[str, int] = dict.fromkeys(LABELS, 0)
    for s, cases in chosen:
        mirror_id = ids[(s.corpus_id, f"calib:{s.external_id}"[:300])]
        for c in cases:
            run_ids.append(by_key[(mirror_id, c.kind)])
            labels[c.true_label] += 1
    return CalibrationSet(run_ids=run_ids, sources=[s.id for s, _ in chosen], new_cases=len(new), cases_by_label=labels)


# --------------------------------------------------------------------------- judging

class CalibrationStage(Stage):
    """Judge calibration cases with one judge backend, ``samples`` times each (not part of
    the pipeline: :func:`judge_set` runs it). Unit = (case run, judge); sample ``i`` is the
    gateway call with ``sample=i``, exactly the request the judge stage would make."""

    name = STAGE
    description = "judge calibration cases (labels known by construction)"
    uses_llm = True

    def __init__(self, judge: str, samples: int = 1, run_ids: list[int] | None = None, gate: jd.Gate | None = None):
        if samples < 1:
            raise CalibrationError(f"samples must be at least 1 (got {samples})")
        self.backend = judge
        self.gate = gate or jd.Gate()
        self.judge = jd.judge_key(judge, gate=self.gate)
        """The judgment key (backend/prompt/gate), as the judge stage would write it."""
        self.samples = int(samples)
        self.run_ids = None if run_ids is None else [int(i) for i in run_ids]

    def backend_name(self, services):
        return self.backend

    def _where(self) -> str:
        cond = f"r.paradigm = '{PARADIGM}' AND q.status = '{STATUS}'"
        if self.run_ids is not None:
            cond += f" AND r.id IN ({','.join(str(i) for i in self.run_ids) or 'NULL'})"
        return cond

    def _done_sql(self, op: str) -> str:
        return (f"(SELECT COUNT(*) FROM judgments j WHERE j.run_id = r.id AND j.judge = :judge "
                f"AND j.sample_index < {self.samples}) {op} {self.samples}")

    def counts(self, conn, scope):
        base = f"FROM paradigm_runs r JOIN queries q ON q.id = r.query_id WHERE {self._where()}"
        expected = conn.execute(text(f"SELECT COUNT(*) {base}")).scalar()
        done = conn.execute(text(f"SELECT COUNT(*) {base} AND {self._done_sql('>=')}"), {"judge": self.judge}).scalar()
        return int(expected), int(done)

    def pending(self, conn, scope):
        rows = conn.execute(text(
            "SELECT r.id, q.question, q.answer, r.answer, COALESCE(q.unanswerable, FALSE) FROM paradigm_runs r "
            f"JOIN queries q ON q.id = r.query_id WHERE {self._where()} AND {self._done_sql('<')} ORDER BY r.id"
            + (f" LIMIT {int(scope.limit)}" if getattr(scope, "limit", None) else "")), {"judge": self.judge}).all()
        return [Unit(f"calib:{r[0]}:{self.judge}:k{self.samples}",
                     {"run_id": int(r[0]), "question": r[1], "gold": r[2], "answer": r[3],
                      "unanswerable": bool(r[4])}) for r in rows]

    def _kwargs(self, config, sample: int) -> dict:
        # The judge stage's decoding parameters, so a case is judged exactly like a run.
        return {**JudgeStage()._kwargs(config, sample), "stage": STAGE}

    def compute(self, unit, services):
        """The judge stage's rules (:func:`ragrouter.evaluation.judge.rule_verdict`): a question
        marked unanswerable is decided without a call; a refusal on an answerable one is still
        put to the model (its verdict kept as raw_label) but labelled by the rule."""
        p = unit.payload
        rule = jd.rule_verdict(p["answer"], bool(p.get("unanswerable")))
        if rule is not None and p.get("unanswerable"):
            return [(i, rule.label, rule.reason, None, None, rule.refusal, None) for i in range(self.samples)]
        out = []
        for i in range(self.samples):
            res = services.gateway.chat(self.backend, jd.messages(p["question"], p["gold"], p["answer"]),
                                        **self._kwargs(services.config, i))
            raw, reason = jd.parse_label(res.data)
            if rule is not None:
                out.append((i, rule.label, reason, res.call_id, raw, rule.refusal, None))
                continue
            gated = jd.gate_outcome(self.gate, raw, p["question"], p["gold"], p["answer"],
                                    lambda: gate_f1(services, p["answer"], p["gold"]))
            out.append((i, gated.label, reason, res.call_id, raw, False, gated.review))
        return out

    def write(self, conn, unit, result):
        rows = [{"run_id": unit.payload["run_id"], "judge": self.judge, "sample_index": i, "label": label,
                 "reason": reason, "is_calibration": True, "llm_call_id": call_id, "raw_label": raw,
                 "refusal": refusal, "review": review}
                for i, label, reason, call_id, raw, refusal, review in result]
        conn.execute(insert(models.Judgment).values(rows).on_conflict_do_nothing(
            index_elements=["run_id", "judge", "sample_index"]))

    def estimate(self, conn, units, services):
        gw = services.gateway
        est = Estimate(stage=self.name, model=str(services.config.backend(self.backend)["model"]))
        for unit in units:
            p = unit.payload
            if p.get("unanswerable"):
                continue  # decided by rule, no call
            msgs = jd.messages(p["question"], p["gold"], p["answer"])
            for i in range(self.samples):
                kw = self._kwargs(services.config, i)
                est.calls += 1
                if gw.is_cached(self.backend, msgs, **kw):
                    est.cached_calls += 1
                else:
                    est.add_tokens(*gw.estimate_tokens(msgs, kw["max_tokens"]))
        return [est]


def resolve_judges(config, names: Iterable[str]) -> list[str]:
    """Backend names for ``--judge`` values (a backend name, or the role name 'judge');
    the configured judge role when none is given. Unknown names raise ConfigError."""
    out = []
    for name in (list(names) or ["judge"]):
        backend = str(config.role("judge")) if name == "judge" else name
        spec = config.backend(backend)  # ConfigError naming the backend when it is undefined
        if spec.get("kind") == "local-encoder":
            raise CalibrationError(f"{config.source}: backend '{backend}' is an encoder, not a chat model")
        if backend not in out:
            out.append(backend)
    return out


# --------------------------------------------------------------------------- figures

def case_labels(engine: Engine, judges: list[str] | None = None, run_ids: list[int] | None = None,
                samples: int | None = None) -> list[dict]:
    """Per (judge, case): true label, kind, the majority label over its samples (ties → the
    worse label, :func:`ragrouter.evaluation.judge.majority`), agreement share, and the
    ledger latency of its calls."""
    sql = ("SELECT j.judge, r.id, r.config_hash, j.sample_index, j.label, lc.latency_s, "
           "COALESCE(j.raw_label, j.label), q.question, q.answer, r.answer, COALESCE(q.unanswerable, FALSE) "
           "FROM judgments j JOIN paradigm_runs r ON r.id = j.run_id JOIN queries q ON q.id = r.query_id "
           "LEFT JOIN llm_calls lc ON lc.id = j.llm_call_id "
           f"WHERE j.is_calibration AND r.paradigm = '{PARADIGM}'")
    params: dict = {}
    if judges:
        sql += " AND j.judge IN (" + ",".join(f":j{i}" for i in range(len(judges))) + ")"
        params.update({f"j{i}": name for i, name in enumerate(judges)})
    if run_ids is not None:
        sql += f" AND r.id IN ({','.join(str(int(i)) for i in run_ids) or 'NULL'})"
    if samples is not None:
        sql += f" AND j.sample_index < {int(samples)}"
    with engine.connect() as conn:
        rows = conn.execute(text(sql + " ORDER BY j.judge, r.id, j.sample_index"), params).all()
    grouped: dict[tuple[str, int], dict] = {}
    for judge, run_id, kind, _, label, latency, raw, question, gold, answer, unanswerable in rows:
        if kind not in KINDS:
            continue
        g = grouped.setdefault((judge, int(run_id)), {"judge": judge, "run_id": int(run_id), "kind": kind,
                                                      "true_label": KINDS[kind].true_label, "labels": [],
                                                      "raw_labels": [], "question": question, "gold": gold,
                                                      "answer": answer, "unanswerable": bool(unanswerable),
                                                      "seconds": 0.0, "calls": 0})
        g["labels"].append(label)
        g["raw_labels"].append(raw)
        if latency is not None:
            g["seconds"] += float(latency)
            g["calls"] += 1
    out = []
    for g in grouped.values():
        g["label"], g["agreement"] = jd.majority(g["labels"])
        out.append(g)
    return out


VARIANTS = ("model", "stage", "gated")
"""Post-hoc label variants of the same model verdicts (:func:`relabel`): ``model`` = the
judge model's own verdicts (on a question marked unanswerable, which no model sees, the
rule's); ``stage`` = what the judge stage records without the gate (the rules of
:func:`ragrouter.evaluation.judge.rule_verdict`); ``gated`` = ``stage`` with the evidence
gate applied."""


def relabel(cases: list[dict], variant: str, gate: jd.Gate | None = None, semantic_f1=None) -> list[dict]:
    """:func:`case_labels` rows with their labels re-derived from the raw verdicts.

    ``semantic_f1(answer, gold) -> float`` is needed for ``gated`` (called only for
    "correct" verdicts that share no evidence word with the gold)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r} is not one of {', '.join(VARIANTS)}")
    gate = gate if gate is not None else jd.Gate(enabled=True)
    if variant == "gated" and not gate.enabled:
        gate = dataclasses.replace(gate, enabled=True)
    out = []
    for c in cases:
        labels = list(c["raw_labels"])
        rule = jd.rule_verdict(c["answer"], bool(c.get("unanswerable")))
        if variant in ("stage", "gated") and rule is not None:
            labels = [rule.label] * len(labels)
        elif variant == "gated":
            f1_cache: list[float] = []

            def f1(c=c, f1_cache=f1_cache):
                if not f1_cache:
                    f1_cache.append(float(semantic_f1(c["answer"], c["gold"])) if semantic_f1 else 0.0)
                return f1_cache[0]

            labels = [jd.apply_gate(gate, lab, c["question"], c["gold"], c["answer"], f1) for lab in labels]
        label, agreement = jd.majority(labels)
        out.append({**c, "labels": labels, "label": label, "agreement": agreement})
    return out


def figures(cases: list[dict], judge: str, n_set: int | None = None) -> JudgeFigures:
    """Figures of one judge from :func:`case_labels` rows (``n_set``: cases in the set, so
    that cases without a verdict are counted as ``unjudged``)."""
    mine = [c for c in cases if c["judge"] == judge]
    y_true = [c["true_label"] for c in mine]
    y_pred = [c["label"] for c in mine]
    m = confusion(y_true, y_pred)
    agreement = {}
    for i, lab in enumerate(LABELS):
        agreement[lab] = m[i][i] / sum(m[i]) if sum(m[i]) else None
    by_kind = {}
    for kind in KINDS:  # the kinds the set has (a kind whose rule applied to no source is absent)
        ks = [c for c in mine if c["kind"] == kind]
        if ks:
            by_kind[kind] = sum(c["label"] == c["true_label"] for c in ks) / len(ks)
    n = len(mine)
    return JudgeFigures(
        judge=judge, n_cases=n, samples=max((len(c["labels"]) for c in mine), default=0), confusion=m,
        agreement=agreement, by_kind=by_kind,
        accuracy=(sum(m[i][i] for i in range(3)) / n) if n else None,
        kappa=kappa_from_confusion(m),
        mean_sample_agreement=(sum(c["agreement"] for c in mine) / n) if n else None,
        calls=sum(c["calls"] for c in mine), call_seconds=sum(c["seconds"] for c in mine),
        unjudged=max(0, n_set - n) if n_set is not None else 0)


def cached_subset(services, judge: str, cset: CalibrationSet, samples: int) -> CalibrationSet:
    """The cases of ``cset`` whose ``samples`` judge calls the cache already holds (judging
    them costs no model call)."""
    stage = CalibrationStage(judge, samples, cset.run_ids)
    with services.engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT r.id, q.question, q.answer, r.answer, COALESCE(q.unanswerable, FALSE) FROM paradigm_runs r "
            f"JOIN queries q ON q.id = r.query_id WHERE r.id IN ({','.join(str(i) for i in cset.run_ids) or 'NULL'})"
        )).all()
    texts = {int(r[0]): r[1:4] for r in rows}
    ruled = {int(r[0]) for r in rows if r[4]}  # decided by rule: no call to be cached
    gw = services.gateway
    keep = [rid for rid in cset.run_ids
            if rid in ruled or all(gw.is_cached(judge, jd.messages(*texts[rid]), **stage._kwargs(services.config, i))
                                   for i in range(samples))]
    return dataclasses.replace(cset, run_ids=keep)


def judge_set(services, judges: list[str], cset: CalibrationSet, *, samples: int = 1, workers: int | None = None,
              progress: bool = True) -> dict[str, tuple]:
    """Run every judge over the set; returns judge → (StageReport, JudgeFigures)."""
    out = {}
    for judge in judges:
        stage = CalibrationStage(judge, samples, cset.run_ids, gate=jd.gate_from_config(services.config))
        report = runner.run_stage(stage, services, Scope(config=services.config), workers=workers, progress=progress)
        gw = services.__dict__.get("gateway")
        if gw is not None:
            gw.flush()
        rows = case_labels(services.engine, [stage.judge], cset.run_ids, samples)
        out[judge] = (report, figures(rows, stage.judge, len(cset.run_ids)))
    return out


def variant_figures(engine: Engine, judge_key: str, cset: CalibrationSet, samples: int, gate: jd.Gate,
                    semantic_f1) -> dict[str, JudgeFigures]:
    """Figures of one judge's stored verdicts under each label variant (:data:`VARIANTS`),
    all from the same model replies: with and without the evidence gate costs no call."""
    rows = case_labels(engine, [judge_key], cset.run_ids, samples)
    return {v: figures(relabel(rows, v, gate, semantic_f1), judge_key, len(cset.run_ids)) for v in VARIANTS}
