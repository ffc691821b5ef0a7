"""The cost-share threshold of ``serve --cost-share`` (RouteLLM's calibration, for paradigms).

A router gives each question class probabilities over the paradigms. Its *expensive score* is
the probability mass on the expensive paradigms (by default every paradigm but ``llm_only``
and ``naive``: the graph-reading ones, which cost several times more tokens per question in
the paper's Table 2 and in this store). Given a share ``s`` of questions that may use an
expensive paradigm, the threshold ``τ`` is the ``1 − s`` quantile of the expensive scores of
the router's own cross-validated predictions on this store's labelled queries
(``router_predictions``): a served question whose score reaches ``τ`` is routed among all
paradigms, any other among the cheap ones only. On the calibration queries this lets exactly
the top ``s`` share through (ties aside); on served traffic the share holds as far as served
questions resemble the labelled ones — :attr:`Threshold.calibrated_share` and the served
counts (``/v1/models`` → ``ragrouter.cost_share``) say how it went.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_CHEAP = ("llm_only", "naive")
NON_PARADIGM_LABELS = ("cannot_answer", "unanswerable")


def expensive_score(probabilities: dict[str, float], cheap: tuple[str, ...] = DEFAULT_CHEAP) -> float:
    return float(sum(v for k, v in probabilities.items() if k not in cheap and k not in NON_PARADIGM_LABELS))


@dataclass
class Threshold:
    share: float  # the share of questions allowed an expensive paradigm
    tau: float  # expensive score at or above which a question is routed among all paradigms
    n: int  # calibration predictions
    calibrated_share: float  # share of the calibration predictions at or above tau
    cheap: tuple[str, ...] = DEFAULT_CHEAP

    def allows_expensive(self, probabilities: dict[str, float]) -> bool:
        return expensive_score(probabilities, self.cheap) >= self.tau

    @property
    def json_tau(self) -> float | None:
        """τ for a JSON body: ``None`` where no score can reach it (share 0; JSON has no infinity)."""
        return self.tau if np.isfinite(self.tau) else None

    def why_cheap(self) -> str:
        """Why a question was kept to the cheap paradigms (the reply's ``why``)."""
        rule = (f"below the cost-share threshold {self.tau:.3f}" if np.isfinite(self.tau)
                else f"--cost-share {self.share:.2f} allows no question an expensive paradigm")
        return f"{rule}: cheap paradigms only ({', '.join(self.cheap)})"

    def describe(self) -> str:
        rule = (f"expensive score ≥ {self.tau:.3f}" if np.isfinite(self.tau)
                else "no question may use an expensive paradigm")
        return (f"cost share {self.share:.2f}: {rule} (calibrated on {self.n} "
                f"cross-validated predictions, {self.calibrated_share:.2f} of them pass)")


def calibrate(predictions: list[dict[str, float]], share: float, cheap: tuple[str, ...] = DEFAULT_CHEAP) -> Threshold:
    """τ for ``share`` from the router's cross-validated class probabilities (see module doc)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"--cost-share must be between 0 and 1 (got {share})")
    if not predictions:
        raise ValueError("the router has no cross-validated predictions on this store to calibrate on "
                         "(run 'python cli.py routers train')")
    scores = np.sort(np.array([expensive_score(p, cheap) for p in predictions]))[::-1]  # high first
    n = len(scores)
    k = int(np.floor(share * n + 1e-9))  # how many calibration questions may pass
    if k <= 0:
        tau = float("inf")
    elif k >= n:
        tau = float(scores[-1])
    else:
        tau = float(scores[k - 1])
        if scores[k] == tau:  # a tie at the boundary would let more than k through: at most the share
            tau = float(np.nextafter(tau, np.inf))
    passed = float(np.mean(scores >= tau)) if np.isfinite(tau) else 0.0
    return Threshold(share, tau, n, passed, tuple(cheap))
