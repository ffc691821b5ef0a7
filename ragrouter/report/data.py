"""Reading the store's views into pandas, and the router dataset pivoted for any paradigm set."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine, text

from ragrouter.db.frames import read_sql
from ragrouter.routers.dataset import DEFAULT_PARADIGMS, INDICATORS

# Tables whose row counts tell which stage has produced data (report's "stages" section).
STAGE_TABLES: dict[str, str] = {
    "ingest": "documents",
    "chunk": "chunks",
    "embed": "vectors",
    "extract": "chunk_extractions",
    "metrics": "corpus_metrics",
    "querygen": "queries",
    "validate": "query_checks",
    "answer": "paradigm_runs",
    "judge": "judgments",
    "score": "answer_scores",
    "routers": "router_predictions",
}


STAGE_FILTERS: dict[str, str] = {"querygen": "origin IN ('generated', 'human-reviewed')"}
"""Rows of a stage's table that the stage wrote: the queries table also holds imported questions
(ingest) and calibration mirrors, which querygen did not generate."""


def with_totals(by_type: pd.DataFrame, overall: pd.DataFrame) -> pd.DataFrame:
    """Table 2's rows: the per-type rows of ``v_accuracy_by_type`` and, as ``qtype = 'all'``,
    the per-paradigm totals of ``v_accuracy_overall`` (the store keeps them in two views so
    that neither counts a run twice; the table shows them side by side)."""
    if overall.empty:
        return by_type
    totals = overall.assign(qtype="all")[[c for c in by_type.columns if c in overall.columns or c == "qtype"]]
    return pd.concat([by_type, totals], ignore_index=True) if not by_type.empty else totals


def stage_table(stage: str) -> str:
    """The table a stage fills, as the report names it (``queries (generated)`` for querygen)."""
    return STAGE_TABLES[stage] + (" (generated)" if stage == "querygen" else "")


def stage_counts(engine: Engine) -> dict[str, int]:
    """Rows per stage's result table, e.g. ``{'judge': 0, …}`` (querygen: generated queries only)."""
    counts = {}
    with engine.connect() as conn:
        for stage, table in STAGE_TABLES.items():
            cond = f" WHERE {STAGE_FILTERS[stage]}" if stage in STAGE_FILTERS else ""
            counts[stage] = int(conn.execute(text(f"SELECT COUNT(*) FROM {table}{cond}")).scalar_one())
    return counts


def imported_questions(engine: Engine) -> int:
    """Questions that came with a dataset (ingest), not from querygen."""
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT COUNT(*) FROM queries WHERE origin = 'imported'")).scalar_one())


def judges(engine: Engine) -> pd.DataFrame:
    """Judge models with the number of runs each judged (most first, then by name)."""
    return read_sql(engine, "SELECT judge, COUNT(*) AS n_runs FROM v_judgment GROUP BY judge "
                            "ORDER BY COUNT(*) DESC, judge")


def choose_judge(engine: Engine, preferred: str | None = None) -> str | None:
    """The judge whose labels the figures use: ``preferred`` (the configured judge) when it has
    judged anything, else the judge with the most judged runs; None when nothing is judged."""
    found = judges(engine)
    if found.empty:
        return None
    if preferred is not None and preferred in set(found["judge"]):
        return preferred
    return str(found["judge"].iloc[0])


def paradigm_order(names) -> list[str]:
    """The default paradigms in the paper's order, then any other paradigm alphabetically."""
    names = set(names)
    return [p for p in DEFAULT_PARADIGMS if p in names] + sorted(names - set(DEFAULT_PARADIGMS))


OUTCOME_PREFIXES = ("correct", "tokens", "f1", "em", "token_f1")
"""Per-paradigm columns of the store's router dataset: ``<prefix>__<paradigm>`` (the first three
are the router library's contract; em / token_f1 ride along for analysis)."""


def router_dataset(engine: Engine, judge: str | None = None, generator: str | None = None,
                   complete: bool = False) -> pd.DataFrame:
    """The router dataset (ragrouter.routers.dataset's shape) for whatever paradigms ran.

    Pivots ``v_router_outcomes`` so that every paradigm present gets ``correct__p``,
    ``tokens__p`` and ``f1__p`` (paper order first) — and the standard QA metrics ``em__p`` and
    ``token_f1__p`` (exact match, token F1; not required by the router library) — with the oracle label of
    ``v_oracle_label`` and the corpus indicators of ``v_corpus_profile``. ``judge`` /
    ``generator`` filter the rows (the router library wants one row per (query, generator), so
    pass a judge when several exist). A paradigm that did not run, was not judged or has no F1
    yet is NaN; ``complete=True`` keeps only the rows without any NaN outcome (what
    ``validate_router_dataset`` accepts).
    """
    where, params = [], {}
    if judge is not None:
        where.append("judge = :judge")
        params["judge"] = judge
    if generator is not None:
        where.append("generator = :generator")
        params["generator"] = generator
    cond = (" WHERE " + " AND ".join(where)) if where else ""
    outcomes = read_sql(engine, "SELECT query_id, generator, judge, paradigm, correct, tokens, f1, "
                                "em, token_f1 "
                                "FROM v_router_outcomes" + cond, params)
    labels = read_sql(
        engine,
        "SELECT o.query_id, o.corpus, o.generator, o.judge, q.qtype, q.question AS query_text, "
        "p.lcc_ratio, p.density, p.clustering, p.intrinsic_dim, p.hubness, p.dist_mean AS avg_distance, o.label, "
        "o.unanswerable "
        "FROM v_oracle_label o JOIN queries q ON q.id = o.query_id "
        "LEFT JOIN v_corpus_profile p ON p.corpus_id = o.corpus_id"
        + (" WHERE " + " AND ".join("o." + w for w in where) if where else ""),
        params,
    )
    base_cols = ["query_id", "corpus", "generator", "judge", "qtype", "query_text", *INDICATORS, "label"]
    if outcomes.empty:
        return pd.DataFrame(columns=base_cols)
    paradigms = paradigm_order(outcomes["paradigm"].unique())
    keys = ["query_id", "generator", "judge"]
    # One row per (query, generator, judge, paradigm) in the view, so unstack cannot collide.
    wide = outcomes.set_index(keys + ["paradigm"])[list(OUTCOME_PREFIXES)].unstack("paradigm")
    flat = pd.DataFrame(index=wide.index)
    for prefix in OUTCOME_PREFIXES:
        for p in paradigms:
            flat[f"{prefix}__{p}"] = pd.to_numeric(wide[(prefix, p)], errors="coerce")
    # An undecided oracle label (NULL: correct paradigms without an F1 yet) is no training example.
    labels = labels[labels["label"].notna()]
    out = labels.merge(flat.reset_index(), on=keys, how="inner")
    if complete:
        needed = [f"{k}__{p}" for p in paradigms for k in ("correct", "tokens", "f1")]
        out = out.dropna(subset=needed).reset_index(drop=True)
    out = out.sort_values(keys, kind="stable").reset_index(drop=True)
    return out[base_cols + [c for c in out.columns if c not in base_cols]]
