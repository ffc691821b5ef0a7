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
from sqlalchemy.orm import Session, sessionmaker

from ragrouter.db import progress
from ragrouter.db.redact import redact_secrets

DEFAULT_URL = "duckdb:///ragrouter.duckdb"



class StoreError(RuntimeError):
    """A store problem reported to the user as one line."""


class StoreLockedError(StoreError):
    """The DuckDB file is held by another process."""

    def __init__(self, message: str, path: str | None = None, pid: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.pid = pid


class StoreMissingError(StoreError):
    """The DuckDB file does not exist (only ``db upgrade`` or ``--create`` make one)."""


def resolve_url(url: str | None = None) -> str:
    """The store URL: explicit, else ``RAGROUTER_DB``, else the DuckDB default."""
    return url or os.environ.get("RAGROUTER_DB") or DEFAULT_URL


def is_duckdb(url_or_engine) -> bool:
    name = url_or_engine.dialect.name if isinstance(url_or_engine, Engine) else str(url_or_engine)
    return name.startswith("duckdb")


_SCHEMES = ("duckdb:///", "postgresql://", "postgresql+psycopg://", "postgres://")


def check_url(url: str) -> str:
    """The SQLAlchemy URL for a store URL; a malformed one is a one-line StoreError."""
    if url.startswith("duckdb://") and not url.startswith("duckdb:///"):
        raise StoreError(f"malformed store URL {url!r}: a DuckDB store is duckdb:///PATH (three slashes)")
    if not url.startswith(_SCHEMES):
        raise StoreError(f"malformed store URL {url!r}: use duckdb:///FILE or postgresql://USER@HOST/DB")
    if url.startswith("duckdb:///"):
        path = url[len("duckdb:///"):].split("?", 1)[0]
        if path in ("", ":memory:"):
            raise StoreError(f"store URL {url!r} names no file (an in-memory store keeps nothing): "
                             "use duckdb:///FILE")
        return url
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url[len(prefix):]
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
    except Exception as exc:  # noqa: BLE001 - sqlalchemy raises ArgumentError / ValueError
        raise StoreError(f"malformed store URL: {str(exc).splitlines()[0]}") from None
    if not parsed.database:
        raise StoreError(f"store URL {_redact(url)!r} names no database: postgresql://USER@HOST/DB")
    return url


def _redact(url: str) -> str:
    return redact_secrets(url)


def duckdb_path(url: str) -> str | None:
    """The file of a duckdb:/// URL (None for other stores)."""
    if not url.startswith("duckdb:///"):
        return None
    return url[len("duckdb:///"):].split("?", 1)[0]


def explain_lock(exc: BaseException, url: str, read_only: bool = False) -> StoreLockedError | None:
    """Turn DuckDB's lock IO error into a one-line error, or None if it is something else."""
    text = str(getattr(exc, "orig", None) or exc)
    if "Could not set lock on file" not in text:
        return None
    pid_match = re.search(r"PID (\d+)", text)
    pid = int(pid_match.group(1)) if pid_match else None
    path = duckdb_path(url) or url

    run = progress.read(path)
    holder = f"process {pid}" if pid else "another process"
    if run is not None and (pid is None or run.get("pid") == pid):
        msg = (f"store {path} is locked by {holder}: a run is in progress since {run.get('started_at')} "
               f"({run.get('command', 'ragrouter')}); 'status' shows its progress, other commands can "
               "read the store once it finishes")
    elif read_only:
        msg = (f"store {path} is locked by {holder}, which has it open for writing; read it once that "
               "process finishes (DuckDB allows no reader beside a writer), or use PostgreSQL "
               "(--db postgresql://...) for concurrent access")
    else:
        msg = (f"store {path} is locked by {holder}, which has it open; write to it once that process "
               "has closed it (DuckDB allows one writing process and no readers beside it), or use "
               "PostgreSQL (--db postgresql://...) for several workers")
    return StoreLockedError(msg, path=path, pid=pid)


def _explain_open(exc: BaseException, url: str, read_only: bool) -> StoreError:
    locked = explain_lock(exc, url, read_only)
    if locked:
        return locked
    text = str(getattr(exc, "orig", None) or exc).strip()
    first = text.splitlines()[0] if text else exc.__class__.__name__
    path = duckdb_path(url)
    if path is not None:
        low = first.lower()
        if "not a valid duckdb database" in low or "could not read enough bytes" in low \
                or "corrupt" in low or "checksum" in low or "wal" in low and "replay" in low:
            return StoreError(f"store {path} is not a readable DuckDB store (corrupt or truncated file?): {first}")
        if "read-only file system" in low or "permission denied" in low:
            return StoreError(f"store {path} cannot be opened for writing ({first.split(':')[-1].strip()}); "
                              "read-only commands (status, sql, report, export) still work")
    return StoreError(f"cannot open store {_redact(url)}: {first}")


WAL_REPLAY_BUG = "GetDefaultDatabase with no default database set"


def replay_stranded_wal(exc: BaseException, path: str) -> bool:
    """Recover a DuckDB file whose WAL DuckDB 1.5.5 cannot replay when it opens the file alone.

    A process killed after DDL with ``COMMENT ON COLUMN`` of a ``nextval`` column and before a
    checkpoint leaves such a WAL (docs/duckdb-wal-comment-bug.md); the same WAL replays fine
    when the file is ATTACHed to a connection that already has a default database. This does
    that, checkpoints the store and detaches it; True when it did (the caller opens the file
    again), False when ``exc`` is another error or the replay failed too."""
    text = str(getattr(exc, "orig", None) or exc)
    if WAL_REPLAY_BUG not in text or not os.access(path, os.W_OK):
        return False
    import logging

    import duckdb

    try:
        con = duckdb.connect()
        try:
            con.execute("ATTACH '" + path.replace("'", "''") + "' AS stranded")
            con.execute("CHECKPOINT stranded")
            con.execute("DETACH stranded")
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - the caller reports the original error
        return False
    logging.getLogger(__name__).warning("store %s: replayed a write-ahead log left by a process that was killed "
                                        "(DuckDB could not replay it on open); the store is whole", path)
    return True


# libpq connection parameters of every PostgreSQL engine (see make_engine)
PG_CONNECT_ARGS = {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
                   "keepalives_count": 3}

_ENGINES: dict[tuple[str, bool | str], Engine] = {}

# A sandboxed DuckDB reader (``sql`` without --write): no file written or read outside the
# store (COPY … TO, EXPORT DATABASE, ATTACH, read_csv), no extension installed or loaded from
# disk, and no SET that could undo any of it (DuckDB locks the configuration).
DUCKDB_SANDBOX = {"enable_external_access": False, "autoload_known_extensions": False,
                  "autoinstall_known_extensions": False, "lock_configuration": True}


def make_engine(url: str | None = None, *, read_only: bool = False, create: bool = True,
                sandbox: bool = False) -> Engine:
    """A (cached) engine for the store URL.

    ``read_only`` opens a DuckDB file read-only (any number of such processes share it);
    ``sandbox`` (DuckDB, with ``read_only``) adds :data:`DUCKDB_SANDBOX` — a process must not
    hold the same file in another mode at the same time (DuckDB refuses two configurations);
    ``create=False`` refuses a DuckDB file that does not exist (StoreMissingError). Connecting
    raises StoreLockedError when another process holds the file, StoreError otherwise."""
    url = resolve_url(url)
    key: tuple[str, bool | str] = (url, "sandbox" if sandbox and read_only else read_only)
    if key in _ENGINES:
        return _ENGINES[key]
    if read_only and (url, False) in _ENGINES and not sandbox:  # this process writes it already: share it
        return _ENGINES[(url, False)]
    url_eff = check_url(url)
    kwargs: dict = {"future": True}
    if is_duckdb(url_eff):
        path = duckdb_path(url_eff)
        parent = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise StoreError(f"store {path} is a directory, not a DuckDB file")
        if not os.path.exists(path):
            if not create or read_only:
                raise StoreMissingError(f"store {path} does not exist: create it with 'db upgrade' "
                                        "(or pass --create), or point --db / RAGROUTER_DB at an existing store")
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the directory {parent} for store {path}: "
                                 f"{exc.strerror}") from None
            if not os.access(parent, os.W_OK):
                raise StoreError(f"cannot create store {path}: directory {parent} is not writable")
        # One connection per process for a DuckDB file (docs/explanation/architecture.md §3: one writer).
        from sqlalchemy.pool import StaticPool

        kwargs["poolclass"] = StaticPool
        if read_only:
            kwargs["connect_args"] = {"read_only": True}
            if sandbox:
                kwargs["connect_args"]["config"] = dict(DUCKDB_SANDBOX)
    else:
        kwargs["pool_pre_ping"] = True
        # a store that vanishes from the network (not restarted: blackholed) must not hang a
        # worker: connecting gives up after PG_CONNECT_TIMEOUT_S, and TCP keepalives notice a dead
        # peer within about a minute, so db/outage.py can wait for it and the server drops the
        # session's locks (a dead worker's leases become claimable). Explicit URL query
        # parameters (…?connect_timeout=30) win.
        from sqlalchemy.engine import make_url as _make_url

        given = set(_make_url(url_eff).query)
        kwargs["connect_args"] = {k: v for k, v in PG_CONNECT_ARGS.items() if k not in given}
    engine = create_engine(url_eff, **kwargs)
    engine.ragrouter_read_only = bool(read_only and is_duckdb(url_eff))  # type: ignore[attr-defined]
    if not is_duckdb(url_eff):
        @event.listens_for(engine, "connect")
        def _pg_connect(dbapi_conn, _record):  # pragma: no cover - trivial
            dbapi_conn.autocommit = False

    # Fail early with a clear message if the file is locked, corrupt or unreachable.
    for attempt in (0, 1):
        try:
            with engine.connect() as conn:
                if is_duckdb(url_eff):
                    conn.exec_driver_sql("SELECT COUNT(*) FROM duckdb_tables()").all()
            break
        except Exception as exc:  # noqa: BLE001 - duckdb raises IOException via DBAPIError
            engine.dispose()
            if attempt == 0 and is_duckdb(url_eff) and replay_stranded_wal(exc, duckdb_path(url_eff)):
                continue
            raise _explain_open(exc, url, read_only) from None
    _ENGINES[key] = engine
    return engine


def forget(engine: Engine) -> None:
    """Dispose one cached engine (to reopen its file in another mode)."""
    for key, value in list(_ENGINES.items()):
        if value is engine:
            _ENGINES.pop(key)
    engine.dispose()


def forget_sandbox(url: str | None) -> None:
    """Dispose this process's sandboxed reader of the store, if any: DuckDB refuses a second
    open of a file in another configuration, so the next plain open needs it closed."""
    engine = _ENGINES.get((resolve_url(url), "sandbox"))
    if engine is not None:
        forget(engine)


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
