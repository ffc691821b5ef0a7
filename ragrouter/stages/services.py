"""What stages share inside one worker process: config, store, gateway, encoders, caches.

Built lazily, so a stage that needs no model never starts one.
"""

from __future__ import annotations

import os
import socket
import threading
from functools import cached_property

from sqlalchemy import insert, update
from sqlalchemy.engine import Engine

from ragrouter.config import Config
from ragrouter.db import models, outage
from ragrouter.db.engine import write_lock
from ragrouter.db.redact import command_line


class Services:
    """Per-process shared resources for stages."""

    def __init__(self, config: Config, engine: Engine, command: str | None = None) -> None:
        self.config = config
        self.engine = engine
        self.command = command or command_line()  # passwords in --db redacted
        self._lock = threading.RLock()
        self._gateway_lock = threading.Lock()
        self.cache: dict = {}

    @property
    def db_lock(self):
        return write_lock(self.engine)

    @cached_property
    def worker_run_id(self) -> int | None:
        if getattr(self.engine, "ragrouter_read_only", False):  # run --dry-run on a read-only store
            return None
        with self.db_lock, self.engine.begin() as conn:
            return conn.execute(insert(models.WorkerRun).values(
                host=socket.gethostname(), pid=os.getpid(), command=self.command[:2000],
                config=_jsonable(getattr(self.config, "data", None)),
            ).returning(models.WorkerRun.id)).scalar_one()

    def record_stage(self, name: str) -> None:
        """Note in this process' worker_runs row that it ran units of stage ``name`` (with its
        config: what ``status`` reads when no --config is given)."""
        stages = self.__dict__.setdefault("_stages_run", [])
        run_id = self.worker_run_id
        if name in stages:
            return
        stages.append(name)
        with self.db_lock, self.engine.begin() as conn:
            conn.execute(update(models.WorkerRun).where(models.WorkerRun.id == run_id).values(stages=list(stages)))

    def finish(self) -> None:
        """Flush and close the gateway (its ledger rows, its DuckDB connection), stamp the run."""
        self.__dict__.pop("_gateway", None)
        gateway = self.__dict__.pop("gateway", None)
        if gateway is not None:
            gateway.close()
        if self.__dict__.get("worker_run_id") is not None:
            from sqlalchemy import func

            try:
                with self.db_lock, self.engine.begin() as conn:
                    conn.execute(update(models.WorkerRun).where(models.WorkerRun.id == self.worker_run_id)
                                 .values(finished_at=func.now()))
            except Exception as exc:  # noqa: BLE001 - a store that is away: the run stays unstamped
                if not outage.is_disconnect(exc):
                    raise

    @cached_property
    def gateway(self):
        # deferred (start-up): pulls in json_repair, jsonschema
        from ragrouter.llm.gateway import Gateway

        with self._gateway_lock:  # one gateway whichever unit thread asks first (no lock in cached_property >= 3.12)
            if self.__dict__.get("_gateway") is None:  # its spool replay ends before any look-up
                self._gateway = Gateway(self.config, self.engine, worker_run_id=self.worker_run_id)
            return self._gateway

    def memo(self, key, factory):
        """A process-wide memo (e.g. a corpus index built once for all units)."""
        with self._lock:
            if key not in self.cache:
                self.cache[key] = factory()
            return self.cache[key]


def _jsonable(data):
    """The config as JSON would store it (mapping keys as text), or None."""
    if data is None:
        return None
    import json

    return json.loads(json.dumps(data, default=str))
