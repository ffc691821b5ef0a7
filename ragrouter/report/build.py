"""`cli.py report`: the paper's tables (Markdown + CSV) and figures (PNG + SVG) from the store's views.

:func:`build_report` reads every view in :data:`REPORT_VIEWS`, writes each as CSV, renders the
tables into one ``report.md`` with a section per table, draws Figs. 4, 5, 6, 7, the judge
calibration heat map and the Table 13 stacked bars (each as PNG and SVG with a caption), and
writes ``report.html`` with every figure inline (viewable offline). Once at the head of each
section that rests on judgments (paradigm results, labels and routers, figures) a line names
the judge and its calibration (κ with its 95 % interval, N, date) or says "not calibrated",
with a warning when κ < 0.6. Sections and figures whose stages have produced nothing say so
instead of failing; the report describes what ran: imported questions are not counted as
generated, and the Corpora section lists the corpora the tables below rest on.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine

from ragrouter import console
from ragrouter.common import stats
from ragrouter.db.frames import read_sql, read_view
from ragrouter.decisions.driver import decision_cells
from ragrouter.report import calibration, figures, html, money, tables
from ragrouter.report.data import choose_judge, imported_questions, stage_counts, stage_table, with_totals
from ragrouter.routers.dataset import best_fixed

# CSV name -> (view, ORDER BY, stages whose data it needs). The CSVs hold the full-precision rows.
REPORT_VIEWS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "corpus_profile": ("v_corpus_profile", "corpus", ("ingest",)),
    "query_validation": ("v_query_validation", "corpus, qtype", ("querygen", "validate")),
    "query_rejections": ("v_query_rejections", "corpus, qtype, check_name", ("validate",)),
    "accuracy_by_type": ("v_accuracy_by_type", "generator, judge, corpus, paradigm, qtype", ("answer", "judge")),
    "accuracy_overall": ("v_accuracy_overall", "generator, judge, corpus, paradigm", ("answer", "judge")),
    "judgment_breakdown": ("v_judgment_breakdown", "generator, judge, corpus, paradigm, qtype", ("answer", "judge")),
    "abstention": ("v_abstention", "generator, judge, corpus, paradigm", ("answer", "judge")),
    "quality": ("v_quality", "corpus, generator, paradigm, judge", ("answer", "score")),
    "token_breakdown": ("v_token_breakdown", "corpus, paradigm, generator", ("answer",)),
    "graph_build": ("v_graph_build", "corpus", ("extract",)),
    "oracle_labels": ("v_oracle_label", "generator, judge, corpus, query_id", ("answer", "judge", "score")),
    "router_scores": ("v_router_scores", "dataset, generator, judge, features, router, encoder", ("routers",)),
}

STAGE_HINT = "python cli.py run --stage {stage}"
N_SECTIONS = 9  # section() calls of build_report (the progress bar's steps besides views and figures)
# router_scores.csv keeps v_router_scores' units (those of MLflow's metrics), unlike the *_pct
# columns of the other CSVs and the percent of the router table: said next to its link.
ROUTER_SCORES_UNITS = ("Units of `router_scores.csv` (the view's rows, as MLflow logs them): every rate is a "
                       "**fraction in [0, 1]**, not percent — routing_accuracy, macro_f1, mrr, correct_rate, "
                       "abstain_rate, pooled_routing_accuracy, pooled_correct_rate and their _std, _ci_low, _ci_high; "
                       "avg_tokens, avg_tokens_std and pooled_avg_tokens are tokens per query; n, n_folds, "
                       "n_outcomes are counts.")


@dataclass
class Report:
    """What :func:`build_report` wrote."""

    out_dir: Path
    markdown: Path
    csv: dict[str, Path] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    html: Path | None = None
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
    for path in [*out.glob("fig*.png"), *out.glob("fig*.svg"), *(out / f"{n}.csv" for n in REPORT_VIEWS),
                 out / "report.md", out / "report.html", out / "router_tests.csv"]:
        if path.is_file():
            path.unlink()


def build_report(engine: Engine, out_dir: str | Path, judge: str | None = None,
                 store_label: str | None = None, config=None, with_figures: bool = True,
                 show_progress: bool = False) -> Report:
    """Write ``report.md``, one CSV per view and the PNG figures into ``out_dir``.

    ``judge`` picks whose labels the figures use (default: the judge with the most judged
    runs); the tables list every judge. The views must exist (run ``db upgrade`` first).
    ``with_figures=False`` writes the tables only (quick; the figures cost most of the time);
    ``show_progress`` draws a bar on stderr, one step per view read, section and figure."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _clean(out)
    counts = stage_counts(engine)
    n_imported = imported_questions(engine)
    # querygen / validate are not missing where the questions came with the dataset
    not_asked = {"querygen", "validate"} if n_imported and counts["querygen"] == 0 else set()
    empty = [s for s, n in counts.items() if n == 0 and s not in not_asked]
    frames: dict[str, pd.DataFrame] = {}
    report = Report(out_dir=out, markdown=out / "report.md", empty_stages=empty)
    steps = console.bar(len(REPORT_VIEWS) + N_SECTIONS + 1, "report (views, sections, figures)", show_progress,
                        unit="step")

    def tick(what: str, more: int = 0) -> None:
        steps.total += more  # figures are known as they come
        steps.set_postfix_str(what, refresh=False)
        steps.update(1)

    for name, (view, order, _) in REPORT_VIEWS.items():
        frames[name] = read_view(engine, view, order)
        tick(view)
        path = out / f"{name}.csv"
        frames[name].to_csv(path, index=False)
        report.csv[name] = path
    report.judge = judge = choose_judge(engine, judge)
    acc_all = with_totals(frames["accuracy_by_type"], frames["accuracy_overall"])  # Table 2 shows both

    trust_cache: dict = {}

    def trust(judges_present) -> str:
        """The calibration line(s) for the judges whose labels a table or figure uses (#15.1)."""
        names = [j for j in dict.fromkeys(judges_present) if j is not None and not (isinstance(j, float) and j != j)]
        if not names:
            names = [judge] if judge is not None else []
        lines = []
        for name in names:
            if name not in trust_cache:
                trust_cache[name] = calibration.judge_trust(engine, name)
            lines.append(calibration.trust_line(trust_cache[name]))
        return "\n>\n".join(lines) if lines else calibration.trust_line({"judge": None})

    md: list[str] = ["# ragrouter report", ""]
    md.append(f"Generated {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}" + (f" from `{store_label}`" if store_label else "")
              + (f"; figures use judge `{judge}`." if judge else "."))
    md.append("")
    md.append("## Data by stage\n")
    stage_rows = [[s, stage_table(s), tables.fmt_int(n)] for s, n in counts.items()]
    stage_rows.insert(1, ["ingest (questions)", "queries (imported)", tables.fmt_int(n_imported)])
    md.append(tables.md_table(["Stage", "Table", "Rows"], stage_rows))
    if empty:
        md.append("")
        md.append("Stages with no data yet: " + ", ".join(f"**{s}** (`{stage_table(s)}` is empty)" for s in empty)
                  + ". Run them with `" + STAGE_HINT.format(stage="STAGE") + "`.")
    if not_asked:
        md.append("")
        md.append(f"querygen and validate did not run: the {n_imported:,} questions came with the dataset (ingest).")
    md.append("")

    def group(title: str, judges_present) -> None:
        """A section whose tables rest on judgments: the judge line once, under its heading."""
        md.append(f"## {title}\n")
        md.append(trust(judges_present) + "\n")

    def judges_of(*names: str) -> list:
        return [j for n in names if "judge" in frames[n].columns for j in frames[n]["judge"]]

    def section(title: str, name: str, body: str, note: str = "", judged: bool = False, level: int = 2,
                empty_note: str | None = None) -> None:
        tick(title)
        md.append(f"{'#' * level} {title}\n")
        if judged:
            j = frames[name]["judge"] if "judge" in frames[name].columns else []
            md.append(trust(list(j)) + "\n")
        if note:
            md.append(note + "\n")
        if body.strip():
            md.append(body)
        elif empty_note:
            md.append(empty_note)
        else:
            needs = REPORT_VIEWS[name][2]
            missing = [s for s in needs if s in empty] or list(needs)
            md.append(f"_No data: this table needs the {', '.join(missing)} stage{'s' if len(missing) > 1 else ''}"
                      f" (view `{REPORT_VIEWS[name][0]}`)._")
        md.append(f"\nCSV: [`{name}.csv`]({name}.csv)\n")

    prof, idle = _processed_corpora(engine, frames["corpus_profile"])
    has_metrics = not prof.empty and prof[[c for c, _, _ in tables.STRUCTURAL_COLUMNS + tables.SEMANTIC_COLUMNS
                                           if c != "n_chunks"]].notna().any().any()
    section("Corpora", "corpus_profile", tables.table_profile(prof, tables.CORPUS_COLUMNS),
            "The corpora the tables below rest on, with what was processed beside what is stored: a chunk is "
            "processed when it was embedded or extracted; a document when one of its chunks was; queries answered = "
            "accepted queries with at least one paradigm run; questions imported came with the dataset, queries "
            "generated from querygen. The indicators below are computed over the processed chunks' graph and vectors."
            + (" Stored but not processed (in no table below): " + ", ".join(
                f"`{r.corpus}` ({tables.fmt_int(r.n_documents)} documents, {tables.fmt_int(r.n_queries)} accepted "
                "queries)" for r in idle.itertuples(index=False)) + "." if not idle.empty else ""))
    md.append("### Structural statistics (Table 8)\n")
    md.append(tables.table_profile(prof, tables.STRUCTURAL_COLUMNS) if has_metrics
              else "_No data: needs the metrics stage (`corpus_metrics` is empty)._")
    md.append("\n### Semantic statistics (Table 9)\n")
    md.append(tables.table_profile(prof, tables.SEMANTIC_COLUMNS) if has_metrics
              else "_No data: needs the metrics stage (`corpus_metrics` is empty)._")
    md.append("")
    section("Query validation (Table 6)", "query_validation", tables.table_validation(frames["query_validation"]),
            "Generated queries only; Gen. = validated (accepted + rejected), Pass = accepted by the checks."
            + (" Where a person reviewed candidates (`review start --what queries`, `review pull`): Reviewed = "
               "candidates they labelled, Pass (checks) of reviewed and Accepted by reviewer side by side, In benchmark "
               "= accepted after review (the reviewer's verdict outranks the checks'; such queries have origin "
               "`human-reviewed`)." if "reviewed" in frames["query_validation"].columns
               and frames["query_validation"]["reviewed"].fillna(0).sum() else "")
            + (f" The {n_imported:,} imported questions are not in this table (they came with the dataset)."
               if n_imported else ""))
    per_query = read_sql(engine, "SELECT query_id, corpus, generator, judge, paradigm, qtype, correct FROM v_run_judged")
    group("Paradigm results (judged)", judges_of("accuracy_by_type", "judgment_breakdown", "quality", "abstention"))
    section("Accuracy by query type (Table 2)", "accuracy_by_type",
            tables.table_accuracy(acc_all, per_query, _decisions(engine)), level=3,
            note="CSV of the totals (the Avg. column): [`accuracy_overall.csv`](accuracy_overall.csv).")
    section("Judgment breakdown (Table 13)", "judgment_breakdown", tables.table_breakdown(frames["judgment_breakdown"]),
            "Cor = correct, Inc = incorrect, No-A = incomplete: refusals (labelled by rule, without a judge call) and "
            "answers the judge found partly right or less precise than the gold. `incomplete` stays a label of its "
            "own here only; every figure that decides correctness (Table 2, the oracle labels, the routers) merges "
            "it with incorrect as 'not correct', and the judge's κ above is for that split (how often the judge "
            "model itself says incomplete is in the Judge calibration section).", level=3)
    section("Generation quality (Table 15)", "quality", tables.table_quality(frames["quality"]),
            "Means over the current runs of accepted queries; '-' = not applicable or not scored.", level=3)
    section("Abstention (questions marked unanswerable)", "abstention", tables.table_abstention(frames["abstention"]),
            "A question marked unanswerable at ingest (`unanswerable` key) has a refusal as its right answer: the "
            "judge labels a refusal there correct and any other answer incorrect, a hallucination. Per paradigm: "
            "the refusal rate on those questions (right) beside the refusal rate on the answerable ones (missed "
            "answers), each with its 95 % Wilson interval and N.", level=3,
            empty_note="_No data: no question marked unanswerable has a judged run (mark such questions with the "
                       "`unanswerable` key at ingest)._")
    section("Token consumption (Table 16)", "token_breakdown", tables.table_tokens(frames["token_breakdown"]),
            "Token sums over the current runs of accepted queries, in the unit the header names (k = thousands, "
            "M = millions); Avg-Ctx and Build/query in tokens. Costs as paper eq. 16-20 define them: for the "
            "paradigms that read the graph (graph, hybrid, iterative over the graph) Ret-In, Ret-Out and Total "
            "include the one-time graph construction (the extraction tokens of the corpus's processed chunks) "
            "amortised over the answered queries (Build share = their sum, Build/query = the share per query); "
            "Total inf. is the inference-only total. Empty ctx = runs whose retrieval put nothing into the context.")
    if config is not None:  # money next to the tokens (ragrouter/report/money.py)

        md.append(money.markdown_section(engine, config))
    md.append("### Empty-context runs\n")
    md.append("Runs of a retrieving paradigm whose context came back empty (context_tokens = 0; an iterative run "
              "that answered in round 0 without retrieving does not count). A high share usually means the "
              "retrieval similarity threshold does not suit the embedder.\n")
    md.append(tables.table_empty_context(frames["token_breakdown"]) or "_No data: needs the answer stage._")
    md.append("")
    tests_frame = router_tests(engine)
    group("Oracle labels and routers (judged)",
          judges_of("oracle_labels", "router_scores") + (list(tests_frame["judge"]) if not tests_frame.empty else []))
    section("Oracle labels", "oracle_labels", tables.table_oracle(frames["oracle_labels"]),
            "Per query, the one rule (view `v_oracle_label`, equal to `ragrouter.routers.dataset.oracle_labels`): "
            "among the paradigms judged correct that have a semantic F1, the highest F1; ties go to the fewest total "
            "tokens (construction amortised), then to the fixed order llm_only, naive, graph, hybrid, iterative, "
            "iterative_naive; a missing F1 never wins. A question marked unanswerable = unanswerable (its right "
            "answer is a refusal); otherwise none correct = cannot_answer; correct but none scored yet = undecided.",
            level=3)
    section("Routers", "router_scores", tables.table_routers(frames["router_scores"]),
            "R.A = routing accuracy, C.R = correct rate of the routed paradigm (cannot_answer falls back to the "
            "most frequent optimal paradigm); F1 = macro-F1 over the classes present in each fold; macro-F1 and "
            "MRR are logged to MLflow. Each rate is the fold mean ± std; the pooled figure (over all N CV "
            "predictions) is its own column with its Wilson interval. An `unanswerable` prediction runs no paradigm "
            "(the router abstains): right on a question marked unanswerable, 0 tokens. " + ROUTER_SCORES_UNITS,
            level=3)
    md.append("### Routers vs. best-fixed and oracle (paired tests)\n")
    md.append("On the same queries: the router's routed paradigm against the best fixed paradigm (the paradigm with "
              "the highest correct rate on these queries; ties: fewest tokens, then the paper's order) and against "
              "the oracle (correct whenever any paradigm is), exact McNemar on correct/incorrect; tokens: mean paired "
              "difference router − best-fixed with a seeded bootstrap 95 % interval. C.R here is **pooled** over the "
              "N queries (the Routers table above gives the fold mean). R.A is set against the majority-class "
              "baseline (always the most frequent oracle label), exact McNemar on hits. 'better' / 'worse' only "
              "where p < 0.05, else n.s.\n")
    md.append(tables.majority_warning(tests_frame))
    md.append(tables.table_router_tests(tests_frame) or "_No data: needs router predictions on the store (routers train)._")
    if not tests_frame.empty:
        tests_frame.to_csv(out / "router_tests.csv", index=False)
        md.append("\nCSV: [`router_tests.csv`](router_tests.csv) (correct_rate, best_fixed_rate and oracle_rate in "
                  "percent, as in the table; tokens_diff* in tokens per query)\n")
    md.append("")

    # Judge calibration (python cli.py judge calibrate) -------------------------------------
    md.append(calibration.section(engine, out))

    # Figures ------------------------------------------------------------------------------
    md.append("## Figures\n")
    fig_head = len(md)  # the judge line of the judged figures goes here, once
    fig_notes: list[str] = []
    fig_judges: list[str] = []

    def add_figure(name: str, make, caption: str, judged_by: str | None = None) -> None:
        """Draw (``make()``; None = nothing to draw) and save one figure, unless ``with_figures`` is off."""
        if not with_figures:
            return
        tick(name, more=1)
        fig = make()
        if fig is None:
            return
        report.figures[name] = figures.save(fig, out / f"{name}.png")
        report.captions[name] = caption
        if judged_by is not None:
            fig_judges.append(judged_by)

    acc = acc_all
    bd = frames["judgment_breakdown"]
    if has_metrics:
        add_figure("fig6_corpus_profile", lambda: figures.corpus_profile(prof),
                   "**Figure 6.** Corpus profile: the raw value of every measured indicator per corpus (one panel per "
                   "indicator; negative values below the zero line, a missing value marked n/a), computed over the "
                   "processed chunks.")
    else:
        fig_notes.append("Fig. 6 (corpus profile): no corpus metrics yet (metrics stage).")
    acc_j = acc[acc["judge"] == judge] if judge is not None else acc.iloc[0:0]
    if acc_j.empty:
        fig_notes.append("Figs. 4 and 7 (accuracy heatmaps, cost vs. correctness): no judged runs yet "
                         "(answer and judge stages).")
    for generator in sorted(acc_j["generator"].unique()):
        part = acc_j[acc_j["generator"] == generator]
        tag = f"{slug(generator)}__{slug(judge)}"
        add_figure(f"fig4_accuracy__{tag}",
                   lambda: figures.accuracy_heatmaps(part, f"% correct (* = best paradigm)\ngenerator {generator}, judge {judge}"),
                   f"**Figure 4** (generator `{generator}`, judge `{judge}`). % correct per paradigm (panel), query "
                   "type (row) and corpus (column); each cell gives the 95 % Wilson interval and N; * marks the "
                   "highest value of a cell across paradigms (not a significance claim: see Table 2's last row).",
                   judge)
        add_figure(f"fig7_cost_quality__{tag}",
                   lambda: figures.cost_quality(part, _router_points(engine, generator, judge, frames["router_scores"]), f"Tokens per query vs. % correct\ngenerator {generator}, judge {judge}"),
                   f"**Figure 7** (generator `{generator}`, judge `{judge}`). Average tokens per query (log scale; "
                   "graph construction amortised into the paradigms that read the graph) against % correct with its "
                   "95 % Wilson interval; hollow markers = paradigms, stars = the best router of each feature set "
                   "(stars at one point are set side by side, a little to the right).",
                   judge)
        bdp = bd[(bd["judge"] == judge) & (bd["generator"] == generator)]
        add_figure(f"fig13_breakdown__{tag}",
                   lambda: figures.breakdown_bars(bdp, f"Judgment breakdown\ngenerator {generator}, judge {judge}"),
                   f"**Table 13 as a figure** (generator `{generator}`, judge `{judge}`). Share of correct, incorrect "
                   "and no-answer verdicts per paradigm over all query types; N under each bar.", judge)
    scores = frames["router_scores"]
    for (dataset, generator, rjudge), part in scores.groupby(["dataset", "generator", "judge"], dropna=False, sort=True):
        rjudge = None if isinstance(rjudge, float) else rjudge
        part = part.copy()  # v_router_scores holds rates as fractions; Fig. 5 draws percent
        pct = [c for c in ("routing_accuracy", "correct_rate", "routing_accuracy_ci_low", "routing_accuracy_ci_high",
                           "correct_rate_ci_low", "correct_rate_ci_high") if c in part.columns]
        part[pct] = 100.0 * part[pct].astype(float)
        bounds = _bounds(engine, part, generator, rjudge)
        tag = f"{slug(dataset)}__{slug(generator)}__{slug(rjudge or 'nojudge')}"
        add_figure(f"fig5_routing__{tag}",
                   lambda: figures.routing_bounds(part, bounds, f"Routing per feature configuration\ndataset {dataset}, "
                                          f"generator {generator}" + (f", judge {rjudge}" if rjudge else "")),
                   f"**Figure 5** (dataset `{dataset}`, generator `{generator}`"
                   + (f", judge `{rjudge}`" if rjudge else "") + "). Routing accuracy (R.A) and correct rate (C.R) of "
                   "each router per feature configuration, with the 95 % Wilson interval of its pooled CV predictions (N per "
                   "router in the legend); lines = the Random and Oracle bounds"
                   + (" (from the random/oracle baseline routers)" if bounds.get("_source") == "baselines" else
                      " (Random: uniform over the classes / paradigms; Oracle: the oracle label)") + ".",
                   rjudge)
    if scores.empty:
        fig_notes.append("Fig. 5 (routing per feature configuration): no router predictions yet (routers train).")
    try:
        calib = calibration.frame(engine)
    except calibration.ViewMissing:
        calib = None
    if calib is not None and not calib.empty:
        add_figure("fig_calibration", lambda: figures.calibration_heatmaps(calib),
                   "**Judge calibration.** Confusion matrix of each judge on the calibration cases (rows = true label, "
                   "columns = verdict; count and share of the row).")
    else:
        fig_notes.append("Judge calibration figure: no calibration verdicts yet (`" + calibration.COMMAND + "`).")
    if fig_judges:
        md.insert(fig_head, "The figures drawn from judgments (Figs. 4, 5, 7 and Table 13's bars) use:\n\n"
                  + trust(fig_judges) + "\n")
    for name, path in report.figures.items():
        md.append(f"![{name}]({path.name})\n")
        md.append(report.captions[name] + f" ([SVG]({path.with_suffix('.svg').name}))\n")
    md += [f"- {n}" for n in fig_notes]
    md.append("")
    text_md = "\n".join(md)
    report.markdown.write_text(text_md, encoding="utf-8")

    report.html = html.write_html(text_md, out, out / "report.html")
    tick("report.html")
    steps.close()
    return report


def _processed_corpora(engine: Engine, prof: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the corpora the tables rest on, the others): a corpus is processed when a chunk of it was
    embedded or extracted or a query of it answered. When none is, every corpus is listed (a
    store that was only ingested). Each row gains ``n_questions_imported`` and
    ``n_queries_generated`` (accepted ones)."""
    if prof.empty:
        return prof, prof
    origin = read_sql(engine, "SELECT corpus_id, "
                              "SUM(CASE WHEN origin = 'imported' THEN 1 ELSE 0 END) AS n_questions_imported, "
                              "SUM(CASE WHEN origin IN ('generated', 'human-reviewed') AND status = 'accepted' THEN 1 ELSE 0 END) "
                              "AS n_queries_generated FROM queries GROUP BY corpus_id")
    prof = prof.merge(origin, on="corpus_id", how="left")
    for c in ("n_questions_imported", "n_queries_generated"):
        prof[c] = prof[c].fillna(0)
    done = (prof["n_chunks_processed"].fillna(0) > 0) | (prof["n_queries_answered"].fillna(0) > 0)
    if not done.any():
        return prof, prof.iloc[0:0]
    return prof[done].reset_index(drop=True), prof[~done].reset_index(drop=True)


def _bounds(engine: Engine, scores: pd.DataFrame, generator: str, judge: str | None) -> dict:
    """Fig. 5's Random and Oracle bounds: the random / oracle baseline routers' own scores when
    they ran, else computed from the oracle labels (Random R.A = 100 / classes, C.R = mean share
    of correct paradigms; Oracle R.A = 100, C.R = share of queries some paradigm answers)."""
    base = scores[scores["router"].isin(["random", "oracle"])]
    if set(base["router"]) == {"random", "oracle"}:
        out = {"_source": "baselines"}
        for router, name in (("random", "Random"), ("oracle", "Oracle")):
            r = base[base["router"] == router]
            out[name] = {"routing_accuracy": float(r["routing_accuracy"].mean()),
                         "correct_rate": float(r["correct_rate"].mean()) if r["correct_rate"].notna().any() else None}
        return out
    if judge is None:
        return {"Oracle": {"routing_accuracy": 100.0, "correct_rate": None}}
    o = read_sql(engine, "SELECT n_correct, n_paradigms FROM v_oracle_label WHERE generator = :g AND judge = :j",
                 {"g": generator, "j": judge})
    if o.empty:
        return {"Oracle": {"routing_accuracy": 100.0, "correct_rate": None}}
    k = int(o["n_paradigms"].max()) + 1
    return {"Random": {"routing_accuracy": 100.0 / k,
                       "correct_rate": 100.0 * float((o["n_correct"] / o["n_paradigms"]).mean())},
            "Oracle": {"routing_accuracy": 100.0, "correct_rate": 100.0 * float((o["n_correct"] > 0).mean())}}


def router_tests(engine: Engine) -> pd.DataFrame:
    """Paired tests of every store router (router, features, encoder, generator, judge) on its
    predicted queries: vs. the best fixed paradigm and vs. the oracle (exact McNemar on correct),
    and tokens vs. the best fixed paradigm (seeded paired bootstrap of the mean difference)."""
    routed = read_sql(engine, "SELECT router, features, encoder, generator, judge, query_id, correct, tokens, "
                              "hit, true_label FROM v_router_routed WHERE dataset = 'store' AND judge IS NOT NULL "
                              "AND correct IS NOT NULL")
    cols = ["router", "features", "encoder", "generator", "judge", "n", "correct_rate", "best_fixed",
            "best_fixed_rate", "p_vs_best_fixed", "vs_best_fixed", "oracle_rate", "p_vs_oracle", "vs_oracle",
            "tokens_diff", "tokens_diff_low", "tokens_diff_high", "p_tokens",
            "routing_accuracy", "majority_label", "majority_accuracy", "p_vs_majority", "vs_majority"]
    if routed.empty:
        return pd.DataFrame(columns=cols)
    outcomes = read_sql(engine, "SELECT query_id, generator, judge, paradigm, correct, tokens FROM v_router_outcomes")
    rows = []
    for (router, features, encoder, generator, judge), part in routed.groupby(
            ["router", "features", "encoder", "generator", "judge"], sort=True):
        part = part.drop_duplicates("query_id")
        qids = list(part["query_id"])
        o = outcomes[(outcomes["generator"] == generator) & (outcomes["judge"] == judge) & outcomes["query_id"].isin(qids)]
        if o.empty:
            continue
        wide_c = o.pivot_table(index="query_id", columns="paradigm", values="correct", aggfunc="first").reindex(qids)
        wide_t = o.pivot_table(index="query_id", columns="paradigm", values="tokens", aggfunc="first").reindex(qids)
        rates = wide_c.mean(axis=0)
        best = best_fixed(rates.to_dict(), wide_t.mean(axis=0).to_dict())  # ties: fewest tokens, as the oracle
        r_c = part.set_index("query_id")["correct"].reindex(qids).astype(float).to_numpy()
        r_t = part.set_index("query_id")["tokens"].reindex(qids).astype(float).to_numpy()
        vs_fixed = stats.mcnemar_exact(r_c, wide_c[best].to_numpy(float))
        oracle = (wide_c.fillna(0).max(axis=1) > 0).astype(float).to_numpy()
        vs_oracle = stats.mcnemar_exact(r_c, oracle)
        tok = stats.paired_bootstrap(r_t, wide_t[best].to_numpy(float), seed=0)
        rc = float(pd.Series(r_c).mean())

        def verdict(test, other):
            if not test.significant:
                return "n.s."
            return "better" if rc > other else "worse"

        # the majority-class baseline: always the most frequent true label of these queries (ties:
        # name); a router that does not beat it on routing accuracy (exact McNemar) learnt nothing
        hits = part["hit"].astype(float).to_numpy()
        counts = part["true_label"].value_counts()
        majority = str(min(counts.index, key=lambda lab: (-int(counts[lab]), str(lab))))
        maj_hits = (part["true_label"].astype(str) == majority).astype(float).to_numpy()
        vs_major = stats.mcnemar_exact(hits, maj_hits)
        ra = float(hits.mean())
        rows.append({"routing_accuracy": 100 * ra, "majority_label": majority,
                     "majority_accuracy": 100 * float(maj_hits.mean()), "p_vs_majority": vs_major.pvalue,
                     "vs_majority": ("better" if ra > maj_hits.mean() else "worse") if vs_major.significant
                     else "n.s.",
                     "router": router, "features": features, "encoder": encoder, "generator": generator, "judge": judge,
                     "n": len(qids), "correct_rate": 100 * rc, "best_fixed": best,
                     "best_fixed_rate": 100 * float(rates[best]), "p_vs_best_fixed": vs_fixed.pvalue,
                     "vs_best_fixed": verdict(vs_fixed, float(rates[best])), "oracle_rate": 100 * float(oracle.mean()),
                     "p_vs_oracle": vs_oracle.pvalue, "vs_oracle": verdict(vs_oracle, float(oracle.mean())),
                     "tokens_diff": tok.estimate, "tokens_diff_low": tok.low, "tokens_diff_high": tok.high,
                     "p_tokens": tok.pvalue})
    return pd.DataFrame(rows, columns=cols)


def _decisions(engine) -> dict:
    """(corpus, qtype, generator, judge) → the cell's row of ``decision_cells``."""
    return {(d["corpus"], d["qtype"], d["generator"], d["judge"]): d for d in decision_cells(engine)}
