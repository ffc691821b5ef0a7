"""Time in every estimate: how long the pending work of a dry run will take.

A model call's latency is modelled as ``overhead_s + prompt / prompt_tps + completion /
gen_tps`` (seconds; tokens as the dry run counts and expects them), and a stage's wall time as
the sum of its calls' latencies divided by the calls in flight (``parallel``), never below what
the backend's rate limits allow (``requests_per_minute``, ``tokens_per_minute``).

Where the numbers come from, per model, said in every row's ``time_basis``:

* ``history:<n>`` — this store's own calls of the model (``llm_calls.latency_s`` against their
  prompt and completion tokens, a non-negative least-squares fit over its last calls) once it
  has ``dry_run.timing.history_min`` of them; the calls in flight are this store's too: the
  summed latency of a stage's calls over the stage's measured wall time (``stage_timings``);
* ``history-scaled:<n>`` — fewer calls than that, but at least ``dry_run.timing.history_scale_min``:
  the prior (or probe) below, scaled by how much longer (or shorter) this store's ``n`` calls
  took than it says they would (4 calls at 199 s where the prior said 38.6 s: every call of the
  model is then expected at ~5.2x the prior). A fit of three rates to a handful of similar calls
  is not to be trusted; their ratio to the prior is;
* ``probe:<model>`` — this machine's own measurement of a local model (``run --dry-run
  --probe``, :mod:`ragrouter.decisions.speedprobe`), kept per machine in ``$RAGROUTER_HOME/timing``;
* ``prior:<key>`` — ``dry_run.timing.priors``: measured for the embedded local models on a
  2-core machine (benchmarks/README.md, "Time in every estimate"), **stated** (not measured)
  for remote endpoints (key ``openai``: any OpenAI-compatible backend), where the calls in
  flight default to the backend's ``concurrency``.

A local model's first stage in a dry run also pays for loading it (``load_s``: the server's
start, the encoder's load), as one ``cli.py run`` process does.

**Other work on the machine.** The priors and the probe are figures of idle cores. Local work
(the ``local`` and ``local-encoder`` models' priors and probe figures, and the stages without
model calls) is scaled by :func:`ragrouter.llm.cpuload.slowdown` of the share of the cores that
other processes keep busy right now and the other sessions ready to run (measured over half a
second, :func:`machine_load`; ``$RAGROUTER_OTHER_CORES`` fixes it, in cores), and every basis so
scaled ends in ``busy×F``; :func:`load_line` says it in one line ("the cores are 100 % busy with
other work, 2.0 other sessions running: times ×2.6").
A store's own history is not scaled: it was measured on this machine as it was.

Stages that make no model call (chunk, metrics, score) take a fixed start
(``dry_run.timing.unit_overhead_s``) plus ``units × seconds per unit``: per unit from this
store's ``stage_timings`` of the stage (its seconds less the fixed start of each recorded
execution), else ``dry_run.timing.unit_seconds``. The score stage's start is this machine's when
it was probed (BERTScore's import and scorer on the scoring encoder, ``score_start_s``), plus the
encoder's load when no earlier stage of the dry run loads it, and its per-run prior is scaled by
the probed encoder's speed against the prior's.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import nullcontext

import os
import time

import numpy as np
from sqlalchemy import text

from ragrouter.llm import cpuload
from ragrouter.llm.pricing import estimate_usd
from ragrouter.llm.speed import load as load_probed

HISTORY_ROWS = 5000
LOCAL_KINDS = ("local", "local-encoder")
OTHER_CORES_ENV = "RAGROUTER_OTHER_CORES"
LOAD_NOTE_FROM = 1.05  # load_line speaks once the slowdown is at least this


def machine_load() -> cpuload.Load | None:
    """The other work an estimate allows for: ``$RAGROUTER_OTHER_CORES`` cores when set (the
    tests set 0: an idle machine), else measured now (:func:`ragrouter.llm.cpuload.current`)."""
    fixed = os.environ.get(OTHER_CORES_ENV)
    if fixed not in (None, ""):
        try:
            others = float(fixed)
        except ValueError:
            raise ValueError(f"setting {OTHER_CORES_ENV}={fixed!r} must be a number of cores (0 or more)") from None
        if others < 0:
            raise ValueError(f"setting {OTHER_CORES_ENV}={fixed!r} must be a number of cores (0 or more)")
        n = cpuload.cpus()
        return cpuload.Load(cpus=n, others=min(float(n), others), window_s=0.0)
    return cpuload.current()


def load_scale(load: cpuload.Load | None = None) -> tuple[float, float]:
    """(share of the cores busy with other work, the slowdown of local work it brings:
    :func:`ragrouter.llm.cpuload.slowdown`)."""
    load = machine_load() if load is None else load
    if load is None:
        return 0.0, 1.0
    return load.share, cpuload.slowdown(load)


def load_line(load: cpuload.Load | None = None) -> str | None:
    """One line when other work slows the local models down (None on idle cores)."""
    load = machine_load() if load is None else load
    share, factor = load_scale(load) if load is not None else (0.0, 1.0)
    if factor < LOAD_NOTE_FROM:
        return None
    sessions = "" if load.groups is None else f", {load.groups:.1f} other sessions running"
    return (f"the cores are {100 * share:.0f} % busy with other work{sessions}: times ×{factor:.1f} "
            "(the local models' figures are for idle cores; the estimate scales them)")


def _scaled(fig: dict, factor: float) -> dict:
    """Figures of local work ``factor`` times slower (rates divided, seconds multiplied)."""
    if factor == 1.0:
        return fig
    out = dict(fig)
    for key in ("prompt_tps", "gen_tps", "gen_tps_short"):
        if out.get(key):
            out[key] = float(out[key]) / factor
    for key in ("overhead_s", "load_s", "score_start_s"):
        if out.get(key):
            out[key] = float(out[key]) * factor
    return out


def _nnls(latency, prompt, completion) -> tuple[float, float, float]:
    """(overhead_s, s per prompt token, s per completion token) ≥ 0 fitted to the calls."""
    from scipy.optimize import nnls

    a = np.column_stack([np.ones(len(latency)), prompt, completion]).astype(float)
    coef, _ = nnls(a, np.asarray(latency, dtype=float))
    return float(coef[0]), float(coef[1]), float(coef[2])


def reply_seconds(fig: dict, mean_reply: float) -> float:
    """Seconds per reply token of a model for calls whose mean reply is ``mean_reply`` tokens:
    ``1 / gen_tps``, or with the probe's short-reply round (``gen_tps_short`` measured at
    ``short_reply_tokens``) that round's rate for replies as short, interpolated linearly up to
    the long round's ``long_reply_tokens``."""
    if not fig.get("gen_tps"):
        return 0.0
    long_s = 1.0 / float(fig["gen_tps"])
    if not fig.get("gen_tps_short") or not fig.get("short_reply_tokens") or not fig.get("long_reply_tokens"):
        return long_s
    short_s, lo, hi = 1.0 / float(fig["gen_tps_short"]), float(fig["short_reply_tokens"]), float(fig["long_reply_tokens"])
    if mean_reply <= lo or hi <= lo:
        return short_s
    if mean_reply >= hi:
        return long_s
    return short_s + (long_s - short_s) * (mean_reply - lo) / (hi - lo)


class Timing:
    """The latency and parallelism model of one store and config (read once per dry run)."""

    def __init__(self, engine, config, lock=None, *, before_id: int | None = None, load=None):
        """``before_id``: only the ledger's calls up to that row are history (what a stage's
        estimate was before its own calls); ``load``: the other work to allow for (default
        :func:`machine_load`)."""
        sec = dict(config.section("dry_run").get("timing") or {})
        self.config = config
        self.history_min = max(2, int(sec.get("history_min", 20)))
        self.history_scale_min = max(1, int(sec.get("history_scale_min", 3)))
        self.load = machine_load() if load is None else load
        self.busy_share, self.busy_factor = load_scale(self.load) if self.load is not None else (0.0, 1.0)
        self.priors = {str(k): dict(v or {}) for k, v in dict(sec.get("priors") or {}).items()}
        self.unit_prior = {str(k): float(v) for k, v in dict(sec.get("unit_seconds") or {}).items() if v is not None}
        self.unit_overhead = {str(k): float(v) for k, v in dict(sec.get("unit_overhead_s") or {}).items()
                              if v is not None}
        self._fits: dict[str, tuple[float, float, float, int]] = {}
        self._few: dict[str, list[tuple[float, int, int]]] = {}  # (latency, prompt, completion) of a few calls
        self._parallel: dict[str, float] = {}
        self._unit: dict[str, tuple[float, int]] = {}
        self.probed = load_probed()  # this machine's measured local models (run --dry-run --probe)
        self._loaded: set[str] = set()  # models whose load a row of this dry run already paid
        # worker.one_local_model: a stage stops the servers it does not call, so a local chat
        # model pays its load again in every row that follows another model's or a no-model stage
        self.one_resident = bool(config.get("worker.one_local_model", True))
        self._resident: str | None = None
        with (lock or nullcontext()), engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT model, latency_s, prompt_tokens, completion_tokens FROM llm_calls "
                "WHERE latency_s > 0 AND id <= :b ORDER BY id DESC LIMIT :n"),
                {"n": HISTORY_ROWS * 4, "b": (1 << 62) if before_id is None else int(before_id)}).all()
            by_model: dict[str, list] = defaultdict(list)
            for model, lat, pt, ct in rows:
                if len(by_model[str(model)]) < HISTORY_ROWS:
                    by_model[str(model)].append((float(lat), int(pt or 0), int(ct or 0)))
            for model, calls in by_model.items():
                if len(calls) >= self.history_min:
                    lat, pt, ct = (np.array(c) for c in zip(*calls))
                    self._fits[model] = (*_nnls(lat, pt, ct), len(calls))
                elif len(calls) >= self.history_scale_min:  # a few calls: their ratio to the prior
                    self._few[model] = calls
            # calls in flight per stage: summed latency of the calls a worker made in a stage over
            # the wall time that worker spent on the stage
            for stage, busy, wall in conn.execute(text(
                    "SELECT t.stage, SUM(c.lat), SUM(t.seconds) FROM stage_timings t JOIN ("
                    "SELECT worker_run_id, stage, SUM(latency_s) AS lat FROM llm_calls GROUP BY worker_run_id, stage"
                    ") c ON c.worker_run_id = t.worker_run_id AND c.stage = t.stage "
                    "WHERE t.model_calls > 0 AND t.seconds > 0 GROUP BY t.stage")).all():
                if wall and busy:
                    self._parallel[str(stage)] = max(1.0, float(busy) / float(wall))
            for stage, secs, units, execs in conn.execute(text(
                    "SELECT stage, SUM(seconds), SUM(units), COUNT(*) FROM stage_timings "
                    "WHERE model_calls = 0 AND units > 0 GROUP BY stage")).all():
                start = self.unit_overhead.get(str(stage), 0.0) * int(execs)
                self._unit[str(stage)] = (max(0.0, float(secs) - start) / max(1, int(units)), int(units))

    # ------------------------------------------------------------------ backends
    def backend_of(self, model: str) -> dict:
        """The config's backend serving ``model`` (a role's backend first)."""
        backends = self.config.section("backends")
        bound = self.config.bound_backends()
        matches = [n for n, b in backends.items() if isinstance(b, dict) and str(b.get("model")) == str(model)]
        matches.sort(key=lambda n: (n not in bound, n))
        return {"name": matches[0], **backends[matches[0]]} if matches else {"name": None, "model": model}

    def _prior(self, backend: dict, *, idle: bool = False) -> tuple[dict, str]:
        """The figures of ``backend``'s model and their basis: this machine's probe, else the
        config's prior; a local model's scaled by the other work on the cores (``busy×F``)
        unless ``idle``."""
        model, kind = str(backend.get("model")), str(backend.get("kind") or "openai")
        if kind in LOCAL_KINDS and model in self.probed:
            fig, basis = self.probed[model], f"probe:{model}"
        elif model in self.priors:
            fig, basis = self.priors[model], f"prior:{model}"
        else:
            key = "local" if kind in LOCAL_KINDS else "openai"
            fig, basis = self.priors.get(key, {}), f"prior:{key}" if key == "local" else "stated:openai"
        if kind in LOCAL_KINDS and not idle and self.busy_factor != 1.0:
            return _scaled(fig, self.busy_factor), f"{basis},busy×{self.busy_factor:.2g}"
        return fig, basis

    @staticmethod
    def _from(fig: dict, calls: int, prompt: int, completion: int) -> float:
        def per(tps):
            return 0.0 if not tps else 1.0 / float(tps)
        return (calls * float(fig.get("overhead_s") or 0.0) + prompt * per(fig.get("prompt_tps"))
                + completion * reply_seconds(fig, completion / max(1, calls)))

    def call_seconds(self, model: str, calls: int, prompt: int, completion: int) -> tuple[float, str]:
        """Summed latency of ``calls`` calls of ``model`` with these tokens, and its basis."""
        fit = self._fits.get(str(model))
        if fit is not None:
            a, b, c, n = fit
            return calls * a + prompt * b + completion * c, f"history:{n}"
        backend = self.backend_of(model)
        few = self._few.get(str(model))
        if few:  # this store's few calls against what the (unscaled) figures say they take
            fig, basis = self._prior(backend, idle=True)
            said = sum(self._from(fig, 1, p, c) for _, p, c in few)
            if said > 0:
                ratio = sum(lat for lat, _, _ in few) / said
                return self._from(fig, calls, prompt, completion) * ratio, \
                    f"history-scaled:{len(few)}(×{ratio:.2g} {basis})"
        prior, basis = self._prior(backend)
        return self._from(prior, calls, prompt, completion), basis

    def parallel(self, stage: str, model: str) -> tuple[float, str]:
        backend = self.backend_of(model)
        conc = max(1, int(backend.get("concurrency") or 1))
        if backend.get("kind") == "local" and backend.get("n_parallel"):
            conc = min(conc, int(backend["n_parallel"]))
        if stage in self._parallel:
            return min(float(conc), self._parallel[stage]), "history"
        prior, _ = self._prior(backend)
        par = prior.get("parallel")
        return (float(conc) if par is None else min(float(conc), float(par))), "prior"

    def stage_seconds(self, estimate) -> tuple[float, str]:
        """Expected wall seconds of one dry-run row (a stage's calls of one model)."""
        calls = max(0, int(estimate.calls) - int(estimate.cached_calls))
        if calls == 0:
            return 0.0, "cached" if estimate.calls else "-"
        busy, basis = self.call_seconds(estimate.model, calls, int(estimate.prompt_tokens),
                                        int(estimate.completion_tokens))
        par, par_basis = self.parallel(estimate.stage, estimate.model)
        wall = busy / par
        backend = self.backend_of(estimate.model)
        kind = backend.get("kind")
        if kind == "local" and self.one_resident:
            if self._resident != estimate.model:  # this stage starts its server (others were stopped)
                wall += float(self._prior(backend)[0].get("load_s") or 0.0)
            self._resident = estimate.model
        else:
            if kind != "local":
                self.stage_without_server()
            if kind in LOCAL_KINDS and estimate.model not in self._loaded:
                self._loaded.add(estimate.model)  # the first stage to use a local model starts it
                wall += float(self._prior(backend)[0].get("load_s") or 0.0)
        limits = []
        rpm, tpm = backend.get("requests_per_minute"), backend.get("tokens_per_minute")
        if rpm:
            limits.append(calls * 60.0 / float(rpm))
        if tpm:
            limits.append((estimate.prompt_tokens + estimate.completion_cap) * 60.0 / float(tpm))
        if limits and max(limits) > wall:
            return max(limits), f"{basis},rate-limit"
        return wall, f"{basis},parallel:{par:.2g}({par_basis})"

    def stage_without_server(self) -> None:
        """A row of a stage that calls no local chat model: it stopped the resident server."""
        if self.one_resident:
            self._resident = None

    def unit_seconds(self, stage: str, units: int) -> tuple[float, str]:
        if units <= 0:
            return 0.0, "-"
        start, start_basis, speed = self._start(stage)
        f = self.busy_factor  # local work on cores other work keeps busy (the history is as measured)
        busy = f",busy×{f:.2g}" if f != 1.0 else ""
        if stage in self._unit and self._unit[stage][1] >= 5:
            per, n = self._unit[stage]
            return start * f + units * per, f"history:{n} units,start:{start_basis}{busy}"
        if stage in self.unit_prior:
            return (start + units * self.unit_prior[stage] * speed) * f, f"prior,start:{start_basis}{busy}"
        return 0.0, "unknown"

    def _start(self, stage: str) -> tuple[float, str, float]:
        """(fixed start, its basis, per-unit slowdown) of a stage that makes no model call. The
        score stage's start is this machine's (the probe's ``score_start_s`` on the scoring
        encoder, else ``unit_overhead_s``), plus the encoder's load unless an earlier row of
        this dry run loads it (the embed stage in the same process); its per-run prior is
        scaled by how much slower this machine's probed encoder is than the prior's."""
        start = self.unit_overhead.get(stage, 0.0)
        if stage != "score":
            return start, "prior", 1.0
        model = str(self.config.get("scoring.encoder", "") or "")
        prior, _ = self._prior(self.backend_of(model), idle=True)  # unit_seconds scales the whole start
        fig = self.probed.get(model, {})
        speed, start_basis = 1.0, "prior"
        if "score_start_s" in fig:
            start, start_basis = float(fig["score_start_s"]), f"probe:{model}"
        ref = (self.priors.get(model) or {}).get("prompt_tps")
        if fig.get("prompt_tps") and ref:
            speed = float(ref) / float(fig["prompt_tps"])
        if model and model not in self._loaded:  # this stage's process loads the encoder itself
            self._loaded.add(model)
            start += float(prior.get("load_s") or 0.0)
            start_basis += "+load"
        return start, start_basis, speed


def wall_estimates(config, estimates, services) -> dict:
    """The dry run as one object: per (stage, model) row its calls, tokens, US $ and
    ``expected_wall_s`` with ``time_basis``; totals; advice (``profile: local``) when the
    local backends would take longer than ``dry_run.advise_hours``; and ``busy``: the share of
    the cores other work keeps busy, the slowdown it brings and :func:`load_line`."""
    timing = Timing(services.engine, config, services.db_lock)
    rows, total, usd_total, local_s = [], 0.0, None, 0.0
    for e in estimates:
        if e.model == "-":
            secs, basis = timing.unit_seconds(e.stage, int(getattr(e, "units", 0)))
            timing.stage_without_server()
        else:
            secs, basis = timing.stage_seconds(e)
            if timing.backend_of(e.model).get("kind") in LOCAL_KINDS:
                local_s += secs
        usd = None if e.model == "-" else estimate_usd(config, e.model, e.prompt_tokens, e.completion_tokens)
        if usd is not None:
            usd_total = (usd_total or 0.0) + usd
        total += secs
        rows.append({"stage": e.stage, "model": e.model, "units": int(getattr(e, "units", 0)), "calls": e.calls,
                     "cached_calls": e.cached_calls, "prompt_tokens": e.prompt_tokens,
                     "completion_tokens": e.completion_tokens, "completion_cap": e.completion_cap, "usd": usd,
                     "expected_wall_s": round(secs, 1), "basis": e.basis or "-", "time_basis": basis})
    advice = []
    hours = float(config.get("dry_run.advise_hours", 3) or 3)
    if local_s > hours * 3600 and config.get("profile", None) != "local":
        advice.append(f"the local backends would take about {local_s / 3600:.1f} h: `profile: local` in your config "
                      "(configs/profiles/local.yaml) sets the demo's context budget and caps for CPU models "
                      "(docs/FIDELITY.md lists them beside the paper's values)")
    busy = {"share": round(timing.busy_share, 3), "factor": round(timing.busy_factor, 3),
            "line": load_line(timing.load) if timing.load is not None else None}
    return {"stages": rows, "expected_wall_s": round(total, 1), "usd": usd_total, "advice": advice, "busy": busy}


class StageWatch:
    """A running model stage against its estimate: once its calls in this worker take
    :data:`FAR` times longer (or shorter) than the time model said before the stage began,
    one line with the new time left (:meth:`check`). The time left is the units' own rate,
    read only once ``MIN_UNITS`` and twice the units in flight have finished: the first unit
    to finish carries the server's start and, with several in flight, the calls of the others
    (one answer unit of 45 beside two busy sessions put the 44 left at 33 min, the stage took
    less than half of that)."""

    FAR = 1.5
    MIN_CALLS = 2
    MIN_UNITS = 3
    MIN_LEFT_S = 60.0  # a time left under a minute is not worth a line (a batch's last units)
    EVERY_S = 10.0  # the ledger is read at most this often

    def __init__(self, services, stage: str, in_flight: int = 1):
        self.services, self.stage = services, stage
        self.min_done = max(self.MIN_UNITS, 2 * max(1, int(in_flight)))
        self.said = False
        self._timing: Timing | None = None
        self._last = 0.0
        with services.db_lock, services.engine.connect() as conn:
            self.mark = int(conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM llm_calls")).scalar() or 0)

    def check(self, done: int, left: int, elapsed_s: float, now=None) -> str | None:
        """The line, once, when the stage's calls are far from the estimate (``done`` units
        finished in ``elapsed_s`` seconds, ``left`` to go); else None."""
        now = time.monotonic() if now is None else now
        if self.said or done < self.min_done or left <= 0 or now - self._last < self.EVERY_S:
            return None
        self._last = now
        svc = self.services
        run_id = svc.__dict__.get("worker_run_id")
        with svc.db_lock, svc.engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT model, COUNT(*), SUM(latency_s), SUM(prompt_tokens), SUM(completion_tokens) FROM llm_calls "
                "WHERE id > :m AND stage = :s AND latency_s > 0"
                + (" AND worker_run_id = :w" if run_id is not None else "") + " GROUP BY model"),
                {"m": self.mark, "s": self.stage, "w": run_id}).all()
        calls = sum(int(r[1]) for r in rows)
        if calls < self.MIN_CALLS:
            return None
        if self._timing is None:  # the estimate as it stood when the stage began
            self._timing = Timing(svc.engine, svc.config, svc.db_lock, before_id=self.mark)
        took = sum(float(r[2] or 0.0) for r in rows)
        said = sum(self._timing.call_seconds(str(m), int(n), int(p or 0), int(c or 0))[0] for m, n, _, p, c in rows)
        if said <= 0 or 1.0 / self.FAR < took / said < self.FAR:
            return None
        ratio = took / said
        left_s = elapsed_s / done * max(0, left)
        if left_s < self.MIN_LEFT_S:
            return None
        self.said = True
        until = time.strftime("%H:%M", time.localtime(time.time() + left_s))
        return (f"{self.stage}: its calls take {ratio:.1f}× the estimate ({took / calls:.1f} s a call, "
                f"expected {said / calls:.1f} s): at this rate the {left} unit{'s' if left != 1 else ''} left "
                f"take about {_hms(left_s)} (until {until})")


def _hms(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
