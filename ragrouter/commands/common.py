"""Shared pieces of the command line: context object, one-line errors, output formats."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import click

from ragrouter.config import Config, ConfigError, PriceError
from ragrouter.db import migrate, outage
from ragrouter.db.engine import StoreError, StoreLockedError, duckdb_path, forget, make_engine, resolve_url
from ragrouter.llm import spool

# Exit statuses (README "Exit codes").
EXIT_OK, EXIT_INTERNAL, EXIT_USER, EXIT_FAILED_UNITS = 0, 1, 2, 3


@dataclass
class Ctx:
    """What every command gets: the store URL and the config file."""

    db_url: str
    config_path: str | None
    _config: Config | None = field(default=None, repr=False)
    create: bool = False
    """--create: a command may create a DuckDB file that does not exist (db upgrade always may)."""

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = Config.load(self.config_path)
        return self._config

    def engine(self, read_only: bool = False, create: bool = False):
        """The store's engine. ``read_only`` opens a DuckDB file read-only, so any number of
        readers (commands, notebooks, the duckdb CLI) share it; a store whose schema or views
        are behind this code is first brought up to date in a brief read-write open. A DuckDB
        file that does not exist is created only with ``create`` (``db upgrade``) or --create."""
        url = resolve_url(self.db_url)
        if not read_only or duckdb_path(url) is None:
            engine = make_engine(url, create=create or self.create)
            migrate.check_revision(engine)  # a newer or foreign revision: one line, every command
            return engine

        import os

        if self.create and not os.path.exists(duckdb_path(url)):  # --create: make and migrate it first
            writer = make_engine(url, create=True)
            try:
                migrate.upgrade(writer)
            finally:
                forget(writer)
        engine = make_engine(url, read_only=True, create=False)
        if engine.ragrouter_read_only is False:  # this process holds it read-write already
            return engine
        work = migrate.needs_work(engine)
        if work is None:
            return engine
        forget(engine)
        try:
            writer = make_engine(url, create=False)
        except StoreError as exc:
            if work == "upgrade":
                raise StoreError(f"store {duckdb_path(url)} is behind this code's schema and cannot be "
                                 f"upgraded now ({exc}); run 'db upgrade' when it can be written") from None
            echo_err(f"warning: the store's SQL views are older than queries/views and cannot be "
                     f"re-created now ({'held by another process' if isinstance(exc, StoreLockedError) else exc})")
            return make_engine(url, read_only=True, create=False)
        try:
            migrate.ensure_current(writer)
        finally:
            forget(writer)
        return make_engine(url, read_only=True, create=False)


    def engine_at_head(self):
        """The store's engine for commands that only read (``status``, read-only ``sql``): opened
        as it is (read-only for a DuckDB file) and refused with one line when its schema is
        behind this code's head (:func:`check_at_head`) — :meth:`engine` alone would upgrade it;
        outdated views of a store at head are re-created as :meth:`engine` does. Only a DuckDB
        file that --create makes now is made."""
        url = resolve_url(self.db_url)
        path = duckdb_path(url)
        if not (self.create and path is not None and not os.path.exists(path)):
            check_at_head(make_engine(url, read_only=path is not None, create=False))
        return self.engine(read_only=True)


def check_at_head(engine) -> None:
    """StoreError (one line) naming the store's revision when it is behind this code's head:
    reading commands leave migrating to ``db upgrade``."""
    rev, head = migrate.check_revision(engine), migrate.head_revision()
    if rev != head:
        raise StoreError(f"store is at revision {rev or 'base (no tables)'}, behind this code's head {head}: "
                         "this command does not migrate it; 'db upgrade' brings it to head")


pass_ctx = click.make_pass_decorator(Ctx)

# Errors the user can act on: printed as one line, exit status 2, no traceback. Named by module
# so that a command does not import what it never raises (the root group loads one command's
# module): an exception can only be one of these when its module is already loaded.
USER_ERRORS: tuple[type[BaseException], ...] = (StoreError, ConfigError, PriceError)
USER_ERROR_NAMES: dict[str, tuple[str, ...]] = {
    "ragrouter.stages.base": ("ScopeError",),
    "ragrouter.ingest.records": ("LoaderError",),
    "ragrouter.evaluation.calibration": ("CalibrationError",),
    "ragrouter.llm.weights": ("WeightsError",),
    "ragrouter.answering.ask": ("AskError",),
}


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of the errors the user can act on (USER_ERRORS, USER_ERROR_NAMES)."""
    if isinstance(exc, USER_ERRORS):
        return True
    for module, names in USER_ERROR_NAMES.items():
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, tuple(getattr(loaded, n) for n in names)):
            return True
    return False


class UserError(click.ClickException):
    """A mistake the user can fix (input, flag, config, store): one line, exit status 2."""

    exit_code = EXIT_USER


class FailedUnits(click.ClickException):
    """A run finished, but some units failed: exit status 3."""

    exit_code = EXIT_FAILED_UNITS


def fail(message: str) -> None:
    raise UserError(message)


# File-system errors a user acts on (a folder missing or read-only, a disk full): one line, exit 2.
FS_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT,
             errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.EEXIST, errno.ENOTEMPTY, errno.EMLINK}
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# The same errors as a database driver words them (DuckDB's IOException, psycopg's errors).
_FS_TEXT = ("no space left on device", "disk quota exceeded", "file too large", "read-only file system",
            "permission denied", "could not write file", "not a directory", "no such file or directory")
_FULL_HINT = "; free some space (or choose another folder) and run the command again — what was committed is kept"


def file_system_error(exc: BaseException, where: str | None = None) -> str | None:
    """One line for a file-system error (``where``: what was being written, e.g. the report
    folder), or None when ``exc`` is something else."""
    if isinstance(exc, OSError) and exc.errno in FS_ERRNOS:
        what = exc.strerror or os.strerror(exc.errno)
        names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
        prefix = f"{where}: " if where else ""
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"{prefix}{names or 'a path'}: {what}"
        return f"{prefix}cannot write{' ' + names if names else ''}: {what}" + (_FULL_HINT if exc.errno in _FULL else "")
    if isinstance(exc, OSError):
        return None
    text = str(getattr(exc, "orig", None) or exc).strip()
    first = text.splitlines()[0] if text else ""
    low = first.lower()
    if any(t in low for t in _FS_TEXT):
        full = any(t in low for t in _FS_TEXT[:3])
        return (f"{where}: " if where else "") + first + (_FULL_HINT if full else "")
    return None


def outage_line(exc: BaseException) -> str | None:
    """The worker's one line when the store went away (db/outage.py): what happened, what was
    kept and how to resume; None for any other error."""
    if not (isinstance(exc, outage.StoreUnavailable) or outage.is_disconnect(exc)):
        return None
    what = str(exc).strip().splitlines()[0] if isinstance(exc, outage.StoreUnavailable) else \
        f"lost the store connection ({outage.first_line(exc)})"
    kept = spool.summary()
    return what + ("; " + kept if kept else "; no paid reply was lost — run the same command again to resume")


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


def hms(seconds) -> str:
    """Seconds as '45s', '12m05s' or '3h07m' ('-' for None)."""
    if seconds is None:
        return "-"
    s = int(round(float(seconds)))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")
