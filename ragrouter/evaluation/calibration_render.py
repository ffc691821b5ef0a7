"""Plain-text figures of a judge's calibration (what ``judge calibrate`` prints)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ragrouter.evaluation.agreement import LABELS, JudgeFigures, fmt_kappa
from ragrouter.evaluation.calibration_cases import KINDS

if TYPE_CHECKING:
    from ragrouter.evaluation.judge import Gate


def render_variants(figs: dict[str, JudgeFigures], gate: Gate) -> str:
    """One line per variant: binary kappa, false-correct, missed-correct, 3-class kappa."""
    def pct(v):
        return "-" if v is None else f"{100 * v:.0f}%"

    def num(v):
        return "undefined" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"

    names = {"model": "model verdicts", "stage": "judge stage, no gate",
             "gated": f"judge stage + gate (shared evidence word or semantic F1 >= {gate.min_semantic_f1:g})"}
    lines = ["label variants (same model replies; correct vs. not correct):"]
    for v, fig in figs.items():
        b = fig.binary
        lines.append(f"  {names[v]}: kappa {num(b['kappa'])} [{num(b['kappa_low'])}, {num(b['kappa_high'])}] "
                     f"(N = {b['n']}), false-correct {pct(b['false_correct'])}, "
                     f"missed-correct {pct(b['missed_correct'])}; 3-class kappa {num(fig.kappa)}")
    return "\n".join(lines)


def render(fig: JudgeFigures, model: str | None = None) -> str:
    """A judge's figures as plain text: header line, confusion matrix, agreement per kind."""
    def pct(v):
        return "-" if v is None else f"{100 * v:.0f}%"

    kappa = "undefined" if math.isnan(fig.kappa) else f"{fig.kappa:.2f}"
    spc = fig.seconds_per_call
    head = (f"judge {fig.judge}" + (f" (model {model})" if model else "") +
            f": {fig.n_cases} cases, {fig.samples} sample(s) each; accuracy {pct(fig.accuracy)}, "
            f"Cohen's kappa {kappa}; {fig.calls} calls, "
            + ("-" if spc is None else f"{spc:.1f}") + " s per call (ledger)"
            + (f"; {fig.unjudged} case(s) without a verdict (replies that could not be used)" if fig.unjudged else ""))
    width = max(len(x) for x in LABELS) + 2
    lines = [head, "", "true \\ judged".ljust(14) + "".join(lab.rjust(width) for lab in LABELS) + "agreement".rjust(11)]
    for i, lab in enumerate(LABELS):
        lines.append(lab.ljust(14) + "".join(str(v).rjust(width) for v in fig.confusion[i])
                     + pct(fig.agreement[lab]).rjust(11))
    b = fig.binary
    lines.append("")
    lines.append(f"correct vs. not correct (what oracle labels use; incorrect and incomplete merged): N = {b['n']}, "
                 f"accuracy {pct(b['accuracy'])}, kappa {fmt_kappa(b['kappa'], b['kappa_low'], b['kappa_high'])} "
                 f"(95 % bootstrap interval); wrong or incomplete answers judged correct {pct(b['false_correct'])}, "
                 f"correct answers judged not correct {pct(b['missed_correct'])}")
    lines.append("by case kind: " + ", ".join(f"{k} ({KINDS[k].true_label}) {pct(v)}" for k, v in fig.by_kind.items()
                                              if v is not None))
    if fig.samples > 1 and fig.mean_sample_agreement is not None:
        lines.append(f"mean agreement of the samples with their majority: {pct(fig.mean_sample_agreement)}")
    return "\n".join(lines)
