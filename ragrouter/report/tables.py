"""The paper's tables as Markdown, built from the view frames (one function per table).

Each ``table_*`` function takes the rows of its view (a DataFrame, as read by
:mod:`ragrouter.report.data`) and returns Markdown; the number formats are the ``fmt_*``
helpers, so a test can format a view's value and find it in the report.
"""

from __future__ import annotations

import math

import pandas as pd

from ragrouter.common import stats
from ragrouter.report.data import paradigm_order

QTYPE_ORDER = ("factual", "reasoning", "summary")
QTYPE_SHORT = {"factual": "Fac.", "reasoning": "Rea.", "summary": "Sum.", "all": "Avg."}
DASH = "-"


# ---------------------------------------------------------------------------------------------
# Formats


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def fmt_pct(value) -> str:
    """A percentage with one decimal ('-' when undefined)."""
    return DASH if _missing(value) else f"{float(value):.1f}"


def fmt_score(value) -> str:
    """A score in [0, 1] with three decimals."""
    return DASH if _missing(value) else f"{float(value):.3f}"


def fmt_int(value) -> str:
    """A count or a token number, rounded, with thousands separators."""
    return DASH if _missing(value) else f"{float(value):,.0f}"


def fmt_millions(value) -> str:
    """Tokens in millions with three decimals (paper Table 16 prints millions)."""
    return DASH if _missing(value) else f"{float(value) / 1e6:.3f}"


def token_unit(values) -> tuple[float, str]:
    """The unit that fits a column of token numbers: (divisor, header suffix) — tokens below
    10,000, thousands ('k') below 10 million, millions ('M') above; from the largest value."""
    finite = [abs(float(v)) for v in values if not _missing(v)]
    top = max(finite) if finite else 0.0
    if top >= 1e7:
        return 1e6, "M"
    if top >= 1e4:
        return 1e3, "k"
    return 1.0, ""


def fmt_tokens(value, divisor: float) -> str:
    """A token number in the unit ``divisor`` (1, 1e3, 1e6): integers in tokens, else 1-2 decimals."""
    if _missing(value):
        return DASH
    v = float(value) / divisor
    if divisor == 1.0:
        return f"{v:,.0f}"
    return f"{v:,.1f}" if divisor == 1e3 else f"{v:,.2f}"


def unit_header(name: str, suffix: str) -> str:
    return f"{name} ({suffix})" if suffix else name


def fmt_ci(pct, low, high, n=None) -> str:
    """'45.0 [30.1, 60.2] n=20': a % with its 95 % interval and N ('-' when undefined)."""
    if _missing(pct):
        return DASH
    ci = f" [{fmt_pct(low)}, {fmt_pct(high)}]" if not _missing(low) else ""
    return f"{fmt_pct(pct)}{ci}" + (f" n={int(n)}" if not _missing(n) else "")


def fmt_float(value, digits: int = 3) -> str:
    return DASH if _missing(value) else f"{float(value):.{digits}f}"


def fmt_sci(value) -> str:
    return DASH if _missing(value) else f"{float(value):.2e}"


def md_table(headers: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    """A GitHub Markdown table; ``align`` holds 'l' or 'r' per column (default: first left)."""
    align = align or ["l"] + ["r"] * (len(headers) - 1)
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(esc(h) for h in headers) + " |",
             "| " + " | ".join("---:" if a == "r" else ":---" for a in align) + " |"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def qtype_order(values) -> list[str]:
    """Query types in the paper's order, unknown ones after, 'all' last."""
    values = [v for v in dict.fromkeys(values) if v is not None]
    known = [q for q in QTYPE_ORDER if q in values]
    rest = sorted(v for v in values if v not in QTYPE_ORDER and v != "all")
    return known + rest + (["all"] if "all" in values else [])


def _blocks(df: pd.DataFrame, keys: list[str]):
    """Groups of ``df`` by ``keys`` in sorted order (None keys sort last)."""
    if df.empty:
        return
    for key, part in df.groupby(keys, dropna=False, sort=True):
        yield (key if isinstance(key, tuple) else (key,)), part


# ---------------------------------------------------------------------------------------------
# Tables


def _significance(per_query: pd.DataFrame | None, generator, judge, corpus, qtype, paradigms) -> stats.Best | None:
    """The leader of one Table 2 column and whether it is significant (exact McNemar against the
    runner-up on the queries both ran), from ``v_run_judged`` rows."""
    if per_query is None or per_query.empty:
        return None
    part = per_query[(per_query["generator"] == generator) & (per_query["judge"] == judge)
                     & (per_query["corpus"] == corpus)]
    if qtype != "all":
        part = part[part["qtype"] == qtype]
    outcomes = {p: dict(zip(g["query_id"], g["correct"])) for p, g in part.groupby("paradigm")}
    outcomes = {p: outcomes[p] for p in paradigms if p in outcomes}
    return stats.best_of(outcomes)


def decision_label(d: dict) -> str:
    """A ``decision_cells`` row as the Best row says it: a decision only when a claim holds."""
    if d["state"] == "eps_best":
        return f"{d['winner']} or any within {d['margin'] * 100:g} pts of it (ε-best, N={d['n_queries']})"
    if d["state"] == "decided":  # a lead is said only where one is bounded above zero
        return f"{d['winner']} (decided, N={d['n_queries']}, lead ≥ {d['bound'] * 100:+.1f} pts)" \
            if d.get("bound") is not None and d["bound"] > 0 else f"{d['winner']} (decided, N={d['n_queries']})"
    if d["state"] == "equivalent":
        return f"equivalent within ±{d['margin'] * 100:.0f} pts (N={d['n_queries']})"
    return f"undecided (N={d['n_queries']}; leader {d['winner'] or '-'})"


def table_accuracy(acc: pd.DataFrame, per_query: pd.DataFrame | None = None, decisions: dict | None = None) -> str:
    """Table 2: % correct per query type and overall, with the 95 % Wilson interval and N of
    every cell, and average tokens (with the amortised graph construction; inference only in its
    own column), per paradigm and corpus; one block per (generator, judge).

    ``per_query`` (rows of ``v_run_judged``) enables the significance row: a column's leader is
    bold and named in the last row only where exact McNemar against the runner-up gives p < 0.05;
    otherwise the row says "n.s." (with p). Where ``run --until-decided`` ran a cell
    (``decisions``: (corpus, qtype, generator, judge) → its ``decision_cells`` row), the row
    gives that anytime-valid state instead: its outcomes were looked at after every batch, and
    a fixed-N McNemar on them would not hold its level."""
    out = []
    for (generator, judge), part in _blocks(acc, ["generator", "judge"]):
        corpora = sorted(part["corpus"].unique())
        qtypes = qtype_order(part["qtype"])
        paradigms = paradigm_order(part["paradigm"].unique())
        cell = {(r.corpus, r.paradigm, r.qtype): r for r in part.itertuples(index=False)}
        all_rows = part[part["qtype"] == "all"]
        div, suffix = token_unit(list(all_rows["avg_tokens"]) + list(all_rows.get("avg_inference_tokens", [])))
        headers = ["Paradigm"]
        for c in corpora:
            headers += [f"{c} {QTYPE_SHORT.get(q, q)}" for q in qtypes]
            headers += [unit_header(f"{c} Tok.", suffix), unit_header(f"{c} Inf. Tok.", suffix)]
        best = {(c, q): _significance(per_query, generator, judge, c, q, paradigms) for c in corpora for q in qtypes}
        rows = []
        for p in paradigms:
            row = [p]
            for c in corpora:
                for q in qtypes:
                    r = cell.get((c, p, q))
                    b = best[(c, q)]
                    d = (decisions or {}).get((c, q, generator, judge))
                    m = "**" if (d["state"] in ("decided", "eps_best") and d["winner"] == p if d is not None else
                                 b is not None and b.significant and b.leader == p) else ""
                    row.append(f"{m}{fmt_ci(r.correct_pct, r.ci_low, r.ci_high, r.n)}{m}" if r is not None else DASH)
                tot = cell.get((c, p, "all"))
                row.append(fmt_tokens(tot.avg_tokens, div) if tot is not None else DASH)
                inf = getattr(tot, "avg_inference_tokens", None) if tot is not None else None
                row.append(fmt_tokens(inf, div))
            rows.append(row)
        if per_query is not None:
            seq = any((c, q, generator, judge) in (decisions or {}) for c in corpora for q in qtypes)
            row = ["Best (McNemar; sequential where decided by run --until-decided)" if seq else "Best (McNemar)"]
            for c in corpora:
                for q in qtypes:
                    d = (decisions or {}).get((c, q, generator, judge))
                    row.append(decision_label(d) if d is not None else
                               best[(c, q)].label() if best[(c, q)] is not None else DASH)
                row += ["", ""]
            rows.append(row)
        unit = {"": "tokens", "k": "thousands of tokens", "M": "millions of tokens"}[suffix]
        out.append(f"**Generator `{generator}`, judge `{judge}`** (% correct [95 % Wilson interval] n = judged runs; "
                   f"Tok. = average tokens per query in {unit}, with the graph construction amortised into the "
                   "paradigms that read the graph (eq. 20); Inf. Tok. = inference only; bold = best, only where "
                   "exact McNemar against the runner-up on the same queries gives p < 0.05, the last row names "
                   "it or says n.s.)\n\n" + md_table(headers, rows))
    return "\n\n".join(out)


def table_breakdown(bd: pd.DataFrame) -> str:
    """Table 13: correct / incorrect / incomplete (no answer) % per paradigm and query type."""
    out = []
    for (generator, judge), part in _blocks(bd, ["generator", "judge"]):
        corpora = sorted(part["corpus"].unique())
        cell = {(r.corpus, r.paradigm, r.qtype): r for r in part.itertuples(index=False)}
        headers = ["Paradigm", "Type"] + [f"{c} {k}" for c in corpora for k in ("Cor", "Inc", "No-A")]
        rows = []
        for p in paradigm_order(part["paradigm"].unique()):
            for q in qtype_order(part.loc[part["paradigm"] == p, "qtype"]):
                row = [p, q]
                for c in corpora:
                    r = cell.get((c, p, q))
                    if r is None:
                        row += [DASH] * 3
                        continue
                    cor = fmt_ci(r.correct_pct, getattr(r, "ci_low", None), getattr(r, "ci_high", None),
                                 getattr(r, "n", None))
                    row += [cor, fmt_pct(r.incorrect_pct), fmt_pct(r.incomplete_pct)]
                rows.append(row)
        out.append(f"**Generator `{generator}`, judge `{judge}`** (% of judged runs; Cor [95 % Wilson interval] "
                   "n = judged runs)\n\n"
                   + md_table(headers, rows, ["l", "l"] + ["r"] * (len(headers) - 2)))
    return "\n\n".join(out)


def table_abstention(a: pd.DataFrame) -> str:
    """Abstention per paradigm (``v_abstention``): refusal rate on the questions marked
    unanswerable (a refusal is right there) and on the answerable ones (a missed answer), each
    with its 95 % Wilson interval and N, and the hallucinations (answers to an unanswerable
    question). Empty when no judged run is on a question marked unanswerable."""
    if a.empty or not (a["n_unanswerable"].fillna(0) > 0).any():
        return ""
    out = []
    for (generator, judge), part in _blocks(a, ["generator", "judge"]):
        order = {p: i for i, p in enumerate(paradigm_order(part["paradigm"].unique()))}
        part = part.assign(_o=part["paradigm"].map(order)).sort_values(["corpus", "_o"])
        rows = [[r.corpus, r.paradigm,
                 fmt_ci(r.refusal_unanswerable_pct, r.refusal_unanswerable_ci_low, r.refusal_unanswerable_ci_high,
                        r.n_unanswerable),
                 fmt_int(r.n_hallucinated),
                 fmt_ci(r.refusal_answerable_pct, r.refusal_answerable_ci_low, r.refusal_answerable_ci_high,
                        r.n_answerable)]
                for r in part.itertuples(index=False)]
        out.append(f"**Generator `{generator}`, judge `{judge}`** (refusal % [95 % Wilson interval] n = judged runs)\n\n"
                   + md_table(["Corpus", "Paradigm", "Refusal % on unanswerable (right)", "Hallucinations",
                               "Refusal % on answerable (missed)"], rows, ["l", "l", "r", "r", "r"]))
    return "\n\n".join(out)


def table_quality(q: pd.DataFrame) -> str:
    """Table 15: mean semantic F1, coverage, faithfulness and LLM-judge correct %, with the
    standard QA metrics exact match (EM) and token F1 (Tok-F1, SQuAD normalisation) beside Sem-F1."""
    if q.empty:
        return ""
    headers = ["Corpus", "Generator", "Paradigm", "Judge", "N", "Sem-F1", "EM", "Tok-F1", "COV", "Faith-H",
               "Faith-S", "LLM-Cor%"]
    rows = []
    order = {p: i for i, p in enumerate(paradigm_order(q["paradigm"].unique()))}
    q = q.assign(_o=q["paradigm"].map(order)).sort_values(["corpus", "generator", "_o", "judge"], na_position="last")
    for r in q.itertuples(index=False):
        rows.append([r.corpus, r.generator, r.paradigm, r.judge if not _missing(r.judge) else DASH,
                     fmt_int(r.n_runs), fmt_score(r.semantic_f1), fmt_score(getattr(r, "exact_match", None)),
                     fmt_score(getattr(r, "token_f1", None)), fmt_score(r.coverage),
                     fmt_score(r.faith_hard), fmt_score(r.faith_soft), fmt_pct(r.correct_pct)])
    return md_table(headers, rows, ["l", "l", "l", "l"] + ["r"] * 8)


def table_tokens(t: pd.DataFrame) -> str:
    """Table 16: token sums per corpus, paradigm and generator in the unit that fits (tokens, k or
    M, said in the header; Avg-Ctx and Build/query in tokens). Ret-In / Ret-Out / Total include
    the amortised graph construction for the paradigms that read the graph (eq. 20); "Total inf."
    is the inference-only total; Empty ctx = runs whose retrieval put nothing into the context."""
    if t.empty:
        return ""
    order = {p: i for i, p in enumerate(paradigm_order(t["paradigm"].unique()))}
    t = t.assign(_o=t["paradigm"].map(order)).sort_values(["corpus", "_o", "generator"])
    sums = ["ret_in", "ret_out", "gen_in", "gen_out", "total", "total_inference", "build", "graph_build_tokens"]
    div, suffix = token_unit([v for c in sums if c in t.columns for v in t[c]])
    headers = ["Corpus", "Paradigm", "Generator", "N", "Avg-Ctx", *(unit_header(h, suffix) for h in (
        "Ret-In", "Ret-Out", "Gen-In", "Gen-Out", "Total", "Total inf.", "Build share", "Graph build")),
        "Build/query", "Empty ctx"]
    rows = [[r.corpus, r.paradigm, r.generator, fmt_int(r.n), fmt_int(r.avg_context_tokens),
             *(fmt_tokens(getattr(r, c, None), div) for c in sums),
             fmt_int(r.graph_build_per_query), fmt_int(getattr(r, "n_empty_context", None))]
            for r in t.itertuples(index=False)]
    return md_table(headers, rows, ["l", "l", "l"] + ["r"] * (len(headers) - 3))


def table_empty_context(t: pd.DataFrame) -> str:
    """Runs whose context came back empty (#15.2), per corpus, generator and paradigm, from
    ``v_token_breakdown`` (n_empty_context of n runs)."""
    if t.empty or "n_empty_context" not in t.columns:
        return ""
    t = t[t["paradigm"] != "llm_only"]
    if t.empty:
        return ""
    order = {p: i for i, p in enumerate(paradigm_order(t["paradigm"].unique()))}
    t = t.assign(_o=t["paradigm"].map(order)).sort_values(["corpus", "generator", "_o"])
    rows = [[r.corpus, r.generator, r.paradigm, fmt_int(r.n), fmt_int(r.n_empty_context),
             fmt_pct(100.0 * r.n_empty_context / r.n if r.n else None)] for r in t.itertuples(index=False)]
    return md_table(["Corpus", "Generator", "Paradigm", "Runs", "Empty context", "%"], rows,
                    ["l", "l", "l", "r", "r", "r"])


STRUCTURAL_COLUMNS = [("nodes", "Nodes", fmt_int), ("edges", "Edges", fmt_int), ("density", "Density", fmt_sci),
                      ("relation_types", "Rel. Types", fmt_int), ("avg_degree", "Avg. Deg.", lambda v: fmt_float(v, 2)),
                      ("components", "Comp.", fmt_int), ("lcc_ratio", "LCC Ratio", fmt_score),
                      ("clustering", "Cluster. Coeff.", lambda v: fmt_float(v, 4))]
SEMANTIC_COLUMNS = [("n_chunks", "Chunks", fmt_int), ("intrinsic_dim", "Int. Dim.", lambda v: fmt_float(v, 2)),
                    ("hubness", "Hubness", lambda v: fmt_float(v, 2)), ("dist_mean", "Avg. Dist.", fmt_score),
                    ("dist_std", "Std. Dist.", fmt_score), ("dist_min", "Min. Dist.", fmt_score),
                    ("dist_max", "Max. Dist.", fmt_score)]
CORPUS_COLUMNS = [("n_documents_processed", "Docs processed", fmt_int), ("n_documents", "Docs stored", fmt_int),
                  ("processed_tokens", "Tokens processed", fmt_int), ("total_tokens", "Tokens stored", fmt_int),
                  ("n_chunks_processed", "Chunks processed", fmt_int), ("n_chunks", "Chunks stored", fmt_int),
                  ("n_queries_answered", "Queries answered", fmt_int), ("n_queries", "Accepted queries", fmt_int),
                  ("n_questions_imported", "Questions imported", fmt_int),
                  ("n_queries_generated", "Queries generated", fmt_int)]


def table_profile(prof: pd.DataFrame, columns) -> str:
    """Tables 8 / 9 (and a corpus summary): one row per corpus, the given columns."""
    if prof.empty:
        return ""
    rows = [[r["corpus"]] + [f(r.get(c)) for c, _, f in columns] for _, r in prof.sort_values("corpus").iterrows()]
    return md_table(["Corpus"] + [h for _, h, _ in columns], rows)


def table_validation(v: pd.DataFrame) -> str:
    """Table 6: generated / passed / pass rate per corpus and type, and rejection reasons; where
    a person reviewed generated queries (``review pull``) also, side by side, how many of the
    reviewed the checks accepted and the reviewer accepted, the queries in the benchmark after
    review (the reviewer's verdict where there is one) and the reviewers' names."""
    if v.empty:
        return ""
    rows = []
    skipped = "skipped" in v.columns
    reviewed = "reviewed" in v.columns and bool(pd.to_numeric(v["reviewed"], errors="coerce").fillna(0).sum())
    for corpus, whole in v.groupby("corpus", sort=True):
        # one block per (generator, strategy, judge) pass; labelled when a corpus has several
        keys = [c for c in ("generator", "strategy", "judge") if c in whole.columns]
        blocks = list(whole.groupby(keys, sort=True)) if keys else [((), whole)]
        for key, part in blocks:
            key = key if isinstance(key, tuple) else (key,)
            label = corpus if len(blocks) == 1 else f"{corpus} ({', '.join(str(k) for k in key if str(k))})"
            by_type = {r.qtype: r for r in part.itertuples(index=False)}
            order = ["factual", *sorted(k for k in by_type if k.endswith("-hop")), "reasoning", "summary"]
            order += sorted(k for k in by_type if k not in order and k != "all") + ["all"]
            for q in [k for k in order if k in by_type]:
                r = by_type[q]
                extra = [fmt_int(r.skipped) + ("" if _missing(r.skip_reasons) else f" ({r.skip_reasons})")] \
                    if skipped else []
                review = [fmt_int(r.reviewed), fmt_int(r.reviewed_passed), fmt_int(r.reviewer_accepted),
                          fmt_int(r.benchmark), r.reviewers if not _missing(r.reviewers) else DASH] if reviewed else []
                rows.append([label, q, fmt_int(r.generated), fmt_int(r.passed), fmt_pct(r.pass_rate_pct),
                             fmt_int(r.pending), *extra, *review,
                             r.rejection_reasons if not _missing(r.rejection_reasons) else DASH])
    head = ["Corpus", "Type", "Gen.", "Pass", "Rate %", "Pending"] + (["Skipped (reasons)"] if skipped else [])
    head += ["Reviewed", "Pass (checks) of reviewed", "Accepted by reviewer", "In benchmark", "Reviewer"] \
        if reviewed else []
    return md_table(head + ["Failed checks (rejected)"], rows, ["l", "l", "r", "r", "r", "r"]
                    + (["l"] if skipped else []) + (["r", "r", "r", "r", "l"] if reviewed else []) + ["l"])


def table_oracle(oracle: pd.DataFrame) -> str:
    """Oracle label distribution: queries per label, per corpus and query type."""
    out = []
    for (generator, judge), part in _blocks(oracle, ["generator", "judge"]):
        part = part.assign(label=part["label"].where(part["label"].notna(), "undecided"))
        labels = paradigm_order(set(part["label"]) - {"cannot_answer", "unanswerable", "undecided"})
        labels += [x for x in ("cannot_answer", "unanswerable", "undecided") if x in set(part["label"])]
        both = pd.concat([part, part.assign(qtype="all")], ignore_index=True)
        counts = both.groupby(["corpus", "qtype", "label"]).size()
        rows = []
        for corpus in sorted(part["corpus"].unique()):
            for q in qtype_order(both.loc[both["corpus"] == corpus, "qtype"]):
                n = [int(counts.get((corpus, q, lab), 0)) for lab in labels]
                rows.append([corpus, q] + [fmt_int(v) for v in n] + [fmt_int(sum(n))])
        out.append(f"**Generator `{generator}`, judge `{judge}`** (queries per oracle label)\n\n"
                   + md_table(["Corpus", "Type", *labels, "Total"], rows, ["l", "l"] + ["r"] * (len(labels) + 1)))
    return "\n\n".join(out)


def table_routers(scores: pd.DataFrame) -> str:
    """Router scores (paper Table 3: R.A, F1, MRR, C.R, tokens), as ``v_router_scores`` and the
    MLflow runs give them: fold mean ± std over the CV folds, with the 95 % Wilson interval of
    the per-query rates pooled over the N CV predictions. Only rows with fold metrics (the
    judge whose labels trained the router)."""
    if scores.empty or "macro_f1" not in scores.columns:
        return ""
    s = scores[scores["routing_accuracy"].notna()]
    if s.empty:
        return ""
    s = s.sort_values(["dataset", "generator", "judge", "features", "router", "encoder"], na_position="last")

    def pm(v, sd, scale=100.0, digits=1):
        if _missing(v):
            return DASH
        return f"{scale * float(v):.{digits}f} ± {scale * (0.0 if _missing(sd) else float(sd)):.{digits}f}"

    def ci(lo, hi):
        return DASH if _missing(lo) else f"[{100 * float(lo):.1f}, {100 * float(hi):.1f}]"

    rows = [[r.router, r.features, r.encoder, r.generator, r.dataset, r.judge if not _missing(r.judge) else DASH,
             fmt_int(r.n), pm(r.routing_accuracy, r.routing_accuracy_std),
             ci(r.routing_accuracy_ci_low, r.routing_accuracy_ci_high), pm(r.macro_f1, r.macro_f1_std),
             pm(r.mrr, r.mrr_std, 1.0, 3), pm(r.correct_rate, r.correct_rate_std),
             fmt_pct(None if _missing(getattr(r, "pooled_correct_rate", None)) else 100 * r.pooled_correct_rate),
             ci(r.correct_rate_ci_low, r.correct_rate_ci_high), pm(r.avg_tokens, r.avg_tokens_std, 1.0, 0)]
            for r in s.itertuples(index=False)]
    return ("Fold mean ± std over the CV folds (the numbers of MLflow and `routers compare`); pooled: the share "
            "over all N CV predictions, with its 95 % Wilson interval.\n\n"
            + md_table(["Router", "Features", "Encoder", "Generator", "Dataset", "Judge", "N", "R.A % (fold mean)",
                        "R.A pooled 95 % CI", "F1 % (fold mean)", "MRR (fold mean)", "C.R % (fold mean)",
                        "C.R % (pooled)", "C.R pooled 95 % CI", "Tokens (fold mean)"], rows,
                       ["l"] * 6 + ["r"] * 9))


def table_router_tests(t: pd.DataFrame) -> str:
    """The paired router tests of :func:`ragrouter.report.build.router_tests` (C.R in %, p-values,
    tokens difference with its bootstrap interval)."""
    if t.empty:
        return ""
    div, suffix = token_unit(list(t["tokens_diff_low"]) + list(t["tokens_diff_high"]))
    rows = []
    for r in t.itertuples(index=False):
        rows.append([r.router, r.features, r.encoder, r.generator, r.judge, fmt_int(r.n), fmt_pct(r.correct_rate),
                     f"{r.best_fixed} {fmt_pct(r.best_fixed_rate)}", f"{r.vs_best_fixed} (p={r.p_vs_best_fixed:.3g})",
                     fmt_pct(r.oracle_rate), f"{r.vs_oracle} (p={r.p_vs_oracle:.3g})",
                     f"{fmt_tokens(r.tokens_diff, div)} [{fmt_tokens(r.tokens_diff_low, div)}, "
                     f"{fmt_tokens(r.tokens_diff_high, div)}]"
                     + ("" if _missing(r.p_tokens) else (" p<0.001" if r.p_tokens == 0 else f" p={r.p_tokens:.3g}")),
                     fmt_pct(getattr(r, "routing_accuracy", None)),
                     f"{getattr(r, 'majority_label', DASH)} {fmt_pct(getattr(r, 'majority_accuracy', None))}",
                     f"{getattr(r, 'vs_majority', DASH)} (p={getattr(r, 'p_vs_majority', float('nan')):.3g})"])
    return md_table(["Router", "Features", "Encoder", "Generator", "Judge", "N", "C.R % (pooled)",
                     "Best fixed C.R % (pooled)", "vs. best fixed", "Oracle C.R % (pooled)", "vs. oracle",
                     unit_header("Δ tokens vs. best fixed", suffix), "R.A % (pooled)", "Majority-class R.A %",
                     "vs. majority"],
                    rows, ["l"] * 5 + ["r"] * 10)


def majority_warning(t: pd.DataFrame) -> str:
    """One line naming the routers that do not beat the majority-class baseline on routing
    accuracy (exact McNemar, p ≥ 0.05, or worse): they may have learnt only the majority label."""
    if t.empty or "vs_majority" not in t.columns:
        return ""
    weak = t[t["vs_majority"] != "better"]
    if weak.empty:
        return "Every router beats the majority-class baseline on routing accuracy (p < 0.05).\n"
    names = ", ".join(f"`{r.router}` ({r.features}, {r.encoder}; R.A {fmt_pct(r.routing_accuracy)} vs. "
                      f"always `{r.majority_label}` {fmt_pct(r.majority_accuracy)}, {r.vs_majority})"
                      for r in weak.itertuples(index=False))
    return (f"**Not significantly better than the majority-class baseline** (always the most frequent label; "
            f"exact McNemar on routing hits, p < 0.05 needed): {names}. Such a router may have learnt only the "
            f"majority label; 'n.s.' means the test could not tell them apart at this N, not that they are equal.\n")
