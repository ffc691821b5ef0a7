"""A model-free test stage for the worker machinery: each unit sleeps a little, logs that it
ran (one line per compute, per process) and writes one corpus_metrics row."""

from __future__ import annotations

import os
import sys
import time

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert

from ragrouter.db import models
from ragrouter.stages.base import Stage, Unit


class TouchStage(Stage):
    name = "touch"

    def __init__(self, n_units: int, corpus_id: int, log_dir: str, sleep_s: float = 0.02) -> None:
        self.n = n_units
        self.corpus_id = corpus_id
        self.log = os.path.join(log_dir, f"computed-{os.getpid()}.log")
        self.sleep_s = sleep_s

    def counts(self, conn, scope):
        done = conn.execute(text("SELECT COUNT(*) FROM corpus_metrics WHERE corpus_id = :c AND variant = 'touch'"),
                            {"c": self.corpus_id}).scalar()
        return self.n, int(done)

    def pending(self, conn, scope):
        done = set(conn.execute(text("SELECT metric FROM corpus_metrics WHERE corpus_id = :c AND variant = 'touch'"),
                                {"c": self.corpus_id}).scalars())
        return [Unit(f"u{i:04d}", i) for i in range(self.n) if f"u{i:04d}" not in done]

    def compute(self, unit, services):
        time.sleep(self.sleep_s)
        with open(self.log, "a") as fh:
            fh.write(unit.key + "\n")
        return unit.payload

    def write(self, conn, unit, result):
        conn.execute(insert(models.CorpusMetric).values(corpus_id=self.corpus_id, metric=unit.key, variant="touch",
                                                        value=float(result)))


def main() -> None:
    """python -m tests.support.touch_stage URL N CORPUS_ID LOG_DIR SLEEP LEASE_SECONDS"""
    from ragrouter.config import Config
    from ragrouter.db.engine import make_engine
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    url, n, cid, log_dir, sleep_s, lease = sys.argv[1:7]
    cfg = Config.load(env={"RAGROUTER__worker__lease_seconds": lease, "RAGROUTER__worker__batch_size": "5"})
    engine = make_engine(url)
    stage = TouchStage(int(n), int(cid), log_dir, float(sleep_s))
    rep = run_stage(stage, Services(cfg, engine, command="touch"), Scope(config=cfg), workers=4, progress=False)
    print(f"done={rep.done} failed={rep.failed} retaken={rep.retaken} lost={rep.lost}", flush=True)


if __name__ == "__main__":
    main()
