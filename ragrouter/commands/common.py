"""Shared pieces of the command line: context object, one-line errors, output formats."""

from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import click

from ragrouter.config import Config, ConfigError
from ragrouter.db.engine import StoreError, make_engine, resolve_url


@dataclass
class Ctx:
    """What every command gets: the store URL and the config file."""

    db_url: str
    config_path: str | None
    _config: Config | None = field(default=None, repr=False)

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = Config.load(self.config_path)
        return self._config

    def engine(self):
        return make_engine(self.db_url)


pass_ctx = click.make_pass_decorator(Ctx)

# Errors the user can act on: printed as one line, exit status 2, no traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (StoreError, ConfigError)


def register_user_error(exc_type: type[BaseException]) -> None:
    global USER_ERRORS
    if exc_type not in USER_ERRORS:
        USER_ERRORS = USER_ERRORS + (exc_type,)


def fail(message: str) -> None:
    raise click.ClickException(message)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(value))} bytes>"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def render_rows(columns: list[str], rows: list[tuple], fmt: str) -> str:
    """Rows as an aligned table, CSV, or a JSON array of row objects."""
    if fmt == "json":
        return json.dumps([{c: _jsonable(v) for c, v in zip(columns, row)} for row in rows], default=str)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_jsonable(v) for v in row])
        return buf.getvalue().rstrip("\n")
    cells = [[("" if v is None else str(_jsonable(v))) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)


def echo_err(message: str) -> None:
    click.echo(message, err=True)


def default_url() -> str:
    return resolve_url(None)


def is_tty() -> bool:
    return sys.stderr.isatty()
