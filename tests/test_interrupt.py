"""SIGTERM (and Ctrl-C) on `run`: one line — what is done, what is pending, the command that
resumes — the interrupted stage's units and stage_timings row kept, and an exit that does not
wait for the calls in flight (ragrouter/commands/interrupt.py, ragrouter/stages/runner.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import text

from ragrouter.commands.interrupt import Steps, Stopped, resume_command, stop_line
from ragrouter.stages.runner import StageReport
from tests.fake_openai import FakeOpenAI
from tests.test_stages_answer import ex, fake_config, ingest, responder

REPO = Path(__file__).resolve().parent.parent
LATENCY = 0.5


def _extractions(srv) -> int:
    return sum(1 for r in srv.requests if r.get("path", "").endswith("/chat/completions")
               and (r.get("json") or r.get("body") or {}).get("messages", [{}])[0].get("content", "")
               .startswith(ex.SYSTEM))


def test_sigterm_on_run_says_where_it_stopped_and_keeps_the_stages_time(store, duck_url, tmp_path):
    ingest(store)  # 8 chunks to extract
    from ragrouter.db import engine as eng

    eng.dispose_all()  # the DuckDB file is the child's now
    with FakeOpenAI(responder=responder, latency_s=LATENCY, embedding_dim=16) as srv:
        cfg = fake_config(srv, workdir=tmp_path)
        cfg.data["backends"]["fake-gen"]["concurrency"] = 1
        (tmp_path / "cfg.yaml").write_text(__import__("yaml").safe_dump(cfg.data))
        argv = [sys.executable, str(REPO / "cli.py"), "--db", duck_url, "--config", str(tmp_path / "cfg.yaml"),
                "run", "--corpus", "toy", "--quiet"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                cwd=tmp_path)
        try:
            deadline = time.monotonic() + 120
            while _extractions(srv) < 3 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)  # two extractions answered, the third in flight
            assert proc.poll() is None, proc.communicate()
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
            exited_after = time.monotonic() - signalled
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 143, (out, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("stopped by")]
    assert len(lines) == 1, err
    line = lines[0]
    engine = eng.make_engine(duck_url)
    with engine.connect() as conn:
        done = conn.execute(text("SELECT COUNT(*) FROM chunk_extractions")).scalar()
        rows = conn.execute(text("SELECT units, model_calls, seconds FROM stage_timings WHERE stage = 'extract'")).all()
    assert 1 <= done < 8, line
    assert line.startswith(f"stopped by SIGTERM in extract ({done} of 8 units done, {8 - done} pending; its time is "
                           f"recorded); done: chunk; still to run: "), line
    assert "embed, metrics, querygen, validate, answer, judge, score" in line, line
    assert line.endswith(f"; resume with: python cli.py --db {duck_url} --config {tmp_path / 'cfg.yaml'} run "
                         "--corpus toy --quiet"), line
    assert len(rows) == 1 and rows[0][0] == done and rows[0][1] >= done and rows[0][2] > 0, rows
    assert exited_after < 10, exited_after  # the call in flight is not waited for (0.5 s here; minutes on a CPU)
    eng.dispose_all()


def test_the_line_names_the_step_its_units_and_the_rest():
    steps = Steps(["ingest", "estimate", "chunk", "extract", "embed", "routers", "report"])
    for name in ("ingest", "estimate", "chunk"):
        steps.start(name)
        steps.finish(name)
    steps.start("extract")
    exc = Stopped()
    exc.stage_report = StageReport("extract", pending=13, done=4, failed=1)
    argv = ["/work/clone/cli.py", "--config", "configs/demo.yaml", "demo"]
    assert stop_line(steps, exc, argv) == (
        "stopped by SIGTERM in extract (4 of 13 units done, 1 failed, 8 pending; its time is recorded); "
        "done: ingest, estimate, chunk; still to run: embed, routers, report; "
        "resume with: python cli.py --config configs/demo.yaml demo")
    steps.finish("extract")
    steps.start("routers")
    assert stop_line(steps, KeyboardInterrupt(), ["ragrouter", "run"]) == (
        "stopped by Ctrl-C in routers; done: ingest, estimate, chunk, extract; still to run: embed, report; "
        "resume with: ragrouter run")
    assert resume_command(["cli.py", "--db", "postgresql://u:secret@h/db", "run"]).startswith("python cli.py --db ")
    assert "secret" not in resume_command(["cli.py", "--db", "postgresql://u:secret@h/db", "run"])
