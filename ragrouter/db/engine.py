"""Engines and sessions for the store: DuckDB file by default, PostgreSQL by URL.

The URL comes from ``--db``, else ``RAGROUTER_DB``, else ``duckdb:///ragrouter.duckdb`` in the
working directory. A DuckDB file held by another process is reported as one clear
:class:`StoreLockedError` naming the holder's PID.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

DEFAULT_URL = "duckdb:///ragrouter.duckdb"

_LOCK_RE = re.compile(r"Could not set lock on file \"?(?P<path>[^\"\n]+?)\"?:.*?(?:PID (?P<pid>\d+))?\)?", re.S)


class StoreError(RuntimeError):
    """A store problem reported to the user as one line."""


class StoreLockedError(StoreError):
    """The DuckDB file is locked by another process."""


def resolve_url(url: str | None = None) -> str:
    """The store URL: explicit, else ``RAGROUTER_DB``, else the DuckDB default."""
    return url or os.environ.get("RAGROUTER_DB") or DEFAULT_URL


def is_duckdb(url_or_engine) -> bool:
    name = url_or_engine.dialect.name if isinstance(url_or_engine, Engine) else str(url_or_engine)
    return name.startswith("duckdb")


def explain_lock(exc: BaseException, url: str) -> StoreLockedError | None:
    """Turn DuckDB's lock IO error into a one-line error, or None if it is something else."""
    text = str(getattr(exc, "orig", None) or exc)
    if "Could not set lock on file" not in text:
        return None
    pid = re.search(r"PID (\d+)", text)
    path = url.split("///", 1)[-1]
    holder = f"process {pid.group(1)}" if pid else "another process"
    return StoreLockedError(
        f"store {path} is locked by {holder}: wait for it to finish or stop it "
        f"(kill {pid.group(1) if pid else '<pid>'}), or use PostgreSQL (--db postgresql+psycopg://…) "
        "for several workers"
    )


_ENGINES: dict[str, Engine] = {}


def make_engine(url: str | None = None) -> Engine:
    """A (cached) engine for the store URL. Connecting raises StoreLockedError when locked."""
    url = resolve_url(url)
    if url in _ENGINES:
        return _ENGINES[url]
    if url.startswith("postgresql://"):
        url_eff = "postgresql+psycopg://" + url[len("postgresql://"):]
    else:
        url_eff = url
    kwargs: dict = {"future": True}
    if is_duckdb(url_eff):
        path = url_eff.split("///", 1)[-1]
        if path and path != ":memory:":
            parent = os.path.dirname(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
        # One connection per process for a DuckDB file (docs/architecture.md §3: one writer).
        from sqlalchemy.pool import StaticPool

        kwargs["poolclass"] = StaticPool
    else:
        kwargs["pool_pre_ping"] = True
    engine = create_engine(url_eff, **kwargs)
    if not is_duckdb(url_eff):
        @event.listens_for(engine, "connect")
        def _pg_connect(dbapi_conn, _record):  # pragma: no cover - trivial
            dbapi_conn.autocommit = False

    _ENGINES[url] = engine
    # Fail early with a clear message if the file is locked.
    try:
        with engine.connect():
            pass
    except (OperationalError, DBAPIError, Exception) as exc:  # duckdb raises IOException via DBAPIError
        _ENGINES.pop(url, None)
        locked = explain_lock(exc, url)
        if locked:
            raise locked from None
        raise StoreError(f"cannot open store {url}: {str(exc).splitlines()[0]}") from exc
    return engine


def dispose_all() -> None:
    """Close every cached engine (releases DuckDB file locks)."""
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()


@contextlib.contextmanager
def session_scope(url_or_engine: str | Engine | None = None) -> Iterator[Session]:
    """A transactional session: commit on success, roll back on error."""
    engine = url_or_engine if isinstance(url_or_engine, Engine) else make_engine(url_or_engine)
    factory = sessionmaker(bind=engine, future=True, expire_on_commit=False)
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


_LOCKS: dict[int, "threading.RLock"] = {}
_LOCKS_GUARD = __import__("threading").Lock()


def write_lock(engine: Engine):
    """The process-wide lock serialising use of an engine's connection.

    A DuckDB store has one connection per process (StaticPool): every thread that touches it
    — the stage writer, the gateway's ledger — takes this lock around its transaction.
    PostgreSQL engines get a lock too (cheap), so callers need not care which store it is."""
    import threading

    with _LOCKS_GUARD:
        lock = _LOCKS.get(id(engine))
        if lock is None:
            lock = _LOCKS[id(engine)] = threading.RLock()
        return lock
