"""Every migration step both ways, with data in every table (issue #31, item 3).

The walk goes from head down to base one revision at a time and back up, on DuckDB and
PostgreSQL, over whatever revisions ``migrations/versions`` holds. At each downgrade step the
guard (without --yes) must refuse exactly when a table holding rows or a column holding values
would go — and then leave the store unchanged — and the step must succeed with --yes, the
views created where the revision's tables allow. At each upgrade step the rows of every table
survive, and back at head every view is current."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Boolean, DateTime, Integer, LargeBinary, text
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.types import JSON

from ragrouter.db import engine as eng
from ragrouter.db import migrate, models
from tests.test_store_cli import fingerprint, one_line, run_fast


def _value(column):
    typ = column.type
    if isinstance(typ, Boolean):
        return True
    if isinstance(typ, Integer):
        return 1  # every id is 1: each foreign key points at its parent's only row
    if isinstance(typ, DateTime):
        return dt.datetime(2026, 1, 2, 3, 4, 5)
    if isinstance(typ, LargeBinary):
        return b"\x00\x01"
    if isinstance(typ, JSON) or "JSON" in type(typ).__name__.upper():
        return {"k": 1}
    try:
        python = typ.python_type
    except NotImplementedError:
        python = str
    if python in (float, __import__("decimal").Decimal):
        return 0.5
    return "x"


def _fill_empty_tables(engine) -> None:
    """One row in every empty table, a value in each of its columns (those the revision has)."""
    with engine.begin() as conn:
        present = migrate._columns(conn)
        for table in models.Base.metadata.sorted_tables:
            if table.name not in present or conn.execute(text(f'SELECT COUNT(*) FROM "{table.name}"')).scalar_one():
                continue
            cols = [c for c in table.columns if c.name in present[table.name]]
            # a bare table of the revision's columns: no default of a column it lacks is sent
            bare = sa_table(table.name, *[sa_column(c.name, c.type) for c in cols])
            conn.execute(bare.insert().values({c.name: _value(c) for c in cols}))


def _revisions() -> list[str]:
    return list(reversed(migrate.known_revisions()))  # oldest first


def _data(engine) -> tuple[dict[str, int], dict[str, int]]:
    with engine.connect() as conn:
        rows = migrate._table_rows(conn)
        return rows, migrate._column_values(conn, rows)


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_every_revision_down_and_up_with_data(backend, duck_url, request):
    url = duck_url if backend == "duckdb" else request.getfixturevalue("pg_url")
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    _fill_empty_tables(engine)
    revs = _revisions()
    assert revs[0] == "0001" and len(revs) >= 3
    rows, _ = _data(engine)
    assert all(n == 1 for t, n in rows.items()), rows  # every table holds data (store_info: its id)
    try:
        for target in list(reversed(revs[:-1])) + ["base"]:
            rows, values = _data(engine)
            before = fingerprint(url)
            engine = eng.make_engine(url)
            refused = None
            try:
                migrate.downgrade(engine, target, allow_loss=False)
            except migrate.DataLossError as exc:
                refused = str(exc)
            if refused:
                assert fingerprint(url) == before, target  # nothing changed
                engine = eng.make_engine(url)
                lost = migrate.downgrade(engine, target, allow_loss=True)
            else:
                lost = {}
            assert migrate.current_revision(engine) == (None if target == "base" else target)
            after_rows, after_values = _data(engine)
            gone = {t: n for t, n in rows.items() if t not in after_rows and n}
            gone.update({c: n for c, n in values.items() if n and c.split(".")[0] in after_rows
                         and c not in after_values})
            # the guard saw exactly what went: every table with rows, every column with values
            assert lost == gone, (target, lost, gone)
            assert bool(refused) == bool(gone), (target, refused, gone)
            for name in gone:
                assert name in refused, (name, refused)
            for t, n in after_rows.items():  # what stays keeps its rows
                assert n == rows[t], (target, t)
            if target != "base":
                with engine.connect() as conn:
                    stored = migrate.stored_view_hashes(conn)
                assert stored is not None
        assert set(fingerprint(url)[0]) <= {"alembic_version"}
        survivors: dict[str, int] = {}
        for target in revs:
            engine = eng.make_engine(url)
            migrate.upgrade(engine, target)
            assert migrate.current_revision(engine) == target
            rows, _ = _data(engine)
            for t, n in survivors.items():
                assert rows.get(t) == n, (target, t)
            _fill_empty_tables(engine)
            survivors = _data(engine)[0]
        assert migrate.views_current(engine)
        assert all(n >= 1 for n in survivors.values()), survivors
    finally:
        eng.dispose_all()


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_downgrade_that_drops_columns_with_values_needs_yes(backend, duck_url, request):
    url = duck_url if backend == "duckdb" else request.getfixturevalue("pg_url")
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    _fill_empty_tables(engine)
    eng.dispose_all()
    env = {"RAGROUTER_DB": url}
    before = fingerprint(url)
    line = one_line(run_fast("db", "downgrade", "0001", env=env), 2, "would drop",
                    "judgments.raw_label (1 value)", "worker_runs.config (1 value)", "nothing was changed", "--yes")
    assert "router_fold_metrics (1 row)" in line and "store_info" not in line  # bookkeeping is no data
    assert fingerprint(url) == before
    out = run_fast("db", "downgrade", "0003", "--yes", env=env)
    assert out.returncode == 0, out.stderr
    assert "store at revision 0003" in out.stdout
    # the views of tables that 0003 has are there; those over later tables are not
    engine = eng.make_engine(url)
    with engine.connect() as conn:
        views = set(migrate.stored_view_hashes(conn))
        assert conn.execute(text("SELECT COUNT(*) FROM judgments")).scalar_one() == 1
    eng.dispose_all()
    assert views and views < set(migrate.view_hashes())
    out = run_fast("db", "current", env=env)
    assert "current: 0003" in out.stdout and "outdated" in out.stdout
    out = run_fast("db", "upgrade", env=env)
    assert out.returncode == 0, out.stderr
    engine = eng.make_engine(url)
    assert migrate.views_current(engine)
    eng.dispose_all()
