"""ε-best paradigm of a cell from paired outcomes, anytime-valid (``run --until-decided``).

Every paradigm still in the race answers the same queries, in a seeded random order, in
batches; after each batch the rule below looks at the paired outcomes (judged correct or not)
and may stop. Its error level holds whatever the number of looks, so a cell can be looked at
after every batch and continued by a later run.

**The evidence.** For an ordered pair (j, k) of paradigms and a query both ran, D = X_j − X_k
∈ {−1, 0, 1}; δ_jk = E D is the difference of their correct rates. For a value m the wealth of
a bettor who stakes a predictable fraction λ_i ∈ [0, λ_max] on "D above m",

    W_jk(m) = ∏_i (1 + λ_i (D_i − m)),

is a nonnegative supermartingale whenever δ_jk ≤ m (λ_max < 1 keeps every factor positive for
every m ≤ 0), so by Ville's inequality P(sup_t W_jk(m) ≥ 1/a) ≤ a (Waudby-Smith & Ramdas 2023,
"Estimating means of bounded random variables by betting", JRSS-B: the one-sided hedged
capital process). One stake sequence serves every m, and W_jk(m) falls as m grows, so
{m : W_jk(m) < 1/a} is a lower confidence sequence for δ_jk: "δ_jk > m" is claimed once W_jk(m)
reaches 1/a. The stake is the predictable plug-in (their aGRAPA): λ = (μ̂ + ε) / (σ̂² + (μ̂ + ε)²)
from the pair's earlier batches (mean μ̂, variance σ̂², each shrunk toward no difference and
discordance ``prior_discordance`` by ``prior_queries`` pseudo-queries), clipped to [0, λ_max]:
the stake that grows fastest when the question is "is j within ε of k or better".

**The level.** Each ordered pair gets a = α/K (K paradigms in the cell). The claims below
can only be wrong through a pair (j, b) with b a best paradigm, K − 1 pairs, so

* with one best paradigm b, every claim of the cell holds together with probability ≥ 1 −
  α(K − 1)/K: b is never eliminated and the ε claim about the leader is true;
* with all paradigms equal, "decided" needs K − 1 wrong eliminations of K different
  paradigms, each at most α(K − 1)/K likely: at most α (Markov on the count of wrong ones);
* whatever the truth, a paradigm that is eliminated is a best one with probability ≤ α.

**The rule after each look** (paradigms still run are the *survivors*):

* k is **eliminated** once a survivor j has W_jk(0) ≥ K/α: "k is worse than j", so k is not
  the best; it is not run on later queries (the saving);
* one survivor left → **decided**: "X is the best paradigm";
* a survivor X with W_Xk(−ε) ≥ K/α for every other survivor k → **ε-best** ("eps_best"):
  "X is within ε of the best" (the best is a survivor, and X is within ε of each survivor);
* else go on until the queries or the budget run out → **undecided**: only the eliminations
  are claims; the current leader is no decision.

Every state also claims each elimination ("k is worse than the best"), at the same level:
there is no second, looser level behind any claim. ``epsilon`` = 0 asks for the best itself.
The queries are taken as draws from the cell's query distribution (a seeded random order);
the rates are that distribution's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

DECIDED, EPS_BEST, UNDECIDED = "decided", "eps_best", "undecided"
EQUIVALENT = "equivalent"  # a state of stores written before the ε-best rule (read, never written)
STATES = {0: UNDECIDED, 1: DECIDED, 2: EPS_BEST, 3: UNDECIDED}
STOP_REASONS = {1: "decided", 2: "eps_best", 3: "futile"}


@dataclass
class Settings:
    """The rule's settings (config section ``decisions``)."""

    alpha: float = 0.05
    epsilon: float = 0.02           # the ε of the ε-best claim (2 points)
    batch: int = 10                 # queries per batch (one look after each)
    seed: int = 0
    bet_max: float = 0.8            # λ_max: the largest share of wealth staked on one query
    prior_queries: float = 10.0     # pseudo-queries behind the stake's plug-in estimates
    prior_discordance: float = 0.3  # their discordance (share of queries two paradigms disagree on)
    futility: bool = True           # stop a cell whose claim cannot be reached before its queries run out
    futility_z: float = 2.5         # the optimism of that projection (upper z of each pair's mean)
    futility_min: int = 50          # queries before a cell may stop as futile

    @classmethod
    def from_config(cls, config) -> "Settings":
        sec = dict(config.section("decisions") or {}) if hasattr(config, "section") else {}
        out = cls()
        for key in ("alpha", "epsilon", "bet_max", "prior_queries", "prior_discordance"):
            if sec.get(key) is not None:
                setattr(out, key, float(sec[key]))
        for key in ("batch", "seed", "futility_min"):
            if sec.get(key) is not None:
                setattr(out, key, int(sec[key]))
        if sec.get("futility") is not None:
            out.futility = bool(sec["futility"])
        if sec.get("futility_z") is not None:
            out.futility_z = float(sec["futility_z"])
        out.check("decisions")
        return out

    def check(self, where: str = "decisions") -> None:
        if not (0 < self.alpha < 1 and 0 <= self.epsilon < 1 and 0 < self.bet_max < 1 and self.batch >= 1
                and self.prior_queries > 0 and 0 < self.prior_discordance <= 1):
            raise ValueError(f"{where}: alpha and bet_max must lie in (0, 1), epsilon in [0, 1), batch >= 1, "
                             f"prior_queries > 0 and prior_discordance in (0, 1] (got alpha={self.alpha}, "
                             f"epsilon={self.epsilon}, bet_max={self.bet_max}, batch={self.batch}, "
                             f"prior_queries={self.prior_queries}, prior_discordance={self.prior_discordance})")


def log_threshold(K: int, alpha: float) -> float:
    """log of the wealth a pair's test must reach among K paradigms: K/α."""
    return math.log(max(K, 2) / alpha)


def stake(s, q, n, settings: Settings) -> np.ndarray:
    """The predictable plug-in stake from a pair's earlier sums (arrays broadcast): ``s`` = Σ D,
    ``q`` = Σ D² (discordant queries), ``n`` queries."""
    n0 = settings.prior_queries
    mu = np.asarray(s, dtype=float) / (np.asarray(n, dtype=float) + n0)
    second = (np.asarray(q, dtype=float) + n0 * settings.prior_discordance) / (np.asarray(n, dtype=float) + n0)
    c = mu + settings.epsilon
    denom = np.maximum(second - mu * mu, 1e-6) + c * c
    return np.clip(c / denom, 0.0, settings.bet_max)


def log_growth(lam, up, zero, down, m) -> np.ndarray:
    """log of ∏(1 + λ(D − m)) over a batch with ``up`` D = +1, ``zero`` D = 0, ``down`` D = −1."""
    lam = np.asarray(lam, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = up * np.log1p(lam * (1 - m)) + down * np.log1p(-lam * (1 + m))
        if m != 0:
            out = out + zero * np.log1p(-lam * m)
    return out


@dataclass
class Race:
    """Where many sequences of one cell stand (arrays over sequences r and ordered pairs j, k)."""

    K: int
    R: int = 1

    def __post_init__(self):
        shape = (self.R, self.K, self.K)
        self.s = np.zeros(shape)        # Σ D over queries both ran
        self.q = np.zeros(shape)        # discordant queries
        self.n = np.zeros(shape)        # queries both ran
        self.log_w0 = np.zeros(shape)   # log W_jk(0): "j better than k"
        self.log_we = np.zeros(shape)   # log W_jk(−ε): "j within ε of k or better"
        self.active = np.ones((self.R, self.K), dtype=bool)
        self.history: list[tuple] = []  # with keep_history: per batch (λ, up, zero, down) for the bounds

    def add(self, n10, nb, settings: Settings, rows=None, keep_history: bool = False) -> None:
        """One batch: ``n10[r, j, k]`` queries with j right and k wrong among the ``nb`` of the
        batch (a number, one per sequence, or one per pair ``[r, j, k]``), for the sequences
        ``rows`` (default all); only pairs of survivors count."""
        rows = slice(None) if rows is None else rows
        act = self.active[rows]
        pair = act[:, :, None] & act[:, None, :] & ~np.eye(self.K, dtype=bool)[None]
        up = np.where(pair, n10, 0).astype(float)
        down = up.transpose(0, 2, 1)
        nb = np.asarray(nb, dtype=float)
        nbv = np.where(pair, nb.reshape(-1, 1, 1) if nb.ndim == 1 else nb, 0.0)
        zero = nbv - up - down
        lam = np.where(pair, stake(self.s[rows], self.q[rows], self.n[rows], settings), 0.0)
        self.log_w0[rows] += log_growth(lam, up, zero, down, 0.0)
        self.log_we[rows] += log_growth(lam, up, zero, down, -settings.epsilon)
        self.s[rows] += up - down
        self.q[rows] += up + down
        self.n[rows] += nbv
        if keep_history:
            self.history.append((lam[0].copy(), up[0].copy(), zero[0].copy(), down[0].copy()))

    def look(self, settings: Settings, correct=None, left=None, done=None):
        """The rule after a batch. Returns (state code per sequence: 0 going on, 1 decided, 2
        ε-best, 3 futile; leader per sequence; the eliminating survivor per paradigm eliminated
        at this look, −1 where none). ``correct[r, k]`` (the survivors' correct counts on their
        common queries) picks the leader of a sequence that makes no ε claim; ``left`` (queries
        the sequence may still run) and ``done`` (queries run) enable the futility stop."""
        K, thr = self.K, log_threshold(self.K, settings.alpha)
        act = self.active
        pair = act[:, :, None] & act[:, None, :] & ~np.eye(K, dtype=bool)[None]
        beats = pair & (self.log_w0 >= thr)
        lost = beats.any(axis=1) & act
        remaining = act & ~lost
        empty = ~remaining.any(axis=1)
        if empty.any():  # a cycle of wrong eliminations: keep the survivors with the most wealth
            score = np.where(pair, self.log_w0, 0.0).sum(axis=2)
            score = np.where(act, score, -np.inf)
            remaining[empty] = (score == score.max(axis=1, keepdims=True))[empty]
        by = np.where(act & ~remaining, np.where(beats, self.log_w0, -np.inf).argmax(axis=1), -1)
        self.active = remaining
        pair = remaining[:, :, None] & remaining[:, None, :] & ~np.eye(K, dtype=bool)[None]
        # the ε claim for X: every other survivor k has W_Xk(−ε) at the threshold
        weakest = np.where(pair, self.log_we, np.inf).min(axis=2)  # per X: its weakest evidence
        weakest = np.where(remaining, weakest, -np.inf)
        best = weakest.argmax(axis=1)
        eps_ok = weakest.max(axis=1) >= thr
        decided = remaining.sum(axis=1) == 1
        futile = np.zeros(self.R, dtype=bool)
        if settings.futility and left is not None:
            futile = ~decided & ~eps_ok & (np.asarray(done) >= settings.futility_min) & \
                ~self._reachable(settings, np.asarray(left, dtype=float), pair, thr)
        state = np.select([decided, eps_ok, futile], [1, 2, 3], 0)
        if correct is None:
            correct = np.zeros((self.R, K))
        rate = np.where(remaining, np.asarray(correct, dtype=float), -np.inf)
        leader = np.where(state > 0, best, rate.argmax(axis=1))
        leader = np.where(decided, remaining.argmax(axis=1), leader)
        return state, leader, by

    def _reachable(self, settings: Settings, left, pair, thr) -> np.ndarray:
        """Per sequence: could a claim still be reached within ``left`` more queries? Each pair's
        wealth is projected with the growth rate c²/(2(σ² + c²)) of a well-set stake, c = its
        mean's optimistic end (``futility_z`` standard errors up) less the tested value; a
        claim is reachable when some survivor X could cover every other survivor by its ε test
        or see it eliminated. A futile stop claims nothing, so it costs no error."""
        n0 = settings.prior_queries
        n = self.n
        mu = self.s / np.maximum(n, 1)
        var = np.maximum((self.q + n0 * settings.prior_discordance) / (n + n0) - mu * mu, 1e-4)
        opt = mu + settings.futility_z * np.sqrt(var / np.maximum(n, 1))
        left = left.reshape(-1, 1, 1)

        def projected(log_w, m):
            c = np.maximum(opt - m, 0.0)
            return log_w + left * c * c / (2 * (var + c * c))

        covered = pair & (projected(self.log_we, -settings.epsilon) >= thr)
        gone = (pair & (projected(self.log_w0, 0.0) >= thr)).any(axis=1)          # per k: someone may eliminate it
        ok = covered | gone[:, None, :] | ~pair
        return (ok.all(axis=2) & self.active).any(axis=1)

    def lower_bounds(self, settings: Settings) -> np.ndarray:
        """Sequence 0's lower confidence bound (each at α/K) on δ_jk for every ordered pair:
        inf {m : W_jk(m) < K/α}, by bisection over m ∈ [−1, 1) (W falls as m grows; above
        1/λ_max − 1 each stake is cut to what m allows, :func:`_log_w_at`, so a lead is not
        capped there). Needs ``keep_history``; a pair never run together gets −1."""
        thr = log_threshold(self.K, settings.alpha)
        top = 1.0 - 1e-9
        lo, hi = np.full((self.K, self.K), -1.0), np.full((self.K, self.K), top)
        at_top = _log_w_at(self.history, hi) >= thr
        for _ in range(40):
            mid = (lo + hi) / 2
            rejected = _log_w_at(self.history, mid) >= thr
            lo = np.where(rejected, mid, lo)
            hi = np.where(rejected, hi, mid)
        out = np.where(at_top, top, lo)
        return np.where(self.n[0] > 0, out, -1.0)


# The largest share of wealth a stake may risk on a loss when W(m) is read off for a value m
# above 1/λ_max − 1: the stake is cut to STAKE_CUT / (1 + m) there (a predictable stake still),
# so the wealth stays a test martingale for every m < 1 and falls as m grows.
STAKE_CUT = 0.9


def _log_w_at(history, m) -> np.ndarray:
    """log W_jk(m_jk) for a matrix of values m (one per ordered pair)."""
    out = np.zeros_like(m)
    for lam, up, zero, down in history:
        lam = np.minimum(lam, STAKE_CUT / (1 + m))
        with np.errstate(divide="ignore", invalid="ignore"):
            out += up * np.log1p(lam * (1 - m)) + zero * np.log1p(-lam * m) + down * np.log1p(-lam * (1 + m))
    return out


def chained_bounds(lows: np.ndarray, ran: np.ndarray) -> np.ndarray:
    """The best lower bound on δ_jk that the pair bounds give together: the largest sum of
    ``lows`` along a chain j → i → … → k of pairs run together (``ran``), at most K − 1 steps.
    A paradigm dropped by another than the leader was never raced against the leader to the
    end; its pair bound with the leader stays where it froze (it can be negative), while the
    chain through the paradigm that dropped it holds whenever the pair bounds do."""
    K = lows.shape[0]
    best = np.where(ran, lows, -np.inf)
    np.fill_diagonal(best, -np.inf)
    for _ in range(K - 2):
        via = (best[:, :, None] + np.where(ran, lows, -np.inf)[None, :, :]).max(axis=1)
        np.fill_diagonal(via, -np.inf)
        best = np.maximum(best, via)
    return best


@dataclass
class CellState:
    """Where one cell's comparison stands: built from its paired outcomes by :func:`evaluate`."""

    state: str
    leader: str | None
    active: list[str]
    dropped: dict[str, dict] = field(default_factory=dict)  # paradigm -> {by, after (queries)}
    stop_reason: str | None = None
    n_queries: int = 0
    bound: float | None = None
    correct: dict[str, int] = field(default_factory=dict)
    asked: dict[str, int] = field(default_factory=dict)
    pairs: list[dict] = field(default_factory=list)
    claim: str = ""
    alpha: float = 0.05
    epsilon: float = 0.02

    def detail(self) -> dict:
        return {"active": self.active, "dropped": self.dropped, "correct": self.correct, "asked": self.asked,
                "pairs": self.pairs, "claim": self.claim, "epsilon": self.epsilon}


def claim_text(state: str, leader: str | None, dropped: dict, alpha: float, epsilon: float) -> str:
    """Exactly what the state claims, at the cell's level."""
    worse = sorted(dropped)
    tail = (f"; {', '.join(worse)} {'is' if len(worse) == 1 else 'are'} worse than the best" if worse else "")
    if state == DECIDED:
        return f"{leader} is the best paradigm{tail} (each at confidence {1 - alpha:.0%})"
    if state == EPS_BEST:
        return (f"{leader} is within {epsilon * 100:g} points of the best paradigm{tail} "
                f"(each at confidence {1 - alpha:.0%})")
    if worse:
        return f"no best paradigm named yet{tail} (at confidence {1 - alpha:.0%}); the leader is no decision"
    return "no claim yet; the leader is no decision"


def evaluate(paradigms: list[str], looks: list[dict[str, dict]], settings: Settings,
             horizon: int | None = None) -> CellState:
    """Replay a cell's sequence look by look and return where it stands.

    ``looks``: one mapping per batch, in sequence order, paradigm → {query key: 0/1} for the
    paradigms run on that batch's queries (an eliminated paradigm is not run on later batches; a
    query counts for a pair only where both were run on it). The replay makes the state depend
    only on the outcomes and their order, so a later run that continues the sequence reaches
    the same state at the same look as one that never stopped. ``horizon``: the queries the
    cell has (the futility stop looks at what is left of them)."""
    K = len(paradigms)
    idx = {p: i for i, p in enumerate(paradigms)}
    race = Race(K, 1)
    correct = np.zeros(K, dtype=np.int64)
    asked = np.zeros(K, dtype=np.int64)
    common_correct = np.zeros(K, dtype=np.int64)  # correct answers on the survivors' common queries
    dropped: dict[str, dict] = {}
    n_queries, code, lead = 0, 0, 0
    for look in looks:
        run = [p for p in paradigms if race.active[0, idx[p]] and p in look]
        keys = set().union(*(look[p].keys() for p in run)) if run else set()
        n_queries += len(keys)
        for p in run:
            correct[idx[p]] += int(sum(int(v) for v in look[p].values()))
            asked[idx[p]] += len(look[p])
        shared = set.intersection(*(set(look[p]) for p in run)) if run else set()
        n10 = np.zeros((1, K, K), dtype=np.int64)
        for pa in run:
            common_correct[idx[pa]] += sum(int(look[pa][q]) for q in shared)
            for pb in run:
                if pa != pb:
                    common = set(look[pa]) & set(look[pb])
                    n10[0, idx[pa], idx[pb]] = sum(1 for q in common if look[pa][q] and not look[pb][q])
        # queries both ran, per pair (a batch is run by every survivor on all its queries)
        nb = np.array([[len(set(look.get(pa, {})) & set(look.get(pb, {}))) for pb in paradigms] for pa in paradigms])
        race.add(n10, nb[None], settings, keep_history=True)
        left = None if horizon is None else np.array([max(0, horizon - n_queries)])
        state, leader, by = race.look(settings, common_correct[None], left=left, done=np.array([n_queries]))
        for k in np.flatnonzero(by[0] >= 0):
            dropped[paradigms[k]] = {"by": paradigms[int(by[0, k])], "after": n_queries}
        code, lead = int(state[0]), int(leader[0])
        if code:
            break
    still = [p for p in paradigms if race.active[0, idx[p]]]
    lows = race.lower_bounds(settings)
    n = race.n[0]
    pairs = [{"a": pa, "b": pb, "n": int(n[j, k]), "a_only": int(race.s[0, j, k] + race.q[0, j, k]) // 2,
              "b_only": int(race.q[0, j, k] - race.s[0, j, k]) // 2, "log_w_better": float(race.log_w0[0, j, k]),
              "log_w_within": float(race.log_we[0, j, k]), "diff_low": float(lows[j, k]),
              "diff_high": float(-lows[k, j])}
             for j, pa in enumerate(paradigms) for k, pb in enumerate(paradigms) if j < k and n[j, k]]
    leader = paradigms[lead] if still else None
    if leader is not None and not looks:
        leader = None
    state_name = STATES[code]
    others = [idx[p] for p in (still if state_name != DECIDED else paradigms) if p != leader]
    bound = None
    if leader is not None and others:
        # decided: the leader's lead over every other paradigm, through the paradigm that dropped
        # it where it was not raced against the leader to the end; otherwise over the survivors
        held = chained_bounds(lows, n > 0) if state_name == DECIDED else np.where(n > 0, lows, -np.inf)
        vals = [float(held[idx[leader], k]) for k in others if np.isfinite(held[idx[leader], k])]
        bound = min(vals) if vals else None
    return CellState(state=state_name, leader=leader, active=still, dropped=dropped, n_queries=n_queries,
                     stop_reason=STOP_REASONS.get(code),
                     bound=bound, correct={p: int(correct[idx[p]]) for p in paradigms},
                     asked={p: int(asked[idx[p]]) for p in paradigms}, pairs=pairs,
                     claim=claim_text(state_name, leader, dropped, settings.alpha, settings.epsilon),
                     alpha=settings.alpha, epsilon=settings.epsilon)


def _look_counts(look: dict[str, dict], run: list[str], paradigms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """One batch's paired counts: n10[j, k] (queries j got right and k wrong) and nb[j, k]
    (queries both ran), over the paradigms of ``run``."""
    K = len(paradigms)
    idx = {p: i for i, p in enumerate(paradigms)}
    n10 = np.zeros((K, K), dtype=np.int64)
    nb = np.zeros((K, K), dtype=np.int64)
    for pa in run:
        for pb in run:
            if pa != pb:
                common = set(look[pa]) & set(look[pb])
                n10[idx[pa], idx[pb]] = sum(1 for q in common if look[pa][q] and not look[pb][q])
                nb[idx[pa], idx[pb]] = len(common)
    return n10, nb


def reach_chance(paradigms: list[str], looks: list[dict[str, dict]], settings: Settings, horizon: int,
                 reps: int = 400, seed: int = 0) -> float | None:
    """The estimated chance that the rule would still reach a claim (decided or ε-best) if the
    cell went on to ``horizon`` queries instead of stopping as futile: the looks so far are
    replayed, then the rest of the queries are drawn from the queries every survivor ran (their
    outcomes paired, as a query's outcomes are) under Dirichlet weights drawn per sequence (a
    Bayesian bootstrap), ``reps`` times, and the rule runs on without its futility stop. A plug-in estimate — it takes the cell's future to
    look like its past — so it says "unlikely", not "impossible". None without a survivor's
    shared query to draw from."""
    K = len(paradigms)
    idx = {p: i for i, p in enumerate(paradigms)}
    settings = Settings(**{**settings.__dict__, "futility": False})
    race = Race(K, reps)
    common_correct = np.zeros((reps, K), dtype=np.int64)
    n_queries, reached = 0, np.zeros(reps, dtype=bool)
    for look in looks:
        run = [p for p in paradigms if race.active[0, idx[p]] and p in look]
        keys = set().union(*(look[p].keys() for p in run)) if run else set()
        n_queries += len(keys)
        shared = set.intersection(*(set(look[p]) for p in run)) if run else set()
        for p in run:
            common_correct[:, idx[p]] += sum(int(look[p][q]) for q in shared)
        n10, nb = _look_counts(look, run, paradigms)
        race.add(np.broadcast_to(n10, (reps, K, K)), np.broadcast_to(nb, (reps, K, K)), settings)
        state, _, _ = race.look(settings, common_correct)
        reached |= state > 0
    survivors = [p for p in paradigms if race.active[0, idx[p]]]
    pool = [q for look in looks if all(p in look for p in survivors)
            for q in set.intersection(*(set(look[p]) for p in survivors))]
    if not survivors or not pool:
        return None
    outcome = {p: {} for p in survivors}
    for look in looks:
        for p in survivors:
            outcome[p].update(look.get(p, {}))
    rows = np.array([[int(outcome[p][q]) for p in survivors] for q in pool], dtype=np.int64)  # (n_pool, S)
    cols = np.array([idx[p] for p in survivors])
    rng = np.random.default_rng(seed)
    # a Bayesian bootstrap: each sequence draws its future from the pool under its own Dirichlet
    # weights, so the uncertainty in the rates (not only the queries' draw) is in the chance
    cum = np.cumsum(rng.dirichlet(np.ones(len(rows)), size=reps), axis=1)
    while n_queries < horizon and not reached.all():
        b = min(settings.batch, horizon - n_queries)
        u = rng.random((reps, b))
        pick = np.minimum((cum[:, None, :] < u[:, :, None]).sum(axis=2), len(rows) - 1)
        draw = rows[pick]  # (reps, b, S)
        n10 = np.zeros((reps, K, K), dtype=np.int64)
        n10[:, cols[:, None], cols[None, :]] = np.einsum("rij,rik->rjk", draw, 1 - draw)
        nb = np.zeros((reps, K, K), dtype=np.int64)
        nb[:, cols[:, None], cols[None, :]] = b
        common_correct[:, cols] += draw.sum(axis=1)
        race.add(n10, nb, settings)
        state, _, _ = race.look(settings, common_correct)
        reached |= state > 0
        n_queries += b
    return float(reached.mean())
