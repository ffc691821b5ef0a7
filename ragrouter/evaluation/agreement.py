"""How a judge agrees with known labels: confusion matrix, Cohen's kappa with its 95 % interval,
and the correct-vs-not view that oracle labels use.

Plain functions over label lists and confusion matrices (rows = true label, columns = verdict,
in :data:`LABELS` order unless told otherwise); no store, no model. Used by
:mod:`ragrouter.evaluation.calibration` (``judge calibrate``) and the report.

Kappa's interval (:func:`kappa_interval`) is a seeded percentile bootstrap over the cases:
kappa depends on the cases only through the confusion counts, so resampling the N cases with
replacement is a multinomial draw over the cells. Resamples where kappa is undefined (chance
agreement 1: every resampled case in one row and one column) are left out. At perfect
agreement every resample agrees perfectly and the interval is [1, 1] whatever N is — so the
report gives the agreement's Wilson interval and N beside it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable

import numpy as np

LABELS = ("correct", "incorrect", "incomplete")
KAPPA_BOOT = 2000
KAPPA_SEED = 0


def confusion(y_true: list[str], y_pred: list[str], labels: Iterable[str] = LABELS) -> list[list[int]]:
    """Rows = true label, columns = predicted label, in ``labels`` order."""
    labels = list(labels)
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} true labels but {len(y_pred)} predictions")
    index = {lab: i for i, lab in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for t, p in zip(y_true, y_pred):
        if t not in index or p not in index:
            raise ValueError(f"label {t if t not in index else p!r} is not one of {', '.join(labels)}")
        m[index[t]][index[p]] += 1
    return m


def kappa_from_confusion(m) -> float:
    """Cohen's kappa of a confusion matrix; NaN when undefined (no cases, or chance agreement 1)."""
    m = [list(map(float, row)) for row in m]
    n = sum(map(sum, m))
    if n == 0:
        return math.nan
    po = sum(m[i][i] for i in range(len(m))) / n
    pe = sum(sum(m[i]) * sum(row[i] for row in m) for i in range(len(m))) / (n * n)
    if pe >= 1.0:
        return math.nan
    return (po - pe) / (1.0 - pe)


def cohen_kappa(y_true: list[str], y_pred: list[str], labels: Iterable[str] = LABELS) -> float:
    """Cohen's kappa of two label sequences; NaN when undefined (chance agreement is 1)."""
    return kappa_from_confusion(confusion(y_true, y_pred, labels))


def kappa_interval(m, level: float = 0.95, n_boot: int = KAPPA_BOOT, seed: int = KAPPA_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of Cohen's kappa over the cases of confusion matrix ``m``
    (seeded, so the same matrix always gives the same interval); (nan, nan) without cases or
    when no resample has a defined kappa."""
    arr = np.asarray(m, dtype=float)
    n = int(arr.sum())
    if n == 0:
        return math.nan, math.nan
    k = arr.shape[0]
    probs = (arr / n).ravel()
    draws = np.random.default_rng(seed).multinomial(n, probs, size=n_boot).reshape(n_boot, k, k)
    diag = np.trace(draws, axis1=1, axis2=2) / n
    rows = draws.sum(axis=2) / n
    cols = draws.sum(axis=1) / n
    pe = (rows * cols).sum(axis=1)
    ok = pe < 1.0 - 1e-12
    if not ok.any():
        return math.nan, math.nan
    kap = (diag[ok] - pe[ok]) / (1.0 - pe[ok])
    tail = (1.0 - level) / 2.0
    return float(np.quantile(kap, tail)), float(np.quantile(kap, 1.0 - tail))


def binary_matrix(m, labels: Iterable[str] = LABELS) -> list[list[int]]:
    """The 2×2 matrix correct vs. not correct of a confusion matrix in ``labels`` order."""
    labels = list(labels)
    c = labels.index("correct")
    others = [i for i in range(len(labels)) if i != c]
    tp = m[c][c]
    fn = sum(m[c][i] for i in others)
    fp = sum(m[i][c] for i in others)
    tn = sum(m[i][j] for i in others for j in others)
    return [[tp, fn], [fp, tn]]


def binary_figures(m, labels: Iterable[str] = LABELS) -> dict:
    """From a confusion matrix (``labels`` order): the 2×2 matrix correct vs. not correct, its
    accuracy, kappa and kappa's bootstrap interval (``kappa_low``, ``kappa_high``), N, the share
    of not-correct cases judged correct (``false_correct``: wrong answers that would count as
    solved) and the share of correct cases judged not correct (``missed_correct``). Shares are
    None without such cases."""
    (tp, fn), (fp, tn) = b = binary_matrix(m, labels)
    n = tp + fn + fp + tn
    low, high = kappa_interval(b)
    return {"confusion": b, "n": n, "accuracy": (tp + tn) / n if n else None,
            "kappa": kappa_from_confusion(b), "kappa_low": low, "kappa_high": high,
            "false_correct": fp / (fp + tn) if fp + tn else None,
            "missed_correct": fn / (tp + fn) if tp + fn else None}


def fmt_kappa(kappa, low=None, high=None) -> str:
    """'0.81 [0.62, 0.95]' ('undefined' when kappa is; the interval left out when unknown)."""
    def bad(v):
        return v is None or (isinstance(v, float) and math.isnan(v))

    if bad(kappa):
        return "undefined"
    return f"{kappa:.2f}" + ("" if bad(low) or bad(high) else f" [{low:.2f}, {high:.2f}]")


@dataclasses.dataclass
class JudgeFigures:
    """How one judge agrees with the calibration labels (majority over its samples per case)."""

    judge: str
    n_cases: int
    samples: int
    confusion: list[list[int]]
    """Rows = true label, columns = judged label, in :data:`LABELS` order."""
    agreement: dict[str, float | None]
    """Per true label: the share of its cases judged with that label."""
    by_kind: dict[str, float | None]
    """Per case kind of the set: the share judged with the kind's true label."""
    accuracy: float | None
    kappa: float
    mean_sample_agreement: float | None
    calls: int
    call_seconds: float
    """Sum of the ledger latencies of the judge calls (what they cost when made)."""
    unjudged: int = 0
    """Cases of the set without a verdict (every try failed: unparseable reply, timeout, …)."""

    @property
    def binary(self) -> dict:
        """Correct vs. not correct — all that the oracle label and the routers use."""
        return binary_figures(self.confusion)

    @property
    def seconds_per_call(self) -> float | None:
        return self.call_seconds / self.calls if self.calls else None

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["labels"] = list(LABELS)
        d["seconds_per_call"] = self.seconds_per_call
        d["kappa"] = None if math.isnan(self.kappa) else self.kappa
        d["binary"] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.binary.items()}
        return d
