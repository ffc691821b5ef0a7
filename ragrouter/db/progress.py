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

from ragrouter.db.redact import command_line

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
                                  "command": command_line()[:300],  # passwords redacted
                                  "stages": {}, "_t": 0.0}
            atexit.register(_remove, path)
        state["stage"] = stage
        began = (state["stages"].get(stage) or {}).get("started", time.time())  # for status' ETA
        state["stages"][stage] = {"done": int(done), "failed": int(failed), "pending": int(pending),
                                  "started": float(began)}
        now = time.monotonic()
        if not force and now - state["_t"] < _MIN_INTERVAL_S:
            return
        state["_t"] = now
        data = {k: v for k, v in state.items() if not k.startswith("_")}
        data["updated_at"] = _now()
    _write(path, data)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_WARNED: set[str] = set()


def _malformed(data) -> str | None:
    """What is wrong with a progress file's content (None: it has the shape update() writes)."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if not isinstance(data.get("pid"), int) or isinstance(data.get("pid"), bool):
        return "'pid' is not an integer"
    for key in ("started_at", "updated_at", "command", "stage"):
        if key in data and not isinstance(data[key], str):
            return f"'{key}' is not a string"
    stages = data.get("stages", {})
    if not isinstance(stages, dict):
        return "'stages' is not a mapping"
    for name, counts in stages.items():
        if not isinstance(counts, dict) or not all(
                isinstance(counts.get(k, 0), int) and not isinstance(counts.get(k, 0), bool)
                for k in ("done", "failed", "pending")):
            return f"stage {name!r} is not a mapping of done/failed/pending counts"
    return None


def eta_seconds(counts: dict, now: float | None = None) -> float | None:
    """Seconds left for a stage of a progress file at the pace it has kept since it started
    (None until a unit is done, or without a start time)."""
    started, done = counts.get("started"), int(counts.get("done", 0) or 0)
    if not isinstance(started, (int, float)) or done <= 0:
        return None
    left = int(counts.get("pending", 0) or 0) - done - int(counts.get("failed", 0) or 0)
    elapsed = max(0.0, (time.time() if now is None else now) - float(started))
    return max(0.0, left * elapsed / done)


def read(db_path: str | Path) -> dict | None:
    """The progress of the live worker on ``db_path``, or None. A file that is not what
    :func:`update` writes is ignored, with one warning on stderr (once per file and process)."""
    path = progress_path(db_path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        problem = f"unreadable ({exc.__class__.__name__})"
    else:
        problem = _malformed(data)
    if problem:
        if str(path) not in _WARNED:
            _WARNED.add(str(path))
            print(f"warning: progress file {path} is malformed ({problem}); ignored", file=sys.stderr)
        return None
    if not pid_alive(data["pid"]):
        return None
    return data
