"""Anytime-valid paired comparison of the paradigms of one cell (``run --until-decided``).

Every paradigm still in the race answers the same queries, in a seeded random order, in
batches; after each batch the rule below looks at the paired outcomes (judged correct or not)
and may stop. Because its error level holds *whatever* the number of looks, a cell can be
looked at after every batch and continued by a later run without inflating the error — the
fixed-N McNemar test of the report, repeated after every batch, does not have that property
(``benchmarks/bench_sequential.py`` measures both).

The test (one per pair of paradigms j, k). Only *discordant* queries — one of the two correct,
the other not — carry information about which is better: under "equal correct rates"
(P(j right, k wrong) = P(j wrong, k right)) each discordant query favours j with probability
½ whatever came before, so with s wins of j among n discordant queries the Beta(a, a) mixture
likelihood ratio

    E_jk = B(s + a, n − s + a) / B(a, a) / 2^−n

is a nonnegative martingale under that null (the mixture SPRT of Robbins 1970; Johari et al.
2017 "Peeking at A/B tests"), and by Ville's inequality P(sup_n E_jk ≥ 1/α') ≤ α'. Each of
the m = K(K−1)/2 pairs of a cell's K paradigms gets α/m, a share s (``test_share``, 0.9) of it
for this test (threshold m/(s·α)) and the rest for the discordance rate below, so the chance
that *any* pair is ever declared different when all are equal — or that any pair's bound
below ever misses — is at most α (Bonferroni). Only the equivalence stop and the reported
bound need the discordance rate, so most of the level goes to the test.

The rule after each look:

* a pair whose E crosses m/(s·α) is a *strict* crossing: the paradigm with fewer wins is worse at
  the cell's level α;
* a paradigm that a rival beats at the per-pair **drop level** (E ≥ 1/drop_alpha, a strict
  crossing included) is **dropped**: it is not run on later queries (the saving) — except that
  the last rival of the leader falls only to a strict crossing (such a drop is held back and
  both keep running);
* one paradigm left → **decided**. A decided cell always rests on at least one strict crossing,
  so when all paradigms are equally good the chance of ever calling a winner is at most α; a
  claim about an earlier dropped paradigm rests on the drop level (each drop is recorded with
  the level it passed);
* every pair still run has its difference in correct rates inside ±margin (``margin``, 10
  points: the gap ``plan`` resolves by default) by its confidence sequence → **equivalent**;
* optionally (``futility_min`` > 0) stop once the leader and the runner-up cannot be told apart
  before the queries run out (projected with an optimistic win share) → **undecided**;
* else go on until the queries or the budget run out → **undecided** (the current leader is
  reported as such, never as decided).

The confidence sequence for a pair's difference δ = P(j right, k wrong) − P(j wrong, k right)
= q (2π − 1) combines two mixture sequences, at level (1 − s)·α/m for the discordance rate q
over all paired queries and s·α/m for the win share π over the discordant ones (the test's
own: π's lower end exceeds ½ exactly when E crosses m/(s·α)); each is the set of values whose
Beta-mixture likelihood ratio stays below 1/its level (the same martingale argument), and δ's bounds
are the extremes of q (2π − 1) over the two intervals — so a decided pair's lower bound is ≥ 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betaln

DECIDED, EQUIVALENT, UNDECIDED = "decided", "equivalent", "undecided"


def log_evalue(wins, n, a: float) -> np.ndarray:
    """log E for ``wins`` of one side among ``n`` discordant pairs (arrays broadcast): the
    Beta(a, a) mixture likelihood ratio against a fair coin."""
    wins = np.asarray(wins, dtype=float)
    n = np.asarray(n, dtype=float)
    return betaln(wins + a, n - wins + a) - betaln(a, a) + n * math.log(2.0)


def mixture_interval(k, n, level: float, a: float = 1.0, iters: int = 34):
    """{p: Beta(a, a)-mixture likelihood ratio of ``k`` successes in ``n`` against p < 1/level}
    (arrays broadcast): a confidence sequence for a Bernoulli rate, valid at every n at once.
    The log ratio is convex in p with its minimum at k/n, so the set is an interval; its ends
    are found by bisection on each side. n = 0 gives [0, 1]."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    k, n = np.broadcast_arrays(k, n)
    threshold = math.log(1.0 / level)
    log_mix = betaln(k + a, n - k + a) - betaln(a, a)

    def excess(p):
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = np.where(k > 0, k * np.log(p), 0.0) + np.where(n - k > 0, (n - k) * np.log1p(-p), 0.0)
        return log_mix - ll - threshold

    mle = np.where(n > 0, k / np.maximum(n, 1), 0.5)
    lo_a, lo_b = np.zeros_like(mle), mle.copy()   # excess(lo_a) >= 0 > excess(lo_b), unless lo is 0
    hi_a, hi_b = mle.copy(), np.ones_like(mle)    # excess(hi_a) < 0 <= excess(hi_b), unless hi is 1
    for _ in range(iters):
        mid = (lo_a + lo_b) / 2
        inside = excess(mid) < 0
        lo_b = np.where(inside, mid, lo_b)
        lo_a = np.where(inside, lo_a, mid)
        mid = (hi_a + hi_b) / 2
        inside = excess(mid) < 0
        hi_a = np.where(inside, mid, hi_a)
        hi_b = np.where(inside, hi_b, mid)
    lo = np.where(excess(np.zeros_like(mle)) < 0, 0.0, lo_b)
    hi = np.where(excess(np.ones_like(mle)) < 0, 1.0, hi_a)
    empty = n <= 0
    return np.where(empty, 0.0, lo), np.where(empty, 1.0, hi)


def difference_bounds(n10, n01, n, level: float, a: float = 1.0, share: float = 0.5):
    """Confidence-sequence bounds (level ``level``) on δ = P(10) − P(01) from ``n`` paired
    queries of which ``n10`` favour the first side and ``n01`` the second (arrays broadcast):
    ``share`` of the level goes to the win share π, the rest to the discordance rate q."""
    n10 = np.asarray(n10, dtype=float)
    n01 = np.asarray(n01, dtype=float)
    q_lo, q_hi = mixture_interval(n10 + n01, n, level * (1 - share), 1.0)
    p_lo, p_hi = mixture_interval(n10, n10 + n01, level * share, a)
    corners = np.stack([q * (2 * p - 1) for q in (q_lo, q_hi) for p in (p_lo, p_hi)])
    return corners.min(axis=0), corners.max(axis=0)


@dataclass
class Settings:
    """The rule's settings (config section ``decisions``)."""

    alpha: float = 0.05
    margin: float = 0.10      # equivalence: every pair still run within ±margin (the plan's default gap)
    prior: float = 4.0        # a of the Beta(a, a) mixture on the discordant win share
    batch: int = 10           # queries per batch (one look after each)
    seed: int = 0
    futility_min: int = 0     # queries before a cell may stop as futile (0: never)
    drop_alpha: float = 0.4   # per-pair level at which a worse paradigm stops being run
    test_share: float = 0.9   # share of a pair's level spent on the win share (the test); the rest on q

    @classmethod
    def from_config(cls, config) -> "Settings":
        sec = dict(config.section("decisions") or {}) if hasattr(config, "section") else {}
        out = cls()
        for key in ("alpha", "margin", "prior", "drop_alpha", "test_share"):
            if sec.get(key) is not None:
                setattr(out, key, float(sec[key]))
        for key in ("batch", "seed", "futility_min"):
            if sec.get(key) is not None:
                setattr(out, key, int(sec[key]))
        if not 0 < out.alpha < 1 or out.margin < 0 or out.prior <= 0 or out.batch < 1 or not 0 < out.test_share < 1:
            raise ValueError("decisions: alpha and test_share must lie in (0, 1), margin >= 0, prior > 0 and batch >= 1 "
                             f"(got alpha={out.alpha}, test_share={out.test_share}, margin={out.margin}, "
                             f"prior={out.prior}, batch={out.batch})")
        return out


@dataclass
class CellState:
    """Where one cell's comparison stands: built from its paired outcomes by :func:`evaluate`."""

    state: str
    leader: str | None
    active: list[str]
    dropped: dict[str, dict] = field(default_factory=dict)  # paradigm -> {by, after (queries), level}
    stop_reason: str | None = None
    n_queries: int = 0
    bound: float | None = None
    correct: dict[str, int] = field(default_factory=dict)
    asked: dict[str, int] = field(default_factory=dict)
    pairs: list[dict] = field(default_factory=list)

    def detail(self) -> dict:
        return {"active": self.active, "dropped": self.dropped, "correct": self.correct, "asked": self.asked,
                "pairs": self.pairs}


def step(n10, both, active, settings: Settings, horizon=None, n_done=None):
    """One look at many sequences at once (the rule of the module docstring).

    ``n10[r, j, k]``: queries of sequence r on which paradigm j was right and k wrong, both run;
    ``both[r, j, k]``: queries both were run on; ``active[r, k]``: paradigm k still run;
    Returns ``(remaining, state, beaten_by, strict)``: the paradigms still run after this
    look; the state code per sequence (0 going on, 1 decided, 2 equivalent, 3 futile — stop
    undecided, only when ``horizon``, the queries a sequence can have, and ``n_done`` are
    given);
    per paradigm dropped at this look the index of the first rival that beat it (−1 where
    none); and per paradigm whether a rival beat it at the strict threshold."""
    n10 = np.asarray(n10)
    R, K, _ = n10.shape
    m = max(1, K * (K - 1) // 2)
    off = ~np.eye(K, dtype=bool)[None]
    w, lose = n10, n10.transpose(0, 2, 1)
    pair = active[:, :, None] & active[:, None, :] & off
    log_e = log_evalue(w, w + lose, settings.prior)
    strict = pair & (w > lose) & (log_e >= log_threshold(K, settings.alpha, settings.test_share))
    beats = strict | (pair & (w > lose) & (log_e >= math.log(1.0 / settings.drop_alpha)))
    lost = beats.any(axis=1)
    remaining = active & ~lost
    empty = ~remaining.any(axis=1)
    if empty.any():  # a cycle of crossings: keep the most-winning ones
        wins = np.where(pair, w, 0).sum(axis=2)
        wins = np.where(active, wins, -1)
        remaining = np.where(empty[:, None], wins == wins.max(axis=1, keepdims=True), remaining)
    # The last rival falls only to a strict crossing: a drop at the drop level that would
    # leave one paradigm is held back (both keep running), so "decided" always rests on α.
    soft = lost & ~strict.any(axis=1) & active
    hold = (remaining.sum(axis=1) == 1)[:, None] & soft
    remaining = remaining | hold
    dropped_now = active & ~remaining
    beaten_by = np.where(dropped_now, beats.argmax(axis=1), -1)
    decided = remaining.sum(axis=1) == 1
    equivalent = np.zeros(R, dtype=bool)
    if settings.margin > 0:
        lo, hi = difference_bounds(w, lose, both, settings.alpha / m, settings.prior, settings.test_share)
        upper = np.triu(np.ones((K, K), dtype=bool), 1)[None]
        rem_pair = remaining[:, :, None] & remaining[:, None, :] & upper
        ok = ~rem_pair | ((both > 0) & (lo > -settings.margin) & (hi < settings.margin))
        equivalent = ~decided & ok.all(axis=(1, 2))
    futile = np.zeros(R, dtype=bool)
    if horizon is not None and settings.futility_min > 0:
        futile = ~decided & ~equivalent & _futile(n10, both, remaining, horizon, n_done, settings)
    state = np.select([decided, equivalent, futile], [1, 2, 3], 0)
    return remaining, state, beaten_by, strict.any(axis=1)


def _futile(n10, both, remaining, horizon, n_done, settings: Settings) -> np.ndarray:
    """Per sequence: can the leader and the runner-up still be told apart before the queries
    run out? Projected to ``horizon`` queries with the pair's discordance rate so far and an
    optimistic win share (the upper end of a one-sided 90 % normal interval on the share), the
    e-value would still stay below the threshold: going on cannot decide the cell, it only
    spends (a stop for futility never declares anything, so it costs no error)."""
    R, K, _ = n10.shape
    correct_share = np.where(remaining, (n10.sum(axis=2) - n10.sum(axis=1)), -np.inf)  # net wins vs all
    order = np.argsort(-correct_share, axis=1, kind="stable")
    r = np.arange(R)
    lead, second = order[:, 0], order[:, 1]
    w = n10[r, lead, second].astype(float)
    lose = n10[r, second, lead].astype(float)
    n = both[r, lead, second].astype(float)
    nd = w + lose
    share = np.where(nd > 0, np.maximum(w, lose) / np.maximum(nd, 1), 0.5)
    optimistic = np.minimum(1.0, share + 1.2816 * np.sqrt(np.maximum(share * (1 - share), 0.25 / np.maximum(nd, 1))
                                                        / np.maximum(nd, 1)))
    rate = np.where(n > 0, nd / np.maximum(n, 1), 0.0)
    left = np.maximum(np.asarray(horizon, dtype=float) - np.asarray(n_done, dtype=float), 0.0)
    nd_end = nd + left * np.maximum(rate, 1.0 / np.maximum(n, 1))
    wins_end = np.maximum(w, lose) + (nd_end - nd) * optimistic
    reachable = log_evalue(wins_end, nd_end, settings.prior) >= log_threshold(K, settings.alpha, settings.test_share)
    enough = np.asarray(n_done) >= settings.futility_min
    return enough & ~reachable & (remaining.sum(axis=1) > 1)


def log_threshold(K: int, alpha: float, share: float = 0.5) -> float:
    """log of the e-value a pair must reach among K paradigms: m/(share·α), m = K(K−1)/2 — the
    pair's share α/m of the error, ``share`` of it for the win share (the test) and the rest
    for the discordance rate, so a decided pair's confidence sequence for the difference lies
    above 0."""
    m = max(1, K * (K - 1) // 2)
    return math.log(m / (share * alpha))


STATES = {0: UNDECIDED, 1: DECIDED, 2: EQUIVALENT, 3: UNDECIDED}
STOP_REASONS = {1: "decided", 2: "equivalent", 3: "futile"}


def evaluate(paradigms: list[str], looks: list[dict[str, dict]], settings: Settings) -> CellState:
    """Replay a cell's sequence look by look and return where it stands.

    ``looks``: one mapping per batch, in sequence order, paradigm → {query key: 0/1} for the
    paradigms run on that batch's queries (a dropped paradigm is not run on later batches; a
    query counts for a pair only where both were run on it). The replay makes the state depend
    only on the outcomes and their order, so a later run that continues the sequence reaches
    the same state at the same look as one that never stopped."""
    K = len(paradigms)
    m = max(1, K * (K - 1) // 2)
    idx = {p: i for i, p in enumerate(paradigms)}
    n10 = np.zeros((1, K, K), dtype=np.int64)
    both = np.zeros((1, K, K), dtype=np.int64)
    correct = np.zeros(K, dtype=np.int64)
    asked = np.zeros(K, dtype=np.int64)
    active = np.ones((1, K), dtype=bool)
    dropped: dict[str, dict] = {}
    n_queries = 0
    code = 0
    for look in looks:
        run = [p for p in paradigms if active[0, idx[p]] and p in look]
        keys = set().union(*(look[p].keys() for p in run)) if run else set()
        n_queries += len(keys)
        for p in run:
            correct[idx[p]] += int(sum(int(v) for v in look[p].values()))
            asked[idx[p]] += len(look[p])
        for a_i, pa in enumerate(run):
            for pb in run[a_i + 1:]:
                common = set(look[pa]) & set(look[pb])
                j, k = idx[pa], idx[pb]
                n10[0, j, k] += sum(1 for q in common if look[pa][q] and not look[pb][q])
                n10[0, k, j] += sum(1 for q in common if look[pb][q] and not look[pa][q])
                both[0, j, k] += len(common)
                both[0, k, j] += len(common)
        remaining, state, beaten_by, strict = step(n10, both, active, settings)
        for k in np.flatnonzero(beaten_by[0] >= 0):
            dropped[paradigms[k]] = {"by": paradigms[int(beaten_by[0, k])], "after": n_queries,
                                     "level": "alpha" if strict[0, k] else "drop_alpha"}
        active = remaining
        code = int(state[0])
        if code:
            break
    still = [p for p in paradigms if active[0, idx[p]]]
    lo, hi = difference_bounds(n10[0], n10[0].T, both[0], settings.alpha / m, settings.prior, settings.test_share)
    le = log_evalue(n10[0], n10[0] + n10[0].T, settings.prior)
    pairs = [{"a": pa, "b": pb, "n": int(both[0, j, k]), "a_only": int(n10[0, j, k]), "b_only": int(n10[0, k, j]),
              "log_e": float(le[j, k]), "diff_low": float(lo[j, k]), "diff_high": float(hi[j, k])}
             for j, pa in enumerate(paradigms) for k, pb in enumerate(paradigms) if j < k and both[0, j, k]]
    rate = {p: (correct[idx[p]] / asked[idx[p]]) if asked[idx[p]] else -1.0 for p in still}
    leader = max(still, key=lambda p: (rate[p], -idx[p])) if still else None
    state_name = STATES[code]
    if state_name == DECIDED and leader is not None:
        rests_on = {p for p, d in dropped.items() if d["level"] == "alpha"}  # the strict crossings
        lows = [(r["diff_low"] if r["a"] == leader else -r["diff_high"]) for r in pairs
                if leader in (r["a"], r["b"]) and ({r["a"], r["b"]} - {leader}) <= rests_on]
        bound = min(lows) if lows else None
    else:
        spread = [max(abs(r["diff_low"]), abs(r["diff_high"])) for r in pairs if r["a"] in still and r["b"] in still]
        bound = max(spread) if spread else None
    return CellState(state=state_name, leader=leader, active=still, dropped=dropped, n_queries=n_queries,
                     bound=bound, correct={p: int(correct[idx[p]]) for p in paradigms},
                     asked={p: int(asked[idx[p]]) for p in paradigms}, pairs=pairs)
