"""How the judge agrees with a person's labels: accuracy, Cohen's kappa with a 95 % interval,
the confusion matrix and the false-correct rate, overall and per paradigm and query type.

Plain functions over (judge label, human label) pairs; no store, no MLflow. The human label is
the truth (rows of the confusion matrix), the judge's verdict the prediction (columns), in
:data:`LABELS` order. Kappa and its confusion counts come from ``evaluation.calibration``, the
same code ``judge calibrate`` uses.

Kappa's interval is the large-sample one of Fleiss, Cohen & Everitt (1969), the variance of
kappa when agreement is not chance: deterministic (no seed), per stratum, and what a
bootstrap over the reviewed items approaches (``tests/test_review_figures.py`` checks both, and
the point estimate against ``sklearn.metrics.cohen_kappa_score``). It is a large-sample
interval: below :data:`MIN_INTERVAL_N` items it is not given (with one disagreeing item the
variance formula returns 0), and at perfect agreement it is [1, 1] whatever N is — so N is
printed beside it. The bounds are clipped to [-1, 1].
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.engine import Engine

from ragrouter.evaluation.calibration import LABELS, confusion, kappa_from_confusion

Z95 = 1.959963984540054
MIN_INTERVAL_N = 10


def kappa_interval(m, z: float = Z95) -> tuple[float, float]:
    """The 95 % interval of Cohen's kappa of confusion matrix ``m`` from its large-sample
    variance (Fleiss, Cohen & Everitt 1969); (nan, nan) when kappa is undefined or the matrix
    has fewer than :data:`MIN_INTERVAL_N` items."""
    m = [[float(v) for v in row] for row in m]
    n = sum(map(sum, m))
    kappa = kappa_from_confusion(m)
    if n < MIN_INTERVAL_N or math.isnan(kappa):
        return math.nan, math.nan
    k = len(m)
    p = [[v / n for v in row] for row in m]
    rows = [sum(p[i]) for i in range(k)]
    cols = [sum(p[i][j] for i in range(k)) for j in range(k)]
    pe = sum(rows[i] * cols[i] for i in range(k))
    a = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in range(k))
    b = (1 - kappa) ** 2 * sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(k) for j in range(k) if i != j)
    c = (kappa - pe * (1 - kappa)) ** 2
    var = max(a + b - c, 0.0) / (n * (1 - pe) ** 2)
    half = z * math.sqrt(var)
    return max(-1.0, kappa - half), min(1.0, kappa + half)


@dataclass
class Agreement:
    """The judge against the reviewer on one set of reviewed runs."""

    n: int
    confusion: list[list[int]]
    """Rows = the reviewer's label, columns = the judge's, in :data:`LABELS` order."""
    accuracy: float | None
    kappa: float
    kappa_low: float
    kappa_high: float
    binary_kappa: float
    """Kappa on correct vs. not correct (what the oracle label uses)."""
    binary_low: float
    binary_high: float
    false_correct: float | None
    """Share of the runs the reviewer found not correct that the judge called correct."""
    missed_correct: float | None
    """Share of the runs the reviewer found correct that the judge did not."""
    labels: tuple = field(default=LABELS)


def agreement(pairs: list[tuple[str, str]]) -> Agreement:
    """Figures of (judge label, human label) pairs."""
    judge = [p[0] for p in pairs]
    human = [p[1] for p in pairs]
    m = confusion(human, judge, LABELS)
    n = len(pairs)
    c = LABELS.index("correct")
    others = [i for i in range(len(LABELS)) if i != c]
    tp = m[c][c]
    fn = sum(m[c][i] for i in others)
    fp = sum(m[i][c] for i in others)
    tn = n - tp - fn - fp
    b = [[tp, fn], [fp, tn]]
    low, high = kappa_interval(m)
    blow, bhigh = kappa_interval(b)
    return Agreement(n=n, confusion=m, accuracy=sum(m[i][i] for i in range(len(LABELS))) / n if n else None,
                     kappa=kappa_from_confusion(m), kappa_low=low, kappa_high=high,
                     binary_kappa=kappa_from_confusion(b), binary_low=blow, binary_high=bhigh,
                     false_correct=fp / (fp + tn) if fp + tn else None,
                     missed_correct=fn / (tp + fn) if tp + fn else None)


def by_stratum(rows: list[dict]) -> list[tuple[str, str, Agreement]]:
    """(dimension, value, figures) for all rows, then per paradigm and per query type; each
    row has ``judge_label``, ``human_label``, ``paradigm`` and ``qtype``."""
    out = [("all", "all", agreement([(r["judge_label"], r["human_label"]) for r in rows]))]
    for dim in ("paradigm", "qtype"):
        groups: dict[str, list] = defaultdict(list)
        for r in rows:
            groups[str(r[dim])].append((r["judge_label"], r["human_label"]))
        out.extend((dim, value, agreement(pairs)) for value, pairs in sorted(groups.items()))
    return out


def _num(v, fmt: str = "{:.2f}") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def kappa_text(kappa: float, low: float, high: float) -> str:
    """'0.67 [0.41, 0.93]' ('undefined' when kappa is)."""
    if math.isnan(kappa):
        return "undefined"
    return f"{kappa:.2f}" + ("" if math.isnan(low) else f" [{low:.2f}, {high:.2f}]")


TABLE_COLUMNS = ["by", "value", "n", "accuracy", "kappa [95 %]", "kappa correct/not [95 %]", "false-correct",
                 "missed-correct"]


def table_rows(strata: list[tuple[str, str, Agreement]]) -> list[tuple]:
    """Rows of :data:`TABLE_COLUMNS` for ``render_rows``."""
    return [(dim, value, a.n, _num(a.accuracy, "{:.1%}"), kappa_text(a.kappa, a.kappa_low, a.kappa_high),
             kappa_text(a.binary_kappa, a.binary_low, a.binary_high), _num(a.false_correct, "{:.1%}"),
             _num(a.missed_correct, "{:.1%}")) for dim, value, a in strata]


def confusion_lines(a: Agreement) -> list[str]:
    """The confusion matrix as text lines (rows = reviewer, columns = judge)."""
    width = max(len(x) for x in LABELS) + 2
    head = "reviewer \\ judge".ljust(width + 6) + "".join(x.rjust(width) for x in LABELS)
    return [head] + [lab.ljust(width + 6) + "".join(str(v).rjust(width) for v in row)
                     for lab, row in zip(LABELS, a.confusion)]


def human_labels(engine: Engine, corpus: str | None = None) -> list[dict]:
    """Every reviewed run's human label beside the judge's verdict (``v_human_label``: corpus,
    paradigm, generator, qtype, judge, judge_label, human_label, reviewer, …); the judge's
    agreement with them is :func:`by_stratum` of these rows."""
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(text(
            "SELECT * FROM v_human_label" + (" WHERE corpus = :c" if corpus else "") +
            " ORDER BY run_id, reviewer"), {"c": corpus}).mappings()]


def human_agreement(engine: Engine, corpus: str | None = None) -> list[tuple]:
    """(dimension, value, :class:`Agreement`) of the judge against the reviewers'
    labels: all, then per paradigm and query type; empty when nothing was reviewed."""
    rows = human_labels(engine, corpus)
    return by_stratum(rows) if rows else []
