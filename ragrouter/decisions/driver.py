"""``run --until-decided``: answer and judge a cell's queries batch by batch until a claim
about its best paradigm holds (``ragrouter.decisions.sequential``: decided or ε-best), no claim
can be reached before its queries run out (futile), or the budget is spent.

A cell is (corpus, query type, generator) under the configured judge. Its accepted queries
are put in a **seeded random order** (sha256 of the seed, the corpus and the query's id:
the same order in every run, whatever was answered before), cut into batches of
``decisions.batch``. The state of a cell is always recomputed by replaying the batches whose
outcomes the store holds, so a stopped run continues the same sequence: the next run answers
the first batch that is incomplete for the paradigms still in the race, and every model call
already paid for is a ledger hit. After each look the cell's row in ``decision_cells`` is
upserted (state, leader, N, runs, bound, per-pair detail).

Several workers may run the same cells (PostgreSQL; the stage runner's leases share out the
units of a batch). A worker's view of a cell is only as new as its last replay, and another
worker may have answered more since (the batch this one was about to run, and the decision
after it). So every row is written in the transaction that replays the cell from the store,
under a per-cell lock (a transaction-scoped advisory lock on PostgreSQL; DuckDB has one
process per file): the last row written was computed from every outcome committed before
it, and no worker saves an older state over a newer one. A batch in which this worker ran no
unit is not a failure when the store shows the cell moved on meanwhile (another worker ran
it): the worker replays and goes on; it stops with ``failed`` only when nothing moved.
"""

from __future__ import annotations

import hashlib
import time
import zlib
from dataclasses import dataclass, field

from sqlalchemy import func, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine

from ragrouter.db import models
from ragrouter.db.values import json_value
from ragrouter.decisions.sequential import DECIDED, EPS_BEST, CellState, Settings, evaluate, reach_chance
from ragrouter.evaluation import judge as jd
from ragrouter.llm.pricing import estimate_usd
from ragrouter.stages import registry, runner, storeio
from ragrouter.stages.base import Scope, ScopeError


@dataclass
class Budget:
    """What ``--until-decided`` may spend in this command (None: no limit)."""

    usd: float | None = None
    tokens: int | None = None
    hours: float | None = None

    def exhausted(self, spent_usd: float, spent_tokens: int, elapsed_s: float) -> str | None:
        if self.usd is not None and spent_usd >= self.usd:
            return f"budget: US ${spent_usd:.4f} of {self.usd}"
        if self.tokens is not None and spent_tokens >= self.tokens:
            return f"budget: {spent_tokens} tokens of {self.tokens}"
        if self.hours is not None and elapsed_s >= self.hours * 3600:
            return f"budget: {elapsed_s / 3600:.2f} h of {self.hours}"
        return None


@dataclass
class Cell:
    corpus_id: int
    corpus: str
    qtype: str
    generator: str
    queries: list[int]                 # accepted query ids in the cell's seeded order
    state: CellState | None = None
    stop_reason: str | None = None
    runs: int = 0
    pending: list[tuple[list[int], list[str]]] = field(default_factory=list)  # next batch: (queries, paradigms)


def seeded_order(seed: int, corpus: str, ids: list[tuple[int, str]]) -> list[int]:
    """Query ids in the cell's seeded random order: by sha256(seed, corpus, external id)."""
    def key(row):
        qid, ext = row
        return hashlib.sha256(f"{seed}\x1f{corpus}\x1f{ext or qid}".encode()).hexdigest()
    return [int(r[0]) for r in sorted(ids, key=key)]


def cells_of(conn, scope: Scope, settings: Settings) -> list[Cell]:
    cfg = scope.config
    generators = list(scope.models) or cfg.generators()
    out = []
    for cid, name in storeio.corpus_ids(conn, scope.corpus):
        rows = conn.execute(text("SELECT id, external_id, qtype FROM queries WHERE corpus_id = :c "
                                 "AND status = 'accepted'"), {"c": cid}).all()
        by_type: dict[str, list] = {}
        for qid, ext, qtype in rows:
            by_type.setdefault(str(qtype), []).append((int(qid), ext))
        for qtype in sorted(by_type):
            order = seeded_order(settings.seed, name, by_type[qtype])
            out.extend(Cell(cid, name, qtype, g, order) for g in generators)
    if not out:
        raise ScopeError("no accepted queries to decide on" + (f" in corpus '{scope.corpus}'" if scope.corpus else "")
                         + " (ingest questions, or run querygen and validate first)")
    return out


def outcomes(conn, cell: Cell, judge: str) -> dict[tuple[int, str], int]:
    """(query, paradigm) → 1/0 for the cell's current runs judged by ``judge``."""
    rows = conn.execute(text("SELECT query_id, paradigm, correct FROM v_run_judged WHERE corpus_id = :c "
                             "AND qtype = :t AND generator = :g AND judge = :j"),
                        {"c": cell.corpus_id, "t": cell.qtype, "g": cell.generator, "j": judge}).all()
    return {(int(q), str(p)): int(c) for q, p, c in rows}


def replay(cell: Cell, paradigms: list[str], seen: dict[tuple[int, str], int], settings: Settings) -> None:
    """Rebuild the cell's state from the complete batches, and name the next batch to run."""
    looks: list[dict[str, dict]] = []
    horizon = len(cell.queries)
    state = evaluate(paradigms, [], settings, horizon)
    cell.pending = []
    for start in range(0, len(cell.queries), settings.batch):
        batch = cell.queries[start:start + settings.batch]
        active = state.active
        missing = [p for p in active if any((q, p) not in seen for q in batch)]
        if missing:
            cell.pending = [(batch, active)]
            break
        looks.append({p: {q: seen[(q, p)] for q in batch} for p in active})
        state = evaluate(paradigms, looks, settings, horizon)
        if state.stop_reason is not None:
            break
    cell.state = state
    cell.runs = sum(len(look[p]) for look in looks for p in look)
    if state.state == DECIDED:
        cell.stop_reason = "decided"
    elif state.state == EPS_BEST:
        cell.stop_reason = "eps_best"
    elif state.stop_reason == "futile":
        chance = reach_chance(paradigms, looks, settings, horizon, seed=settings.seed)
        said = "" if chance is None else f"; estimated chance {_chance_text(chance)}, from resampling its runs"
        cell.stop_reason = (f"futile: a claim is unlikely to be reached within the cell's {horizon} queries "
                            f"(projected{said})")
    elif not cell.pending:
        cell.stop_reason = "exhausted: every query of the cell is answered and judged"


def _chance_text(chance: float) -> str:
    """A chance as a reader takes it: '< 1 %' rather than a bare 0 % from a few hundred draws."""
    return "< 1 %" if chance < 0.01 else f"{chance * 100:.0f} %"


DECISION_LOCK_CLASS = 0x52474443  # 'RGDC': two-int advisory locks, apart from the runner's and the ledger's


def lock_cell(conn, cell: Cell, judge: str) -> None:
    """Hold the cell until ``conn``'s transaction ends (PostgreSQL; a DuckDB file has one
    process, whose threads the store's write lock serialises already)."""
    if conn.dialect.name != "postgresql":
        return
    key = zlib.crc32(f"{cell.corpus_id}\x1f{cell.qtype}\x1f{cell.generator}\x1f{judge}".encode()) & 0x7FFFFFFF
    conn.execute(text("SELECT pg_advisory_xact_lock(:c, :k)"), {"c": DECISION_LOCK_CLASS, "k": key})


def look(conn, cell: Cell, paradigms: list[str], judge: str, settings: Settings) -> int:
    """Replay ``cell`` from the outcomes the store holds now and save its row, in ``conn``'s
    transaction under the cell's lock; returns how many outcomes the cell has in the store."""
    lock_cell(conn, cell, judge)
    seen = outcomes(conn, cell, judge)
    replay(cell, paradigms, seen, settings)
    save(conn, cell, judge, settings)
    return len(seen)


def stop(conn, cell: Cell, paradigms: list[str], judge: str, settings: Settings, reason: str,
         unless_moved_from: int | None = None) -> bool:
    """Stop ``cell`` for ``reason`` and save it, with its state replayed from the store under
    its lock: a cell another worker brought to a stop keeps that stop (decided, ε-best, …), and
    with ``unless_moved_from`` (the outcomes this worker last saw) a cell whose outcomes grew
    meanwhile is saved as it now stands, not stopped. True when ``reason`` was set."""
    lock_cell(conn, cell, judge)
    seen = outcomes(conn, cell, judge)
    replay(cell, paradigms, seen, settings)
    moved = unless_moved_from is not None and len(seen) > unless_moved_from
    stopped = cell.stop_reason is None and bool(cell.pending) and not moved
    if stopped:
        cell.stop_reason = reason
    save(conn, cell, judge, settings)
    return stopped


def save(conn, cell: Cell, judge: str, settings: Settings) -> None:
    """Upsert the cell's row as ``cell`` holds it (callers replay it from the store in the same
    transaction, under :func:`lock_cell`: :func:`look`, :func:`stop`)."""
    st = cell.state
    row = {"corpus_id": cell.corpus_id, "qtype": cell.qtype, "generator": cell.generator, "judge": judge,
           "state": st.state, "winner": st.leader, "n_queries": st.n_queries, "n_runs": cell.runs,
           "bound": st.bound, "alpha": settings.alpha, "margin": settings.epsilon, "stop_reason": cell.stop_reason,
           "detail": {**st.detail(), "seed": settings.seed, "batch": settings.batch, "bet_max": settings.bet_max,
                      "prior_queries": settings.prior_queries, "prior_discordance": settings.prior_discordance,
                      "futility": settings.futility, "queries_in_cell": len(cell.queries)}}
    stmt = insert(models.DecisionCell).values(**row)
    conn.execute(stmt.on_conflict_do_update(
        index_elements=["corpus_id", "qtype", "generator", "judge"],
        set_={**{k: stmt.excluded[k] for k in row if k not in ("corpus_id", "qtype", "generator", "judge")},
              "updated_at": func.now()}))


def until_decided(services, scope: Scope, budget: Budget, *, progress: bool = True, echo=print) -> list[Cell]:
    """Run the cells of ``scope`` until each is decided, ε-best, futile, out of queries or the
    budget is spent; returns the cells as they stand."""
    cfg = scope.config
    settings = Settings.from_config(cfg)
    judge = jd.judge_key(str(cfg.role("judge")), cfg)
    paradigms = list(scope.paradigms) or list(cfg.get("paradigms.enabled"))
    stages = registry.all_stages()
    started = time.monotonic()
    # no unit starts once the hours are spent: the command ends at most one unit's time late
    deadline = None if budget.hours is None else started + budget.hours * 3600
    spent_tokens, spent_usd = 0, 0.0
    with services.db_lock, services.engine.connect() as conn:
        cells = cells_of(conn, scope, settings)
    failed = 0
    seen: dict[int, int] = {}  # id(cell) → the outcomes of the cell in the store at its last look
    while True:
        for cell in cells:
            if cell.stop_reason is None or cell.stop_reason.startswith("budget"):
                with services.db_lock, services.engine.begin() as conn:
                    seen[id(cell)] = look(conn, cell, paradigms, judge, settings)
        todo = [c for c in cells if c.stop_reason is None and c.pending]
        if not todo:
            return cells
        reason = budget.exhausted(spent_usd, spent_tokens, time.monotonic() - started)
        if reason:
            for cell in todo:
                with services.db_lock, services.engine.begin() as conn:
                    stop(conn, cell, paradigms, judge, settings, reason)
            return cells
        progressed = False
        for cell in todo:
            batch, active = cell.pending[0]
            sub = Scope(corpus=cell.corpus, paradigms=active, models=[cell.generator], config=cfg,
                        query_ids=batch)
            before = services.gateway.stats()
            for name in ("answer", "judge"):  # a bar per batch and stage: a batch can take minutes
                label = f"{cell.corpus}/{cell.qtype} batch {cell.state.n_queries // settings.batch + 1} {name}"
                rep = runner.run_stage(stages[name], services, sub, progress=progress, deadline=deadline, label=label)
                failed += rep.failed
                progressed |= rep.done > 0
                for err in rep.errors[:3]:
                    echo(f"  failed {err}")
            after = services.gateway.stats()
            tokens = after["billed_tokens"] - before["billed_tokens"]
            spent_tokens += tokens
            spent_usd += _usd(cfg, after, before, estimate_usd)
            if progress:
                st = cell.state
                echo(f"{cell.corpus}/{cell.qtype}/{cell.generator}: batch of {len(batch)} queries × "
                     f"{len(active)} paradigms ({tokens} tokens); before it: {st.state}, leader {st.leader}, "
                     f"N = {st.n_queries}")
        if not progressed and not (deadline is not None and time.monotonic() >= deadline):
            # this worker finished no unit: either every unit failed (stop rather than loop), or
            # another worker ran the batches meanwhile (the store moved on: look again); past the
            # deadline no unit started, and the next look stops the cells for the budget
            moved = False
            for cell in todo:
                with services.db_lock, services.engine.begin() as conn:
                    moved |= not stop(conn, cell, paradigms, judge, settings,
                                      f"failed: {failed} unit(s) failed (see unit_failures); run again to retry",
                                      unless_moved_from=seen[id(cell)])
            if not moved:
                return cells


def _usd(cfg, after: dict, before: dict, estimate_usd) -> float:
    """US $ of the tokens billed between two gateway snapshots, at the generator and judge
    prices (per-model split is not kept by the counters: the dearer of the two is charged)."""
    prompt = after["billed_prompt_tokens"] - before["billed_prompt_tokens"]
    completion = after["billed_completion_tokens"] - before["billed_completion_tokens"]
    prices = []
    for backend in list(cfg.generators()) + [str(cfg.role("judge"))]:
        try:
            usd = estimate_usd(cfg, str(cfg.backend(backend)["model"]), prompt, completion)
        except Exception:  # noqa: BLE001 - an unpriced backend costs nothing here
            usd = None
        if usd is not None:
            prices.append(usd)
    return max(prices) if prices else 0.0


def decision_cells(engine: Engine) -> list[dict]:
    """Every cell's sequential decision (``run --until-decided``): corpus, query type,
    generator, judge, state, leader, N, runs, bound, stop reason, and the claim the state
    makes (``claim``; empty for rows written before claims were kept)."""
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(text(
            "SELECT c.name AS corpus, d.qtype, d.generator, d.judge, d.state, d.winner, d.n_queries, d.n_runs, "
            "d.bound, d.alpha, d.margin, d.stop_reason, d.detail FROM decision_cells d "
            "JOIN corpora c ON c.id = d.corpus_id ORDER BY c.name, d.qtype, d.generator, d.judge")).mappings()]
    for row in rows:
        detail = json_value(row.pop("detail")) or {}
        row["claim"] = str(detail.get("claim") or "") if isinstance(detail, dict) else ""
    return rows
