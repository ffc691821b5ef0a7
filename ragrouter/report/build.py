"""`cli.py report`: the paper's tables (Markdown + CSV) and figures (PNG) from the store's views.

:func:`build_report` reads every view in :data:`REPORT_VIEWS`, writes each as CSV, renders the
tables into one ``report.md`` with a section per table, and draws Figs. 4, 6 and 7. Sections
and figures whose stages have produced nothing say so instead of failing.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine

from ragrouter.report import figures, tables
from ragrouter.report.data import STAGE_TABLES, choose_judge, read_sql, read_view, stage_counts

# CSV name -> (view, ORDER BY, stages whose data it needs). The CSVs hold the full-precision rows.
REPORT_VIEWS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "corpus_profile": ("v_corpus_profile", "corpus", ("ingest",)),
    "query_validation": ("v_query_validation", "corpus, qtype", ("querygen", "validate")),
    "query_rejections": ("v_query_rejections", "corpus, qtype, check_name", ("validate",)),
    "accuracy_by_type": ("v_accuracy_by_type", "generator, judge, corpus, paradigm, qtype", ("answer", "judge")),
    "judgment_breakdown": ("v_judgment_breakdown", "generator, judge, corpus, paradigm, qtype", ("answer", "judge")),
    "quality": ("v_quality", "corpus, generator, paradigm, judge", ("answer", "score")),
    "token_breakdown": ("v_token_breakdown", "corpus, paradigm, generator", ("answer",)),
    "oracle_labels": ("v_oracle_label", "generator, judge, corpus, query_id", ("answer", "judge", "score")),
    "router_scores": ("v_router_scores", "dataset, generator, judge, features, router, encoder", ("routers",)),
}

STAGE_HINT = "python cli.py run --stage {stage}"


@dataclass
class Report:
    """What :func:`build_report` wrote."""

    out_dir: Path
    markdown: Path
    csv: dict[str, Path] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)
    judge: str | None = None
    empty_stages: list[str] = field(default_factory=list)


def slug(name: str) -> str:
    """A file-name-safe version of a model or corpus name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-") or "x"


def _router_points(engine: Engine, generator: str, judge: str, scores: pd.DataFrame) -> pd.DataFrame:
    """Per corpus, the correct rate and tokens of the best store router (by overall correct
    rate) for each feature set, for Fig. 7."""
    s = scores[(scores["dataset"] == "store") & (scores["generator"] == generator) & (scores["judge"] == judge)]
    s = s[s["correct_rate"].notna()]
    if s.empty:
        return pd.DataFrame(columns=["corpus", "label", "avg_tokens", "correct_rate"])
    best = s.sort_values(["correct_rate", "router"], ascending=[False, True]).groupby("features", sort=True).head(1)
    parts = []
    for r in best.itertuples(index=False):
        per = read_sql(
            engine,
            "SELECT corpus, 100.0 * AVG(CAST(correct AS DOUBLE PRECISION)) AS correct_rate, "
            "AVG(CAST(tokens AS DOUBLE PRECISION)) AS avg_tokens FROM v_router_routed "
            "WHERE router = :router AND features = :features AND encoder = :encoder AND generator = :generator "
            "AND dataset = 'store' AND judge = :judge AND corpus IS NOT NULL GROUP BY corpus",
            {"router": r.router, "features": r.features, "encoder": r.encoder, "generator": generator, "judge": judge},
        )
        per["label"] = f"router {r.router} ({r.features})"
        parts.append(per)
    return pd.concat(parts, ignore_index=True)


def _clean(out: Path) -> None:
    """Remove what a previous report wrote here (figures of models that are gone, old CSVs)."""
    for path in [*out.glob("fig*.png"), *(out / f"{n}.csv" for n in REPORT_VIEWS), out / "report.md"]:
        if path.is_file():
            path.unlink()


def build_report(engine: Engine, out_dir: str | Path, judge: str | None = None,
                 store_label: str | None = None, config=None) -> Report:
    """Write ``report.md``, one CSV per view and the PNG figures into ``out_dir``.

    ``judge`` picks whose labels the figures use (default: the judge with the most judged
    runs); the tables list every judge. The views must exist (run ``db upgrade`` first)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _clean(out)
    counts = stage_counts(engine)
    empty = [s for s, n in counts.items() if n == 0]
    frames: dict[str, pd.DataFrame] = {}
    report = Report(out_dir=out, markdown=out / "report.md", empty_stages=empty)
    for name, (view, order, _) in REPORT_VIEWS.items():
        frames[name] = read_view(engine, view, order)
        path = out / f"{name}.csv"
        frames[name].to_csv(path, index=False)
        report.csv[name] = path
    report.judge = judge = choose_judge(engine, judge)

    md: list[str] = ["# ragrouter report", ""]
    md.append(f"Generated {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}" + (f" from `{store_label}`" if store_label else "")
              + (f"; figures use judge `{judge}`." if judge else "."))
    md.append("")
    md.append("## Data by stage\n")
    md.append(tables.md_table(["Stage", "Table", "Rows"],
                              [[s, STAGE_TABLES[s], tables.fmt_int(n)] for s, n in counts.items()]))
    if empty:
        md.append("")
        md.append("Stages with no data yet: " + ", ".join(f"**{s}** (`{STAGE_TABLES[s]}` is empty)" for s in empty)
                  + ". Run them with `" + STAGE_HINT.format(stage="STAGE") + "`.")
    md.append("")

    def section(title: str, name: str, body: str, note: str = "") -> None:
        md.append(f"## {title}\n")
        if note:
            md.append(note + "\n")
        if body.strip():
            md.append(body)
        else:
            needs = REPORT_VIEWS[name][2]
            missing = [s for s in needs if s in empty] or list(needs)
            md.append(f"_No data: this table needs the {', '.join(missing)} stage{'s' if len(missing) > 1 else ''}"
                      f" (view `{REPORT_VIEWS[name][0]}`)._")
        md.append(f"\nCSV: [`{name}.csv`]({name}.csv)\n")

    prof = frames["corpus_profile"]
    has_metrics = not prof.empty and prof[[c for c, _, _ in tables.STRUCTURAL_COLUMNS + tables.SEMANTIC_COLUMNS
                                           if c != "n_chunks"]].notna().any().any()
    section("Corpora", "corpus_profile", tables.table_profile(prof, tables.CORPUS_COLUMNS))
    md.append("### Structural statistics (Table 8)\n")
    md.append(tables.table_profile(prof, tables.STRUCTURAL_COLUMNS) if has_metrics
              else "_No data: needs the metrics stage (`corpus_metrics` is empty)._")
    md.append("\n### Semantic statistics (Table 9)\n")
    md.append(tables.table_profile(prof, tables.SEMANTIC_COLUMNS) if has_metrics
              else "_No data: needs the metrics stage (`corpus_metrics` is empty)._")
    md.append("")
    section("Query validation (Table 6)", "query_validation", tables.table_validation(frames["query_validation"]),
            "Generated queries only; Gen. = validated (accepted + rejected), Pass = accepted.")
    section("Accuracy by query type (Table 2)", "accuracy_by_type", tables.table_accuracy(frames["accuracy_by_type"]))
    section("Judgment breakdown (Table 13)", "judgment_breakdown", tables.table_breakdown(frames["judgment_breakdown"]),
            "Cor = correct, Inc = incorrect, No-A = incomplete (refusals and partial answers).")
    section("Generation quality (Table 15)", "quality", tables.table_quality(frames["quality"]),
            "Means over the current runs of accepted queries; '-' = not applicable or not scored.")
    section("Token consumption (Table 16)", "token_breakdown", tables.table_tokens(frames["token_breakdown"]),
            "Token sums in millions; Avg-Ctx and Build/query in tokens. Graph build = extraction tokens of the "
            "corpus (one-time), amortised over its accepted queries as Build/query.")
    if config is not None:  # money next to the tokens (ragrouter/llm/pricing.py)
        from ragrouter.llm import pricing

        md.append(pricing.markdown_section(engine, config))
    section("Oracle labels", "oracle_labels", tables.table_oracle(frames["oracle_labels"]),
            "Per query: among paradigms judged correct, the one with the highest semantic F1 "
            "(ties: alphabetical); none correct = cannot_answer.")
    section("Routers", "router_scores", tables.table_routers(frames["router_scores"]),
            "R.A = routing accuracy, C.R = correct rate of the routed paradigm (cannot_answer falls back to the "
            "most frequent optimal paradigm); macro-F1 and MRR are logged to MLflow.")

    # Judge calibration (python cli.py judge calibrate) -------------------------------------
    from ragrouter.report import calibration

    md.append(calibration.section(engine, out))

    # Figures ------------------------------------------------------------------------------
    md.append("## Figures\n")
    fig_notes: list[str] = []
    acc = frames["accuracy_by_type"]
    fig6 = figures.corpus_profile(prof) if has_metrics else None
    if fig6 is not None:
        report.figures["fig6_corpus_profile"] = figures.save(fig6, out / "fig6_corpus_profile.png")
    else:
        fig_notes.append("Fig. 6 (corpus profile): no corpus metrics yet (metrics stage).")
    acc_j = acc[acc["judge"] == judge] if judge is not None else acc.iloc[0:0]
    if acc_j.empty:
        fig_notes.append("Figs. 4 and 7 (accuracy heatmaps, cost vs. correctness): no judged runs yet "
                         "(answer and judge stages).")
    for generator in sorted(acc_j["generator"].unique()):
        part = acc_j[acc_j["generator"] == generator]
        tag = f"{slug(generator)}__{slug(judge)}"
        name4 = f"fig4_accuracy__{tag}"
        report.figures[name4] = figures.save(
            figures.accuracy_heatmaps(part, f"% correct (* = best paradigm)\ngenerator {generator}, judge {judge}"),
            out / f"{name4}.png")
        points = _router_points(engine, generator, judge, frames["router_scores"])
        fig7 = figures.cost_quality(part, points, f"Tokens per query vs. % correct\ngenerator {generator}, judge {judge}")
        if fig7 is not None:
            report.figures[f"fig7_cost_quality__{tag}"] = figures.save(fig7, out / f"fig7_cost_quality__{tag}.png")
    for name, path in report.figures.items():
        md.append(f"![{name}]({path.name})\n")
    md += [f"- {n}" for n in fig_notes]
    md.append("")
    report.markdown.write_text("\n".join(md), encoding="utf-8")
    return report
