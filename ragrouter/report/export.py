"""`cli.py export --format parquet DIR`: the benchmark's data as typed Parquet files + a dataset card.

One file per entry of :data:`EXPORTS` (corpora with their profile, queries, paradigm runs,
judgments, answer scores, oracle labels, the router dataset), written by DuckDB's own
``COPY (SELECT …) TO 'file.parquet' (FORMAT parquet)`` so that lists and structs keep their
types: JSON columns become typed Parquet columns — id lists (``retrieved_chunk_ids``,
``supporting_chunk_ids``) ``list<int64>``, ``supporting_doc_ids`` ``list<string>``, every other
JSON column (``config``, ``trace``, ``meta``, ``evidence``) a struct whose shape DuckDB infers over
all rows (``json_group_structure``; keys missing in a row are NULL; a value whose type differs
between rows, or a column that has no shape at all, stays JSON text).

On a DuckDB store the COPY reads the store directly; on PostgreSQL (or any other store) the rows
are read through SQLAlchemy in batches into an in-memory DuckDB table with the same column types
and copied from there, so both stores give the same files. ``README.md`` is a Hugging Face
dataset card whose ``configs:`` name one config per file, with a table of field descriptions
per file, so ``datasets.load_dataset(DIR, NAME)`` loads each table; ``manifest.json`` lists the
files and their row counts.

Provenance: the card's "Provenance" section and the manifest's ``provenance`` name the store id,
the ragrouter version and git commit that exported it, the effective config's hash, the judge
keys and paradigm config hashes the rows carry, and each corpus' licence (``unknown`` when the
ingest recorded none; :func:`export_provenance`).

Real paradigms only: the judge's calibration cases (``paradigm = 'calibration'`` runs, their
mirror queries and judgments) are left out of ``queries``, ``paradigm_runs`` and ``judgments``;
how each judge did on them is its own file, ``judge_calibration`` (view v_judge_calibration).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pandas as pd
from sqlalchemy import JSON, Boolean, DateTime, Double, Engine, Integer, LargeBinary, text

import ragrouter
from ragrouter.db import models
from ragrouter.db.frames import read_sql
from ragrouter.db.values import json_value
from ragrouter.paths import git_commit
from ragrouter.report.data import router_dataset


class ExportError(ValueError):
    """The export cannot be written (bad format or folder)."""


@dataclass(frozen=True)
class Export:
    """One exported file: a store table (typed from the ORM) or a view/query, or a frame."""

    sql: str
    table: str | None = None
    where: str = ""
    drop: tuple[str, ...] = ()
    frame: Callable[[Engine], pd.DataFrame] | None = None
    description: str = ""


EXPORTS: dict[str, Export] = {
    "corpora": Export("SELECT * FROM v_corpus_profile ORDER BY corpus_id",
                      description="One row per corpus: documents, chunks and queries stored and processed, and the "
                                  "structural / semantic indicators (paper Tables 8-9; view v_corpus_profile)."),
    "queries": Export("SELECT * FROM queries ORDER BY id", table="queries", where="origin <> 'calibration'",
                      description="Every query: imported or generated, its type, gold answer and validation status."),
    "paradigm_runs": Export("SELECT * FROM paradigm_runs ORDER BY id", table="paradigm_runs",
                            where="paradigm <> 'calibration'",
                            description="Every paradigm run: answer, retrieved chunk ids, config, trace and token "
                                        "cost by phase (inference only; the amortised graph construction is in "
                                        "v_run_latest / router_dataset)."),
    "judgments": Export("SELECT * FROM judgments ORDER BY id", table="judgments", where="NOT is_calibration",
                        description="Every LLM-as-a-judge sample (label per run, judge and sample)."),
    "answer_scores": Export("SELECT * FROM answer_scores ORDER BY id", table="answer_scores",
                            where="run_id NOT IN (SELECT id FROM paradigm_runs WHERE paradigm = 'calibration')",
                            description="Quality metrics per run: semantic F1, coverage, faithfulness (hard/soft), "
                                        "exact match and token F1 (scorer 'squad-v1.1')."),
    "oracle_labels": Export("SELECT * FROM v_oracle_label ORDER BY generator, judge, query_id",
                            description="The oracle label per (query, generator, judge) (view v_oracle_label: "
                                        "highest F1 among correct paradigms, then fewest tokens, then a fixed "
                                        "paradigm order; unanswerable for a question marked so; "
                                        "cannot_answer when none is correct)."),
    "router_dataset": Export("", frame=lambda engine: router_dataset(engine),
                             description="The router dataset: one row per (query, generator, judge) with the "
                                         "corpus indicators, the oracle label and per paradigm p correct__p, "
                                         "tokens__p (total with the amortised graph construction), f1__p, and "
                                         "em__p / token_f1__p (exact match, token F1)."),
    "judge_calibration": Export("SELECT * FROM v_judge_calibration ORDER BY judge, case_set, true_label",
                                description="How far to trust each judge: its verdicts on calibration cases of known "
                                            "label, per judge, case set and true label (view v_judge_calibration; "
                                            "the cases themselves are not among the paradigm runs)."),
}
FORMATS = ("parquet",)
BATCH_ROWS = 5000

INT_LISTS = {"retrieved_chunk_ids", "supporting_chunk_ids"}
STR_LISTS = {"supporting_doc_ids"}

VIEW_FIELDS = {
    "corpus_id": "Store id of the corpus.", "corpus": "Corpus name.", "query_id": "Store id of the query.",
    "generator": "Generator model of the runs.", "judge": "Judge model whose labels are used.",
    "label": "Oracle label: a paradigm name, 'cannot_answer', or 'unanswerable' for a question marked unanswerable "
             "(NULL = undecided: correct runs not scored yet).",
    "unanswerable": "1 when the question is marked unanswerable (a refusal is its right answer), else 0.",
    "qtype": "Query type (factual, reasoning, summary).",
    "query_text": "The question.", "hops": "Reasoning hops (when known).",
    "n_correct": "Paradigms judged correct.", "n_scored_correct": "Correct paradigms that have a semantic F1.",
    "n_paradigms": "Paradigms judged.", "label_f1": "Semantic F1 of the label's run.",
    "label_tokens": "Total tokens (construction amortised) of the label's run.",
    "n_documents": "Documents stored.", "n_documents_processed": "Documents with an embedded or extracted chunk.",
    "total_tokens": "Tokens of the stored documents.", "processed_tokens": "Tokens of the processed documents.",
    "n_chunks": "Chunks stored (all chunkers).", "n_chunks_processed": "Chunks embedded or extracted.",
    "n_queries": "Accepted queries.", "n_queries_answered": "Accepted queries with at least one paradigm run.",
    "case_set": "Calibration case set (its construction version).",
    "true_label": "The label the case has by construction (correct, incorrect, incomplete).",
    "n_cases": "Calibration cases of that true label.", "judged_correct": "Of them, judged correct.",
    "judged_incorrect": "Of them, judged incorrect.", "judged_incomplete": "Of them, judged incomplete.",
    "agreement": "Share of the judge's verdicts equal to the true label.",
    "avg_sample_agreement": "Mean share of a case's samples that gave its verdict.",
}


def _arrow_like_duck(column) -> str:
    kind = column.type
    if isinstance(kind, Boolean):
        return "BOOLEAN"
    if isinstance(kind, Integer):
        return "BIGINT"
    if isinstance(kind, Double):
        return "DOUBLE"
    if isinstance(kind, DateTime):
        return "TIMESTAMP"
    if isinstance(kind, LargeBinary):
        return "BLOB"
    if isinstance(kind, JSON):
        return "JSON"
    return "VARCHAR"


def _columns(spec: Export, drop: tuple[str, ...]):
    return [c for c in models.Base.metadata.tables[spec.table].columns if c.name not in drop]


def _typed_select(con, source: str, columns) -> str:
    """SELECT list over ``source`` that turns JSON columns into typed lists / structs."""
    parts = []
    for c in columns:
        name = c.name
        if not isinstance(c.type, JSON):
            parts.append(name)
            continue
        if name in INT_LISTS:
            parts.append(f"CAST(CAST({name} AS JSON) AS BIGINT[]) AS {name}")
            continue
        if name in STR_LISTS:
            parts.append(f"CAST(CAST({name} AS JSON) AS VARCHAR[]) AS {name}")
            continue
        structure = con.execute(f"SELECT json_group_structure(CAST({name} AS JSON)) FROM {source} "
                                f"WHERE {name} IS NOT NULL").fetchone()[0]
        shape = None if structure is None else json.loads(str(structure))
        if not _typable(shape):
            parts.append(f"CAST({name} AS VARCHAR) AS {name}")
            continue
        typed = f"json_transform(CAST({name} AS JSON), '{_plain_structure(shape)}') AS {name}"
        try:  # a shape DuckDB cannot hold (e.g. keys differing only in case) stays JSON text
            con.execute(f"DESCRIBE SELECT {typed} FROM {source}").fetchall()
        except Exception:  # duckdb.Error subclasses; nothing is written yet
            typed = f"CAST({name} AS VARCHAR) AS {name}"
        parts.append(typed)
    return ", ".join(parts)


def _typable(shape) -> bool:
    """A structure worth typing: an object or list whose leaves have one known type."""
    if not isinstance(shape, (dict, list)):
        return False
    return _has_leaf(shape)


def _has_leaf(shape) -> bool:
    if isinstance(shape, dict):
        return bool(shape) and any(_has_leaf(v) for v in shape.values())
    if isinstance(shape, list):
        return bool(shape) and _has_leaf(shape[0])
    return shape not in ("NULL",)


def _plain_structure(shape) -> str:
    """The structure with untyped leaves ('NULL', empty objects / lists) as JSON, quoted for SQL."""
    def fix(s):
        if isinstance(s, dict):
            return {k: fix(v) for k, v in s.items()} if s else "JSON"
        if isinstance(s, list):
            return [fix(s[0])] if s else ["JSON"]
        return "JSON" if s == "NULL" else s

    return json.dumps(fix(shape)).replace("'", "''")


def _copy(con, select_sql: str, path: Path) -> int:
    con.execute(f"COPY ({select_sql}) TO '{str(path).replace(chr(39), chr(39) * 2)}' (FORMAT parquet)")
    return int(con.execute(f"SELECT COUNT(*) FROM read_parquet('{str(path).replace(chr(39), chr(39) * 2)}')")
               .fetchone()[0])


def _plain(value):
    return float(value) if isinstance(value, Decimal) else value


def _load_table(engine: Engine, con, spec: Export, columns, name: str) -> None:
    """Copy a store table into the in-memory DuckDB ``con`` as table ``name`` (non-DuckDB stores)."""
    ddl = ", ".join(f"{c.name} {_arrow_like_duck(c)}" for c in columns)
    con.execute(f"CREATE TABLE {name} ({ddl})")
    names = [c.name for c in columns]
    json_cols = {c.name for c in columns if isinstance(c.type, JSON)}
    select = spec.sql.replace("SELECT *", "SELECT " + ", ".join(names), 1)
    if spec.where:
        select = select.replace(" ORDER BY ", f" WHERE {spec.where} ORDER BY ", 1)
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=BATCH_ROWS).execute(text(select))
        for part in result.partitions(BATCH_ROWS):
            frame = pd.DataFrame([[(json.dumps(v, ensure_ascii=False, default=str)
                                    if k in json_cols and v is not None and not isinstance(v, str) else _plain(v))
                                   for k, v in zip(names, row)] for row in part], columns=names)
            for c in columns:  # keep all-NULL columns typed
                if isinstance(c.type, (JSON,)) or _arrow_like_duck(c) == "VARCHAR":
                    frame[c.name] = frame[c.name].astype(object)
            con.register("_batch", frame)
            con.execute(f"INSERT INTO {name} SELECT " + ", ".join(
                f"CAST({n} AS {_arrow_like_duck(c)})" for n, c in zip(names, columns)) + " FROM _batch")
            con.unregister("_batch")


def _write_frame(con, frame: pd.DataFrame, path: Path, name: str) -> int:
    frame = frame.copy()
    for c in frame.columns:
        if frame[c].isna().all():
            frame[c] = frame[c].astype("string")  # no value at all: a typed (string) column, not NULL
    con.register(f"_frame_{name}", frame)
    try:
        return _copy(con, f"SELECT * FROM _frame_{name}", path)
    finally:
        con.unregister(f"_frame_{name}")


def export_parquet(engine: Engine, out_dir: str | Path, with_trace: bool = True,
                   only: list[str] | None = None, config=None) -> dict[str, int]:
    """Write one Parquet file per export into ``out_dir`` with DuckDB's COPY, a dataset card
    (``README.md``) and ``manifest.json``; returns rows per file.

    ``with_trace=False`` leaves the (large) ``trace`` column out of ``paradigm_runs``;
    ``only`` restricts the export to some names of :data:`EXPORTS`; ``config`` (the effective
    config) adds its hash to the provenance."""
    import duckdb

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a folder")
    unknown = sorted(set(only or []) - set(EXPORTS))
    if unknown:
        raise ExportError(f"unknown export {unknown[0]!r} (known: {', '.join(EXPORTS)})")
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    schemas: dict[str, list[tuple[str, str, str]]] = {}
    is_duck = engine.dialect.name.startswith("duckdb")
    mem = duckdb.connect(":memory:")
    try:
        with engine.connect() as sa_conn:
            store = sa_conn.connection.driver_connection if is_duck else None
            for name, spec in EXPORTS.items():
                if only and name not in only:
                    continue
                path = out / f"{name}.parquet"
                if spec.table:
                    drop = spec.drop + (("trace",) if name == "paradigm_runs" and not with_trace else ())
                    columns = _columns(spec, drop)
                    if is_duck:
                        con, source = store, spec.table
                    else:
                        con, source = mem, f"_src_{name}"
                        _load_table(engine, mem, spec, columns, source)
                    order = spec.sql.split(" ORDER BY ", 1)[1] if " ORDER BY " in spec.sql else "1"
                    where = f" WHERE {spec.where}" if spec.where and is_duck else ""  # else filtered on load
                    counts[name] = _copy(con, f"SELECT {_typed_select(con, source, columns)} FROM {source}{where} "
                                              f"ORDER BY {order}", path)
                    docs = {c.name: (c.doc or "") for c in columns}
                elif is_duck and not spec.frame:
                    counts[name] = _copy(store, spec.sql, path)
                    docs = {}
                else:
                    frame = spec.frame(engine) if spec.frame else read_sql(engine, spec.sql)
                    counts[name] = _write_frame(mem, frame, path, name)
                    docs = {}
                types = mem.execute(f"DESCRIBE SELECT * FROM read_parquet('{str(path).replace(chr(39), chr(39) * 2)}')"
                                    ).fetchall()
                schemas[name] = [(col, str(typ), docs.get(col) or _field_doc(col)) for col, typ, *_ in types]
    finally:
        mem.close()
    prov = provenance(engine, config)
    manifest = {"exported_at": dt.datetime.now().isoformat(timespec="seconds"), "format": "parquet",
                "with_trace": with_trace, "files": {f"{n}.parquet": c for n, c in counts.items()},
                "provenance": prov}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    (out / "README.md").write_text(dataset_card(counts, schemas, prov), encoding="utf-8")
    return counts


LICENCE_KEYS = ("license", "licence")


def export_provenance(engine: Engine) -> dict:
    """What an export rests on, from the store: its id (``store_info``), the judge keys of the
    benchmark's judgments (calibration cases left out) with their counts, the paradigm config
    hashes of the runs with theirs, and each corpus' licence — ``corpora.meta.license`` when
    the ingest recorded one, else the distinct ``license`` of its documents' metadata (QuALITY,
    SQuALITY carry one per article), else ``unknown``."""
    with engine.connect() as conn:
        sid = conn.execute(text("SELECT store_id FROM store_info ORDER BY created_at LIMIT 1")).scalar()
        judges = [{"judge": r[0], "n_judgments": int(r[1])} for r in conn.execute(text(
            "SELECT judge, COUNT(*) FROM judgments WHERE NOT is_calibration GROUP BY judge ORDER BY judge"))]
        configs = [{"paradigm": r[0], "config_hash": r[1], "n_runs": int(r[2])} for r in conn.execute(text(
            "SELECT paradigm, config_hash, COUNT(*) FROM paradigm_runs WHERE paradigm <> 'calibration' "
            "GROUP BY paradigm, config_hash ORDER BY paradigm, config_hash"))]
        corpora = []
        stored = conn.execute(text("SELECT id, name, source_format, meta FROM corpora ORDER BY name")).all()
        for cid, name, fmt, meta in stored:  # fetched first: DuckDB drops a result its connection moves past
            meta = json_value(meta) or {}
            found = [str(meta[k]) for k in LICENCE_KEYS if isinstance(meta, dict) and meta.get(k)]
            if not found:
                found = sorted({str(r[0]) for key in LICENCE_KEYS for r in conn.execute(text(
                    f"SELECT DISTINCT meta ->> '{key}' FROM documents WHERE corpus_id = :c"), {"c": cid})
                    if r[0]})
            corpora.append({"corpus": name, "source_format": fmt, "licence": ", ".join(found) or "unknown"})
    return {"store_id": str(sid) if sid else "unknown", "judges": judges, "config_hashes": configs,
            "corpora": corpora}


def provenance(engine: Engine, config=None) -> dict:
    """Store id, ragrouter version and commit, config hash, judge keys, paradigm config hashes
    and the corpora's licences of an export."""
    store = export_provenance(engine)
    return {"store_id": store.pop("store_id"), "ragrouter_version": ragrouter.__version__, "git_commit": git_commit(),
            "config_hash": config.full_hash() if config is not None else "unknown", **store}


def _provenance_lines(prov: dict) -> list[str]:
    lines = ["## Provenance", "",
             f"- store id: `{prov['store_id']}`", f"- ragrouter version: `{prov['ragrouter_version']}`",
             f"- git commit: `{prov['git_commit']}`", f"- config hash (the exporting config): `{prov['config_hash']}`",
             "- judge keys (judgments, calibration cases left out): "
             + (", ".join(f"`{j['judge']}` ({j['n_judgments']})" for j in prov["judges"]) or "none"),
             "- paradigm config hashes (runs): "
             + (", ".join(f"{c['paradigm']} `{c['config_hash']}` ({c['n_runs']})" for c in prov["config_hashes"])
                or "none"),
             "", "| Corpus | Source format | Licence |", "|---|---|---|"]
    lines += [f"| {c['corpus']} | {c['source_format'] or 'unknown'} | {c['licence']} |" for c in prov["corpora"]]
    return lines + ["", "Each corpus keeps its own licence; check it before you share the texts.", ""]


def _field_doc(col: str) -> str:
    if col in VIEW_FIELDS:
        return VIEW_FIELDS[col]
    for prefix, what in (("correct__", "1 if the paradigm's run was judged correct, 0 if not"),
                         ("tokens__", "total tokens of the paradigm's run, graph construction amortised (eq. 20)"),
                         ("f1__", "semantic F1 (BERTScore) of the paradigm's answer"),
                         ("em__", "exact match (SQuAD v1.1 normalisation) of the paradigm's answer"),
                         ("token_f1__", "token F1 (SQuAD v1.1 normalisation) of the paradigm's answer")):
        if col.startswith(prefix):
            return f"{what} (paradigm {col[len(prefix):]})."
    return ""


def dataset_card(counts: dict[str, int], schemas: dict[str, list[tuple[str, str, str]]],
                 prov: dict | None = None) -> str:
    """A Hugging Face dataset card: YAML ``configs:`` (one per file) and field descriptions."""
    lines = ["---", "configs:"]
    for name in counts:
        lines += [f"- config_name: {name}", "  data_files:", "  - split: train", f"    path: {name}.parquet"]
    lines += ["license: other", "tags:", "- rag", "- routing", "- ragrouter", "---", "",
              "# ragrouter export", "",
              "Tables of a ragrouter store (a re-implementation of RAGRouter-Bench), one Parquet file per table, "
              "written by DuckDB with nested columns typed (lists and structs). Load one table with:", "",
              "```python", "import datasets", f"ds = datasets.load_dataset(EXPORT_DIR, \"{next(iter(counts), 'queries')}\")",
              "```", ""]
    if prov is not None:
        lines += _provenance_lines(prov)
    for name, n in counts.items():
        spec = EXPORTS[name]
        lines += [f"## {name}", "", f"{spec.description} {n} rows; file `{name}.parquet`.", "",
                  "| Field | Type | Description |", "|---|---|---|"]
        for col, typ, doc in schemas.get(name, []):
            lines.append(f"| `{col}` | `{typ.replace('|', '/')}` | {doc.replace('|', '/')} |")
        lines.append("")
    return "\n".join(lines)
