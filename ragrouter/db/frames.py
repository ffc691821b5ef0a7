"""A SELECT or a view of the store as a pandas DataFrame, read the same on DuckDB and PostgreSQL."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
from sqlalchemy import Engine, text


def _plain(value):
    if isinstance(value, Decimal):
        return float(value)
    return value


def read_sql(engine: Engine, sql: str, params: dict | None = None) -> pd.DataFrame:
    """Rows of one SELECT as a DataFrame (Decimal → float, so DuckDB and PostgreSQL agree)."""
    with engine.connect() as conn:
        result = conn.execute(text(sql), params or {})
        columns = list(result.keys())
        rows = [tuple(_plain(v) for v in row) for row in result.all()]
    return pd.DataFrame(rows, columns=columns)


def read_view(engine: Engine, name: str, order_by: str | None = None) -> pd.DataFrame:
    """All rows of one view (or table), optionally ordered."""
    sql = f"SELECT * FROM {name}" + (f" ORDER BY {order_by}" if order_by else "")
    return read_sql(engine, sql)
