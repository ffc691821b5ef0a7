"""Values of the store's columns as a raw SQL query returns them, the same on both backends."""

from __future__ import annotations

import json
from typing import Any


def json_value(value: Any, default: Any = None) -> Any:
    """A JSON column's value from a ``text()`` query, whichever form the driver hands over: the
    parsed value (psycopg; duckdb_engine 0.17 for a column typed JSON) or the JSON text (DuckDB
    for an expression typed VARCHAR: a cast, a ``COALESCE`` with a text literal, a store written
    by a driver that kept JSON as text). SQL NULL gives ``default``."""
    if value is None:
        return default
    return json.loads(value) if isinstance(value, str) else value
