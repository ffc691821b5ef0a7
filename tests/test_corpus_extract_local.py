"""Integration test: the extract stage for real on the local model (SmolLM2-135M on the embedded
llama.cpp server), over a slice of the medical corpus, in a ``cli.py run`` worker that is
killed (SIGKILL) mid-stage and then run again.

What must hold: nothing that was committed before the kill is lost or changed; the rerun
finishes every chunk (extracted, or a recorded failure when the 135M model's reply is
unusable); and it asks the model only for chunks whose call never reached the ledger — a
call recorded before the kill is a cache hit, never a second request.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from sqlalchemy import text

from ragrouter.corpus import demo
from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.ingest import store as ingest_store
from ragrouter.llm import weights
from tests.conftest import SHARED_DATA

REPO = Path(__file__).resolve().parent.parent
N_CHUNKS = 4

CONFIG = {
    "backends": {
        # threads 1: on a shared 2-core machine llama.cpp's threads wait for each other otherwise
        "smol": {"kind": "local", "model": "smollm2-135m", "n_ctx": 2048, "n_parallel": 1, "concurrency": 1,
                 "timeout_s": 300, "retries": 1, "threads": 1},
        "minilm": {"kind": "local-encoder", "model": "all-MiniLM-L6-v2"},
    },
    "roles": {"generators": ["smol"], "extractor": "smol", "judge": "smol", "query_generator": "smol",
              "embedder": "minilm"},
    "extraction": {"max_tokens": 160},  # a reply cut here keeps its complete triples
}


def _state(url: str) -> dict:
    engine = eng.make_engine(url)
    try:
        with engine.connect() as conn:
            q = lambda sql: [tuple(r) for r in conn.execute(text(sql)).all()]  # noqa: E731
            return {
                "chunks": q("SELECT id FROM chunks ORDER BY id"),
                "extractions": {r[0]: r[1:] for r in q("SELECT chunk_id, llm_call_id, n_triples, extractor "
                                                       "FROM chunk_extractions")},
                "calls": {r[0]: r[1:] for r in q("SELECT id, request_hash, prompt_tokens, completion_tokens, "
                                                 "worker_run_id FROM llm_calls WHERE stage = 'extract'")},
                "triples": set(q("SELECT s.name, t.relation, o.name, t.chunk_id FROM triples t "
                                 "JOIN entities s ON s.id = t.subject_id JOIN entities o ON o.id = t.object_id")),
                "failed_chunks": [int(r[0].split(":")[1]) for r in q(
                    "SELECT unit_key FROM unit_failures WHERE stage = 'extract'")],
            }
    finally:
        eng.dispose_all()


def _worker(url: str, cfg: Path) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "cli.py", "--db", url, "--config", str(cfg), "run", "--stage",
                             "extract", "--corpus", "med"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_extract_on_the_local_model_survives_kill_9(tmp_path):
    weights.install("smollm2-135m")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    url = f"duckdb:///{tmp_path / 'store.duckdb'}"
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    ds = demo.medical_slice(SHARED_DATA / "medical", N_CHUNKS, 0, 0.75)
    with engine.begin() as conn:
        ingest_store.write_dataset(conn, "med", "graphrag-bench", ds, [])
    eng.dispose_all()
    out = subprocess.run([sys.executable, "cli.py", "--db", url, "--config", str(cfg), "run", "--stage", "chunk",
                          "--corpus", "med", "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    n_chunks = len(_state(url)["chunks"])
    assert n_chunks >= N_CHUNKS

    # First worker: killed once two chunks are extracted (read from its progress bar; the
    # 135M model's reply is sometimes unusable, which is a recorded failure of that chunk).
    p = _worker(url, cfg)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: p.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 900
    while p.poll() is None and time.monotonic() < deadline:
        bars = re.findall(r"extract:\s+\d+%\|[^|]*\|\s*(\d+)/\d+ \[[^\]]*failed=(\d+)", "".join(err))
        if bars and int(bars[-1][0]) - int(bars[-1][1]) >= 2:
            break
        time.sleep(0.2)
    assert p.poll() is None, "the stage ended before it could be killed:\n" + "".join(err)[-3000:]
    # the runner commits finished units within seconds (worker.batch_size or 5 s): give it
    # time to commit these, then kill inside a later chunk's call
    time.sleep(4.0)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    before = _state(url)
    assert 1 <= len(before["extractions"]) < n_chunks, ("the kill should land mid-stage", before["extractions"])

    # Second worker: runs to the end.
    out = subprocess.run([sys.executable, "cli.py", "--db", url, "--config", str(cfg), "run", "--stage", "extract",
                          "--corpus", "med", "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=1800)
    # exit 3 = the run finished with recorded failures (an unusable 135M reply), counted in its last line
    assert out.returncode == 0 or (out.returncode == 3 and "unit(s) failed" in out.stderr.strip().splitlines()[-1]), \
        out.stderr[-3000:]
    after = _state(url)

    # nothing lost: every unit and ledger row from before the kill is still there, unchanged
    for chunk_id, row in before["extractions"].items():
        assert after["extractions"][chunk_id] == row
    for call_id, row in before["calls"].items():
        assert after["calls"][call_id] == row
    assert before["triples"] <= after["triples"]
    # every chunk is extracted or has a recorded failure; extractions are tied to ledger calls
    done = set(after["extractions"])
    assert done | set(after["failed_chunks"]) == {c[0] for c in after["chunks"]} and not done & set(after["failed_chunks"])
    assert all(row[0] in after["calls"] for row in after["extractions"].values())
    assert any(row[1] > 0 for row in after["extractions"].values()), "the model produced no triple at all"
    # no call repeated: each pending chunk made one chat call; those whose call reached the
    # ledger before the kill (unit not yet committed) were cache hits, the rest HTTP requests
    pending = [c[0] for c in after["chunks"] if c[0] not in before["extractions"]]
    reused = [c for c in pending if c in done and after["extractions"][c][0] in before["calls"]]
    m = re.search(r"model calls: (\d+) HTTP requests, (\d+) cache hits", out.stdout)
    assert m, out.stdout
    assert (int(m.group(1)), int(m.group(2))) == (len(pending) - len(reused), len(reused)), out.stdout
    new_calls = set(after["calls"]) - set(before["calls"])
    assert len(new_calls) == len([c for c in pending if c in done]) - len(reused)
    assert len({row[0] for row in after["calls"].values()}) == len(after["calls"])
