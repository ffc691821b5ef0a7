"""The progress file a worker keeps beside a DuckDB store: ``<store>.progress.json``.

DuckDB lets one process write a file and no other process read it meanwhile, so while a
worker runs, ``status`` reads this small JSON file instead of the store. It is written
atomically (temporary file + rename) by the stage runner, at most about once a second, and
removed when the worker exits. A file left by a dead process is ignored (its PID is gone).
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import os
import sys
import threading
import time
from pathlib import Path

_STATE: dict[str, dict] = {}
_LOCK = threading.Lock()
_MIN_INTERVAL_S = 1.0


def progress_path(db_path: str | Path) -> Path:
    return Path(str(db_path) + ".progress.json")


def duckdb_file(engine) -> str | None:
    """The DuckDB file behind an engine, or None (PostgreSQL, in-memory)."""
    try:
        if not engine.dialect.name.startswith("duckdb"):
            return None
        database = engine.url.database
    except AttributeError:
        return None
    if not database or database == ":memory:":
        return None
    return os.path.abspath(database)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def _write(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only directory: progress is a convenience, never an error
        try:
            tmp.unlink()
        except OSError:
            pass


def _remove(path: Path) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def update(engine, stage: str, *, done: int = 0, failed: int = 0, pending: int = 0,
           force: bool = False) -> None:
    """Record that this process works on ``stage`` (units done / failed of pending)."""
    db = duckdb_file(engine)
    if db is None:
        return
    path = progress_path(db)
    with _LOCK:
        state = _STATE.get(db)
        if state is None:
            state = _STATE[db] = {"pid": os.getpid(), "started_at": _now(),
                                  "command": " ".join(os.path.basename(a) if i == 0 else a
                                                      for i, a in enumerate(sys.argv))[:300],
                                  "stages": {}, "_t": 0.0}
            atexit.register(_remove, path)
        state["stage"] = stage
        state["stages"][stage] = {"done": int(done), "failed": int(failed), "pending": int(pending)}
        now = time.monotonic()
        if not force and now - state["_t"] < _MIN_INTERVAL_S:
            return
        state["_t"] = now
        data = {k: v for k, v in state.items() if not k.startswith("_")}
        data["updated_at"] = _now()
    _write(path, data)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read(db_path: str | Path) -> dict | None:
    """The progress of the live worker on ``db_path``, or None."""
    path = progress_path(db_path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not _alive(data["pid"]):
        return None
    return data
