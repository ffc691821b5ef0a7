"""Stages: resumable sets of work units with natural keys (docs/explanation/architecture.md §1, §3).

A stage knows how many units it *expects* for a scope, which are *done* (their result row
exists) and how to compute one unit. ``pending = expected − done`` is one anti-join in the
stage's SQL, so re-running a stage resumes exactly where it stopped. Units run in a thread
pool (model calls); one writer — the calling thread — commits results in batches, each
unit's rows in the same transaction as its bookkeeping.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from ragrouter.stages.expect import expected_reply


@dataclass
class Scope:
    """Which part of the work a command addresses."""

    corpus: str | None = None
    limit: int | None = None
    paradigms: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    config: Any = None
    """The loaded Config (stages key their units by model names and hyperparameters)."""
    query_ids: list[int] | None = None
    """Only these queries (answer, judge and score stages): a batch of ``run --until-decided``."""


@dataclass
class Unit:
    """One unit of work: its natural key (as text, for failures and leases) and payload."""

    key: str
    payload: Any


@dataclass
class Estimate:
    """What pending work would spend (dry run)."""

    stage: str
    model: str
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    completion_cap: int = 0  # the sum of the max_tokens caps: the upper bound of completion_tokens
    basis: str = ""          # what the expected completion rests on: history:<n>, prior or cap
    units: int = 0           # pending units of the stage (on its first row): the time of stages without model calls

    def add_chat(self, gateway, role: str, messages: list[dict], **kwargs) -> None:
        """Count one chat call: free when the ledger already holds it, else its tokens
        (prompt counted with cl100k; completion as expected, see :meth:`add_tokens`)."""
        self.calls += 1
        if gateway.is_cached(role, messages, **kwargs):
            self.cached_calls += 1
            return
        prompt, cap = gateway.estimate_tokens(messages, kwargs["max_tokens"])
        self.add_tokens(prompt, cap)

    def add_tokens(self, prompt: int, cap: int, times: float = 1.0) -> None:
        """Add a call's prompt tokens and its reply: the cap to ``completion_cap``, the expected
        length (``stages.expect``: this store's history, else a prior; the cap outside a dry
        run) to ``completion_tokens``; ``times`` scales both (expected repeats of the call)."""
        expected, basis = expected_reply(self.stage, self.model, cap)
        self.prompt_tokens += round(times * prompt)
        self.completion_tokens += round(times * expected)
        self.completion_cap += round(times * cap)
        if cap and basis not in self.basis.split(","):
            self.basis = ",".join(sorted(filter(None, self.basis.split(",") + [basis])))


class Stage(ABC):
    """Base class; subclasses set ``name``/``description`` and implement the hooks."""

    name: str = ""
    description: str = ""
    uses_llm: bool = False

    @abstractmethod
    def counts(self, conn: Connection, scope: Scope) -> tuple[int, int]:
        """(expected, done) units for the scope."""

    @abstractmethod
    def pending(self, conn: Connection, scope: Scope) -> list[Unit]:
        """Units not done yet, in a stable order (``scope.limit`` applied)."""

    def prepare(self, services, scope: Scope) -> None:
        """Load shared state once before units run (indexes, graphs)."""

    @abstractmethod
    def compute(self, unit: Unit, services) -> Any:
        """Compute one unit (runs in a worker thread; may call the gateway)."""

    @abstractmethod
    def write(self, conn: Connection, unit: Unit, result: Any) -> None:
        """Persist one unit's result (runs in the writer, inside a transaction)."""

    def estimate(self, conn: Connection, units: list[Unit], services) -> list[Estimate]:
        """Calls/tokens the given pending units would spend (dry run); default: none."""
        return []

    def finish(self, conn: Connection, services, scope: Scope) -> None:
        """Called after the last unit (derived files, summaries)."""

    def skipped(self, conn: Connection, scope: Scope) -> dict[str, int]:
        """Done units that produced nothing, by reason (e.g. a querygen unit with no chain:
        ``{"no_chain": 2}``); shown by ``run`` and ``status``. Default: none."""
        return {}


STAGES: dict[str, Stage] = {}


def register(stage: Stage) -> Stage:
    """Add a stage instance to the registry (order of registration = pipeline order)."""
    STAGES[stage.name] = stage
    return stage


class ScopeError(ValueError):
    """The command's scope names something that is not in the store."""
