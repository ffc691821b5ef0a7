"""`cli.py export --format parquet DIR`: the benchmark's data as Parquet files.

One file per entry of :data:`EXPORTS` (queries, paradigm runs, judgments, answer scores, oracle
labels, the router dataset, corpora with their profile), readable by ``pandas.read_parquet``
and by Hugging Face ``datasets.Dataset.from_parquet``. Store tables keep their column types
(JSON columns become JSON text, so every file has a flat, stable schema); big tables are
streamed in batches. ``manifest.json`` lists the files and their row counts.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import JSON, Boolean, DateTime, Double, Engine, Integer, LargeBinary, text

from ragrouter.db import models
from ragrouter.report.data import router_dataset


class ExportError(ValueError):
    """The export cannot be written (bad format or folder)."""


@dataclass(frozen=True)
class Export:
    """One exported file: a store table (typed from the ORM) or a view/query (typed by pyarrow)."""

    sql: str
    table: str | None = None
    drop: tuple[str, ...] = ()
    frame: Callable[[Engine], object] | None = None


EXPORTS: dict[str, Export] = {
    "corpora": Export("SELECT * FROM v_corpus_profile ORDER BY corpus_id"),
    "queries": Export("SELECT * FROM queries ORDER BY id", table="queries"),
    "paradigm_runs": Export("SELECT * FROM paradigm_runs ORDER BY id", table="paradigm_runs"),
    "judgments": Export("SELECT * FROM judgments ORDER BY id", table="judgments"),
    "answer_scores": Export("SELECT * FROM answer_scores ORDER BY id", table="answer_scores"),
    "oracle_labels": Export("SELECT * FROM v_oracle_label ORDER BY generator, judge, query_id"),
    "router_dataset": Export("", frame=lambda engine: router_dataset(engine)),
}
FORMATS = ("parquet",)
BATCH_ROWS = 5000


def _arrow_type(column) -> pa.DataType:
    kind = column.type
    if isinstance(kind, Boolean):
        return pa.bool_()
    if isinstance(kind, Integer):
        return pa.int64()
    if isinstance(kind, Double):
        return pa.float64()
    if isinstance(kind, DateTime):
        return pa.timestamp("us")
    if isinstance(kind, LargeBinary):
        return pa.binary()
    return pa.string()  # String, Text, JSON (as JSON text)


def _table_schema(table: str, drop: tuple[str, ...]) -> tuple[pa.Schema, set[str]]:
    cols = [c for c in models.Base.metadata.tables[table].columns if c.name not in drop]
    schema = pa.schema([pa.field(c.name, _arrow_type(c), nullable=True) for c in cols])
    return schema, {c.name for c in cols if isinstance(c.type, JSON)}


def _cell(value, is_json: bool):
    if is_json:
        if value is None:
            return None
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, Decimal):
        return float(value)
    return value


def _write_table(engine: Engine, spec: Export, path: Path) -> int:
    schema, json_cols = _table_schema(spec.table, spec.drop)
    names = schema.names
    select = spec.sql.replace("SELECT *", "SELECT " + ", ".join(names), 1)
    n = 0
    with pq.ParquetWriter(path, schema) as writer, engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=BATCH_ROWS).execute(text(select))
        for part in result.partitions(BATCH_ROWS):
            columns = {name: [_cell(row[i], name in json_cols) for row in part] for i, name in enumerate(names)}
            writer.write_table(pa.table(columns, schema=schema))
            n += len(part)
        if n == 0:
            writer.write_table(schema.empty_table())
    return n


def _write_frame(frame, path: Path) -> int:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    # Columns with no value at all have arrow type null, which some readers reject: use string.
    fields = [pa.field(f.name, pa.string()) if pa.types.is_null(f.type) else f for f in table.schema]
    table = table.cast(pa.schema(fields))
    pq.write_table(table, path)
    return table.num_rows


def export_parquet(engine: Engine, out_dir: str | Path, with_trace: bool = True,
                   only: list[str] | None = None) -> dict[str, int]:
    """Write one Parquet file per export into ``out_dir``; returns rows per file.

    ``with_trace=False`` leaves the (large) ``trace`` column out of ``paradigm_runs``;
    ``only`` restricts the export to some names of :data:`EXPORTS`."""
    from ragrouter.report.data import read_sql

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    unknown = sorted(set(only or []) - set(EXPORTS))
    if unknown:
        raise ExportError(f"unknown export {unknown[0]!r} (known: {', '.join(EXPORTS)})")
    counts: dict[str, int] = {}
    for name, spec in EXPORTS.items():
        if only and name not in only:
            continue
        path = out / f"{name}.parquet"
        if spec.table:
            drop = spec.drop + (("trace",) if name == "paradigm_runs" and not with_trace else ())
            counts[name] = _write_table(engine, Export(spec.sql, spec.table, drop), path)
        else:
            frame = spec.frame(engine) if spec.frame else read_sql(engine, spec.sql)
            counts[name] = _write_frame(frame, path)
    manifest = {"exported_at": dt.datetime.now().isoformat(timespec="seconds"), "format": "parquet",
                "with_trace": with_trace, "files": {f"{n}.parquet": c for n, c in counts.items()}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return counts
