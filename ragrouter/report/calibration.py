"""The report's "Judge calibration" section: how far to trust each judge.

Reads ``v_judge_calibration`` (verdicts on calibration cases per judge and true label), writes
it as ``judge_calibration.csv`` and renders, per judge and case set, the confusion matrix with
the agreement per true label, the accuracy and Cohen's kappa (computed from the same rows).
Hook: ``md.append(calibration.section(engine, out_dir))`` in ``build_report``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine

from ragrouter.common.stats import wilson_interval
from ragrouter.db.frames import read_sql, read_view
from ragrouter.evaluation.agreement import LABELS, binary_figures, fmt_kappa, kappa_from_confusion, kappa_interval
from ragrouter.review.figures import agreement, human_labels

VIEW = "v_judge_calibration"
CSV_NAME = "judge_calibration"
COMMAND = "python cli.py judge calibrate --judge BACKEND … --n 10"


class ViewMissing(RuntimeError):
    """The store was migrated before the view existed."""


def frame(engine: Engine) -> pd.DataFrame:
    """The view's rows, ordered by judge, case set and true label (LABELS order)."""
    from sqlalchemy.exc import DBAPIError

    try:
        df = read_view(engine, VIEW, "judge, case_set, true_label")
    except DBAPIError as exc:
        if VIEW in str(exc):
            raise ViewMissing(f"the store has no view {VIEW}: run 'python cli.py db upgrade'") from None
        raise
    if not df.empty:
        df["_o"] = df["true_label"].map({lab: i for i, lab in enumerate(LABELS)})
        df = df.sort_values(["judge", "case_set", "_o"]).drop(columns="_o").reset_index(drop=True)
    return df


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (judge, case set): cases, accuracy, Cohen's kappa, agreement per true label."""
    rows = []
    for (judge, case_set), block in df.groupby(["judge", "case_set"], sort=True):
        m = confusion(block)
        n = sum(map(sum, m))
        kappa = kappa_from_confusion(m)
        low, high = kappa_interval(m)
        row = {"judge": judge, "case_set": case_set, "n_cases": n,
               "accuracy": sum(m[i][i] for i in range(len(LABELS))) / n if n else None,
               "kappa": None if math.isnan(kappa) else kappa,
               "kappa_low": None if math.isnan(low) else low, "kappa_high": None if math.isnan(high) else high}
        for i, lab in enumerate(LABELS):
            row[f"agreement_{lab}"] = m[i][i] / sum(m[i]) if sum(m[i]) else None
        b = binary_figures(m)
        (tp, fn), (fp, tn) = b["confusion"]
        row.update({"binary_accuracy": b["accuracy"], "binary_kappa": None if math.isnan(b["kappa"]) else b["kappa"],
                    "binary_kappa_low": None if math.isnan(b["kappa_low"]) else b["kappa_low"],
                    "binary_kappa_high": None if math.isnan(b["kappa_high"]) else b["kappa_high"],
                    "binary_agree": tp + tn, "false_correct": b["false_correct"],
                    "missed_correct": b["missed_correct"]})
        rows.append(row)
    return pd.DataFrame(rows)


def confusion(block: pd.DataFrame) -> list[list[int]]:
    """The 3×3 confusion matrix (rows = true label, columns = verdict) of one judge's rows."""
    m = []
    for lab in LABELS:
        r = block[block["true_label"] == lab]
        m.append([int(r[f"judged_{p}"].sum()) for p in LABELS])
    return m


def _pct(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * float(v):.0f}%"


def markdown(df: pd.DataFrame) -> str:
    """The section body: a note, then per judge a confusion table with agreement."""
    if df.empty:
        return (f"_No data: no judge has been calibrated yet (view `{VIEW}`). Run `{COMMAND}`._")
    out = ["Verdicts on calibration cases whose label is known by construction (the gold answer, a "
           "paraphrase and the gold plus a true sentence of its evidence are correct; a refusal, the gold cut to "
           "its first clause and the gold made less precise — '5 PM' for '5:30 PM' — are incomplete; another "
           "query's gold and a contradicted gold are incorrect; on a question marked unanswerable a refusal is "
           "correct and another query's gold a hallucination, incorrect). Rows: true label; columns: the judge's "
           "verdict (majority over its samples). κ with its 95 % bootstrap interval over the cases (seeded); "
           "the tables rest on correct vs. not correct, where incorrect and incomplete are one class.", ""]
    summ = summary(df)
    for r in summ.itertuples(index=False):
        block = df[(df["judge"] == r.judge) & (df["case_set"] == r.case_set)]
        m = confusion(block)
        kappa = fmt_kappa(r.kappa, r.kappa_low, r.kappa_high)
        bk = fmt_kappa(r.binary_kappa, r.binary_kappa_low, r.binary_kappa_high)
        out.append(f"**Judge `{r.judge}`** (case set `{r.case_set}`, N = {r.n_cases} cases): accuracy "
                   f"{_pct(r.accuracy)}, Cohen's kappa {kappa}; correct vs. not correct: accuracy "
                   f"{_pct(r.binary_accuracy)}, kappa {bk}, wrong or incomplete answers judged correct "
                   f"{_pct(r.false_correct)}")
        out.append("")
        out.append("| True label | n | → correct | → incorrect | → incomplete | Agreement |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for i, lab in enumerate(LABELS):
            n = sum(m[i])
            out.append(f"| {lab} | {n} | " + " | ".join(str(v) for v in m[i]) + f" | {_pct(m[i][i] / n if n else None)} |")
        out.append("")
    return "\n".join(out).rstrip()


KAPPA_WARN = 0.6
"""Below this Cohen's kappa the report warns that the judge's labels are unreliable (#15.1)."""


def judge_trust(engine: Engine, judge: str | None) -> dict:
    """How far to trust ``judge``: ``{'judge', 'calibrated', 'kappa', 'false_correct', 'n_cases',
    'case_set', 'date'}`` from its calibration verdicts (the case set with the most cases; the
    date of its newest calibration judgment); ``calibrated`` False when it has none."""
    out = {"judge": judge, "calibrated": False, "kappa": None, "false_correct": None, "n_cases": 0,
           "case_set": None, "date": None}
    if judge is None:
        return out
    out["human"] = human_trust(engine, judge)
    out["review"] = review_counts(engine, judge)
    try:
        df = frame(engine)
    except ViewMissing:
        return out
    df = df[df["judge"] == judge]
    if df.empty:
        return out
    summ = summary(df).sort_values(["n_cases", "case_set"], ascending=[False, True])
    r = summ.iloc[0]

    when = read_sql(engine, "SELECT MAX(created_at) AS d FROM judgments WHERE is_calibration AND judge = :j",
                    {"j": judge})["d"].iloc[0]
    kappa = None if r["kappa"] is None or (isinstance(r["kappa"], float) and math.isnan(r["kappa"])) else float(r["kappa"])
    bk = r.get("binary_kappa")
    binary_kappa = None if bk is None or (isinstance(bk, float) and math.isnan(bk)) else float(bk)
    def num(v):
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    out.update(calibrated=True, kappa=kappa, binary_kappa=binary_kappa, false_correct=r["false_correct"],
               n_cases=int(r["n_cases"]), binary_kappa_low=num(r.get("binary_kappa_low")),
               binary_kappa_high=num(r.get("binary_kappa_high")), binary_agree=int(r.get("binary_agree") or 0),
               case_set=r["case_set"], date=str(when)[:10] if when is not None else None)
    return out


def human_trust(engine: Engine, judge: str) -> dict | None:
    """``judge`` against the reviewers' labels (``review pull``; ``v_human_label``): N, the
    reviewers, the newest label's date, agreement on correct vs. not, κ (3 labels and correct vs.
    not, with the large-sample interval of ``review.figures``) and the false-correct rate; None
    when no run it judged was reviewed (or the store predates the view)."""
    from sqlalchemy.exc import DBAPIError

    try:
        rows = [r for r in human_labels(engine) if r["judge"] == judge]
    except DBAPIError:
        return None
    if not rows:
        return None
    a = agreement([(r["judge_label"], r["human_label"]) for r in rows])
    return {"n": a.n, "reviewers": sorted({r["reviewer"] or "(unnamed)" for r in rows}),
            "date": str(max(r["labelled_at"] for r in rows))[:10], "agree": sum(int(r["correct_agree"]) for r in rows),
            "kappa": a.kappa, "binary_kappa": a.binary_kappa, "binary_low": a.binary_low, "binary_high": a.binary_high,
            "false_correct": a.false_correct}


def review_counts(engine: Engine, judge: str) -> tuple[int, int] | None:
    """(judged runs a rule left to a person's review — the figures rule abstained —, judged runs)
    of ``judge``; None for a store before ``judgments.review`` (0012)."""
    from sqlalchemy.exc import DBAPIError

    try:
        df = read_sql(engine, "SELECT COUNT(DISTINCT run_id) AS n, COUNT(DISTINCT CASE WHEN review IS NOT NULL "
                              "THEN run_id END) AS marked FROM judgments WHERE judge = :j AND NOT is_calibration",
                      {"j": judge})
    except DBAPIError:
        return None
    return int(df["marked"].iloc[0] or 0), int(df["n"].iloc[0] or 0)


def review_line(judge: str, counts: tuple[int, int] | None) -> str:
    """The judge line's count of abstentions: runs whose verdict a rule left to a person."""
    if not counts or not counts[1]:
        return ""
    marked, n = counts
    if not marked:
        return f"> Judge `{judge}`: the figures rule abstained on none of its {n} judged runs."
    return (f"> Judge `{judge}`: the figures rule abstained on {marked} of {n} judged runs "
            f"({100 * marked / n:.1f} %): a figure it could not compare with confidence; their verdicts are the "
            "model's, marked for a person's review (`python cli.py review start` draws them first).")


def human_line(judge: str, human: dict | None) -> str:
    """The line under the calibration line: how the judge agrees with a person's labels, which
    outrank the constructed cases, or that nobody reviewed it."""
    if human is None:
        return (f"> Judge `{judge}` against a person: **not reviewed** (`python cli.py review start`, label the "
                "traces in the MLflow UI, `python cli.py review pull`).")

    n, agree = human["n"], human["agree"]
    lo, hi = wilson_interval(agree, n)
    three = "undefined" if math.isnan(human["kappa"]) else f"{human['kappa']:.2f}"
    bk = fmt_kappa(human["binary_kappa"], human["binary_low"], human["binary_high"])
    line = (f"> Judge `{judge}` against a person ({', '.join(human['reviewers'])}, N = {n} reviewed runs, newest "
            f"{human['date']}; these labels outrank the constructed cases): agreement correct vs. not {agree}/{n} = "
            f"{100 * agree / n:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}], Cohen's κ = {bk} (3 labels: {three})"
            + (f", not correct to the reviewer but judged correct {_pct(human['false_correct'])}"
               if human["false_correct"] is not None else "") + ".")
    if not math.isnan(human["binary_kappa"]) and human["binary_kappa"] < KAPPA_WARN:
        line += f" **Warning: κ < {KAPPA_WARN} against the reviewer.**"
    return line


def trust_line(trust: dict) -> str:
    """The line the report prints once at the head of each section that rests on judgments (#15.1,
    issue 30): κ correct vs. not with its 95 % bootstrap interval, the agreement with its Wilson
    interval, N."""
    judge = trust.get("judge")
    if judge is None:
        return "> Judge: none (nothing judged yet)."
    line = _calibration_line(trust)
    if "human" in trust:
        line += "\n>\n" + human_line(judge, trust["human"])
    if review_line(judge, trust.get("review")):
        line += "\n>\n" + review_line(judge, trust.get("review"))
    return line


def _calibration_line(trust: dict) -> str:
    judge = trust.get("judge")
    if not trust.get("calibrated"):
        return (f"> Judge `{judge}`: **not calibrated** — how far its labels can be trusted is unknown "
                f"(run `{COMMAND}`).")
    kappa = trust.get("kappa")
    # The tables and oracle labels rest on correct vs. not correct: the warning reads that κ (the
    # one `judge calibrate` and the README's trust table report); the 3-label κ is shown beside it.
    binary = trust.get("binary_kappa", kappa)
    k = "undefined" if kappa is None else f"{kappa:.2f}"
    bk = fmt_kappa(binary, trust.get("binary_kappa_low"), trust.get("binary_kappa_high"))
    fc = trust.get("false_correct")
    n = int(trust.get("n_cases") or 0)
    agree = trust.get("binary_agree")
    agreement = ""
    if n and agree is not None:
        lo, hi = wilson_interval(agree, n)
        agreement = f", agreement {agree}/{n} = {100 * agree / n:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"
    line = (f"> Judge `{judge}`: calibrated on {trust.get('date') or 'an unknown date'} (case set "
            f"`{trust.get('case_set')}`, N = {n} cases): Cohen's κ correct vs. not = {bk} (95 % bootstrap"
            f"{agreement}; 3 labels: {k})"
            + (f", wrong or incomplete answers judged correct {_pct(fc)}" if fc is not None else "") + ".")
    if binary is None or binary < KAPPA_WARN:
        line += (f" **Warning: κ < {KAPPA_WARN}: the judge's labels are unreliable; treat every accuracy, correct "
                 "rate and oracle label below with caution.**")
    return line


def section(engine: Engine, out_dir: str | Path | None = None) -> str:
    """The whole Markdown section ("## Judge calibration" …); writes the CSV when ``out_dir``."""
    try:
        df = frame(engine)
    except ViewMissing as exc:
        return f"## Judge calibration\n\n_No data: {exc}._\n"
    lines = ["## Judge calibration\n", markdown(df)]
    if out_dir is not None:
        path = Path(out_dir) / f"{CSV_NAME}.csv"
        df.to_csv(path, index=False)
        lines.append(f"\nCSV: [`{CSV_NAME}.csv`]({CSV_NAME}.csv)\n")
    else:
        lines.append("")
    return "\n".join(lines)
