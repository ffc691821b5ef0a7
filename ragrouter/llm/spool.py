"""The ledger's spool: paid replies that could not be committed, kept on local disk.

When the ledger writer cannot commit a batch (the store stayed unreachable past
``worker.store_outage_s``, a full disk, …) it appends the batch's rows — successful replies
(``llm_calls``) and billed failures (``llm_failures``) — to a JSON-lines file instead of
dropping them: ``$RAGROUTER_SPOOL_DIR`` (default ``~/.local/state/ragrouter/spool``) /
``<store key>/<pid>.jsonl``, the store key being a hash of the store URL without its password.
The next gateway that opens the same store (any command that makes model calls) first writes
every spool file of a process that is no longer alive into the ledger — calls with
``ON CONFLICT (request_hash) DO NOTHING``, so a row that did reach the store is not doubled —
and removes it. Nothing paid for is dropped, and nothing is paid twice for it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import threading
from pathlib import Path

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Engine

from ragrouter.db import outage
from ragrouter.db.redact import redact_secrets
from ragrouter.db.progress import pid_alive
from ragrouter.db.models import LLMCall, LLMFailure

log = logging.getLogger("ragrouter.llm.gateway")

_LOCK = threading.Lock()
_KEPT: dict[str, int] = {}  # spool file -> rows this process put there


def spool_root() -> Path:
    env = os.environ.get("RAGROUTER_SPOOL_DIR")
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "ragrouter" / "spool"


def store_key(engine: Engine) -> str:
    """The spool folder's name for a store: a hash of its URL, password hidden (a DuckDB
    file by its absolute path)."""
    url = engine.url
    try:
        if url.drivername.startswith("duckdb") and url.database and url.database != ":memory:":
            url = url.set(database=os.path.abspath(url.database))
        text = url.render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - any engine has a URL; be safe
        text = str(url)
    return hashlib.sha256(redact_secrets(text).encode()).hexdigest()[:16]


def _encode(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__b64__": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _decode(value):
    if isinstance(value, dict) and set(value) == {"__b64__"}:
        return base64.b64decode(value["__b64__"])
    return value


def keep(engine: Engine, rows: list[tuple[str, dict]]) -> Path:
    """Append ``(table, row)`` pairs ('call' / 'failure') to this process' spool file of the
    store; the file. Raises OSError when even that is impossible (then nothing is left)."""
    folder = spool_root() / store_key(engine)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # prompts and replies: the owner's only
    path = folder / f"{os.getpid()}.jsonl"
    lines = []
    for table, row in rows:
        clean = {k: _encode(v) for k, v in row.items() if k != "id"}  # the next run's sequence gives the id
        lines.append(json.dumps({"table": table, "row": clean}, default=str) + "\n")
    with _LOCK:
        with open(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a", encoding="utf-8") as fh:
            fh.writelines(lines)
            fh.flush()
            os.fsync(fh.fileno())
        _KEPT[str(path)] = _KEPT.get(str(path), 0) + len(rows)
    return path


def kept() -> tuple[int, list[str]]:
    """Rows this process spooled, and the files."""
    with _LOCK:
        return sum(_KEPT.values()), sorted(_KEPT)


def summary() -> str | None:
    """One clause for the worker's last line, or None when nothing was spooled."""
    n, files = kept()
    if not n:
        return None
    calls = "paid repl" + ("y" if n == 1 else "ies")
    return (f"{n} {calls} kept in {', '.join(files)}: they are written to the ledger when the next run on this "
            "store starts on this machine — run the same command again to resume")


def replay(engine: Engine, lock, outage_s: float = outage.DEFAULT_LIMIT_S) -> int:
    """Write every spool file of this store left by a process that is gone into the ledger,
    then remove it; the rows now in the ledger (a call already there is not doubled). A row the
    store refuses (not a lost connection) is set aside in ``<file>.rejected`` with a warning,
    so one bad row never blocks the next start; a lost connection leaves the file for later."""
    folder = spool_root() / store_key(engine)
    if not folder.is_dir():
        return 0
    total = 0
    for path in sorted(folder.glob("*.jsonl")):
        try:
            pid = int(path.stem)
        except ValueError:
            continue
        if pid != os.getpid() and pid_alive(pid):
            continue  # its writer may still append
        claimed = path.with_name(f"{path.name}.replay-{os.getpid()}")
        try:
            os.replace(path, claimed)  # one replayer per file
        except FileNotFoundError:
            continue
        items = _read(claimed)
        try:
            # a store that is away is waited for (outage_s): the gateway is made in a unit's thread
            written, rejected = outage.retry(lambda: _write(engine, lock, items), "replaying the ledger's spool",
                                             outage_s)
        except BaseException:
            os.replace(claimed, path)  # the store went away again: keep it for the next start
            raise
        if rejected:
            with open(path.with_name(f"{path.name}.rejected"), "a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(item, default=str) + "\n" for item, _ in rejected)
            log.warning("ledger: %d row(s) of %s were refused by the store (first: %s); kept in %s.rejected",
                        len(rejected), path, rejected[0][1], path.name)
        claimed.unlink()
        with _LOCK:
            _KEPT.pop(str(path), None)
        total += written
        log.warning("ledger: %d row(s) kept in %s during an earlier outage of the store are in the ledger now",
                    written, path)
    try:
        folder.rmdir()
    except OSError:
        pass
    return total


def _read(path: Path) -> list[dict]:
    items = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                if not isinstance(item.get("row"), dict):
                    raise TypeError("no row")
                items.append(item)
            except (ValueError, TypeError, AttributeError):
                log.warning("spool %s line %d is unreadable (cut by a crash?); skipped", path, n)
    return items


def _insert(conn, item: dict) -> None:
    row = {k: _decode(v) for k, v in item["row"].items()}
    if item.get("table") == "call":
        conn.execute(pg_insert(LLMCall).values(**row).on_conflict_do_nothing(index_elements=["request_hash"]))
    else:
        conn.execute(LLMFailure.__table__.insert().values(**row))


def _write(engine: Engine, lock, items: list[dict]) -> tuple[int, list[tuple[dict, str]]]:
    """(rows written, [(item, why) refused]): all in one transaction, else row by row."""
    try:
        with lock, engine.begin() as conn:
            for item in items:
                _insert(conn, item)
        return len(items), []
    except Exception as exc:  # noqa: BLE001 - find the rows at fault
        if outage.is_disconnect(exc):
            raise
    written, rejected = 0, []
    for item in items:
        try:
            with lock, engine.begin() as conn:
                _insert(conn, item)
            written += 1
        except Exception as exc:  # noqa: BLE001
            if outage.is_disconnect(exc):
                raise
            rejected.append((item, outage.first_line(exc)))
    return written, rejected
