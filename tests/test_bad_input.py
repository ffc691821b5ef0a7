"""One line, exit 2, the store unchanged, for every user mistake (issue #31, items 4 and 5).

Bad settings (out of range, wrong scheme, duplicate YAML keys, environment overrides) are
named with their file and line or their environment variable before any unit starts; file
system errors (a missing, read-only or full folder) are one line; the loaders' last gaps
(lone surrogates in key names, over-long ids, blank corpus names) are one line on DuckDB and
PostgreSQL; a malformed progress file is ignored with a warning; passwords in --db are never
recorded; SIGTERM to mlflow-ui while its server starts leaves no process behind."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_store_cli import REPO, fingerprint, one_line, run_fast, seeded


@pytest.fixture
def duck_store(tmp_path):
    url = f"duckdb:///{tmp_path / 'store.duckdb'}"
    seeded(url)
    return url


# ------------------------------------------------------------------ settings

BAD_CONFIGS = [
    ("backends:\n  local-qwen-0.5b:\n    concurrency: 0\n", "line 3", "backends.local-qwen-0.5b.concurrency", ">= 1"),
    ("backends:\n  openai:\n    timeout_s: -1\n", "line 3", "backends.openai.timeout_s", "> 0"),
    ("backends:\n  vllm:\n    base_url: ftp://10.0.0.5/v1\n", "line 3", "backends.vllm.base_url", "http://"),
    ("backends:\n  vllm:\n    base_url: 'http://'\n", "line 3", "backends.vllm.base_url", "host"),
    ("backends:\n  vllm:\n    base_url: 'http://h:99999/v1'\n", "line 3", "backends.vllm.base_url", "not a URL"),
    ("backends:\n  openai:\n    retries: -2\n", "line 3", "backends.openai.retries", ">= 0"),
    ("backends:\n  openai:\n    requests_per_minute: 0\n", "line 3", "requests_per_minute", "> 0"),
    ("backends:\n  openai:\n    price_per_million: {input: -1, output: 2}\n", "line 3", "price_per_million.input", ">= 0"),
    ("backends:\n  openai:\n    headers: [a]\n", "line 3", "backends.openai.headers", "wrong type"),
    ("worker:\n  batch_size: 5\n  batch_size: 6\n", "line 3", "duplicate key 'batch_size'", "line 2"),
    ("roles:\n  judge: minilm\nroles:\n  extractor: minilm\n", "line 3", "duplicate key 'roles'", "line 1"),
    ("generation:\n  temperature: 3.5\n", "line 2", "generation.temperature", "between 0 and 2"),
    ("worker:\n  lease_seconds: 0\n", "line 2", "worker.lease_seconds", "> 0"),
    ("chunking:\n  window: 100\n  overlap: 100\n", "line 3", "chunking.overlap", "smaller than"),
    ("routers:\n  folds: 1\n", "line 2", "routers.folds", ">= 2"),
]


@pytest.mark.parametrize("text, line, setting, rule", BAD_CONFIGS)
def test_bad_setting_is_one_line_before_any_unit(text, line, setting, rule, duck_store, tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    before = fingerprint(duck_store)
    for args in (["run", "--stage", "chunk"], ["status"]):
        out = run_fast("--config", str(cfg), *args, env={"RAGROUTER_DB": duck_store})
        msg = one_line(out, 2, f"{cfg} {line}", setting, rule)
        assert msg.startswith("error: "), msg
    assert fingerprint(duck_store) == before  # no unit ran, no unit_failures row


@pytest.mark.parametrize("var, value, rule", [
    ("RAGROUTER__backends__local-qwen-0.5b__concurrency", "0", ">= 1"),
    ("RAGROUTER__backends__openai__timeout_s", "-1", "> 0"),
    ("RAGROUTER__backends__vllm__base_url", "ftp://x/v1", "http://"),
    ("RAGROUTER__worker__batch_size", "0", ">= 1"),
    ("RAGROUTER__retrieval__ppr_alpha", "1.5", "> 0 and <= 1"),
    ("RAGROUTER__worker__threads_per_slot", "-3", ">= 1"),
    ("RAGROUTER__judge__gate", "{enabled: true, enabled: false}", "duplicate key 'enabled'"),
])
def test_bad_environment_override_is_blamed_on_its_variable(var, value, rule, duck_store):
    before = fingerprint(duck_store)
    for args in (["status"], ["run", "--stage", "chunk"]):
        out = run_fast(*args, env={"RAGROUTER_DB": duck_store, var: value})
        one_line(out, 2, f"environment {var}", rule)
    assert fingerprint(duck_store) == before


def test_shipped_configs_pass_the_checks():
    from ragrouter.config import Config

    for path in sorted((REPO / "configs").glob("*.yaml")):
        Config.load(path, env={})


# ------------------------------------------------------------------ file system

def test_report_into_a_file_or_an_unwritable_path_is_one_line(duck_store, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    env = {"RAGROUTER_DB": duck_store}
    before = fingerprint(duck_store)
    one_line(run_fast("report", "--out", str(afile / "r"), env=env), 2, "report --out", str(afile), "Not a directory")
    one_line(run_fast("export", "--format", "parquet", str(afile / "e"), env=env), 2, str(afile), "Not a directory")
    one_line(run_fast("sql", "-f", str(tmp_path / "missing.sql"), env=env), 2, "missing.sql")
    out = run_fast("report", "--out", str(tmp_path / "new" / "deeper" / "r"), env=env)  # missing folders are made
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "new" / "deeper" / "r" / "report.md").exists()
    assert fingerprint(duck_store) == before


def _limit_file_size():  # runs in the child: writes past 512 bytes fail with EFBIG instead of a signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))


def test_export_past_the_file_size_limit_is_one_line(duck_store, tmp_path):
    """A file that cannot grow (RLIMIT_FSIZE: the part of a full disk any user can make)."""
    before = fingerprint(duck_store)
    out = subprocess.run([sys.executable, str(REPO / "cli.py"), "--db", duck_store, "export", "--format", "parquet",
                          str(tmp_path / "e")], capture_output=True, text=True, cwd=REPO,
                         preexec_fn=_limit_file_size, timeout=300)
    one_line(out, 2, f"export {tmp_path / 'e'}", "File too large", "free some space")
    assert fingerprint(duck_store) == before


def test_report_into_a_read_only_or_full_folder_is_one_line(duck_store, tmp_path):
    """A read-only bind mount and a 16 KiB tmpfs in a private mount namespace (skipped where
    mount namespaces are not allowed)."""
    import shlex

    before = fingerprint(duck_store)
    ro, full = tmp_path / "ro", tmp_path / "full"
    ro.mkdir()
    full.mkdir()
    mounts = f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && mount -t tmpfs -o size=16k tmpfs {full}"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", mounts], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.strip()[:100]}")
    # one interpreter runs both commands (cli.main in-process), inside the namespace
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); import cli; "
            f"print('rc=%d' % cli.main(['--db', {duck_store!r}, 'report', '--out', '{ro}/r'])); "
            f"print('rc=%d' % cli.main(['--db', {duck_store!r}, 'report', '--out', '{full}/r']))")
    script = f"{mounts} || exit 99; {shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    err = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert [ln for ln in out.stdout.splitlines() if ln.startswith("rc=")] == ["rc=2"] * 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert len(err) == 2, err
    assert f"report --out {ro}/r" in err[0] and "Read-only file system" in err[0]
    assert f"report --out {full}/r" in err[1] and "No space left on device" in err[1] and "free some space" in err[1]
    assert fingerprint(duck_store) == before


# ------------------------------------------------------------------ loaders

@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_loader_gaps_are_one_line_on_both_stores(backend, duck_store, tmp_path, request):
    url = duck_store
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")
        seeded(url)
    env = {"RAGROUTER_DB": url}
    before = fingerprint(url)
    cases = {
        "surrogate_key.jsonl": ('{"id": "d1", "text": "fine", "bad\\ud800key": 1}\n',
                                ["surrogate_key.jsonl", "d1", "unpaired surrogate", "key"]),
        "surrogate_nested_key.jsonl": ('{"id": "d1", "text": "fine", "meta": {"\\udfffx": 1}}\n',
                                       ["surrogate_nested_key.jsonl", "unpaired surrogate", "'meta'"]),
        "surrogate_value.jsonl": ('{"id": "d1", "text": "fine", "extra": ["\\ud800"]}\n',
                                  ["surrogate_value.jsonl", "unpaired surrogate"]),
        "long_id.jsonl": (json.dumps({"id": "x" * 1_000_000, "text": "fine"}) + "\n",
                          ["long_id.jsonl", "1000000 characters", "at most 300"]),
        "long_int_id.jsonl": (json.dumps({"id": "7" * 301, "text": "fine"}) + "\n", ["301 characters"]),
    }
    for name, (text, needles) in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        one_line(run_fast("ingest", "--corpus", "c2", "--format", "jsonl", str(path), env=env), 2, *needles)
        assert fingerprint(url) == before, name
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "d1", "text": "fine"}\n')
    for corpus, needle in (("", "blank"), (" ", "blank"), ("\t", "blank"), (" c ", "leading or trailing"),
                           ("a\x01b", "control characters"), ("n" * 201, "at most 200")):
        one_line(run_fast("ingest", "--corpus", corpus, "--format", "jsonl", str(good), env=env), 2, "--corpus", needle)
        assert fingerprint(url) == before, repr(corpus)
    out = run_fast("ingest", "--corpus", "c2", "--format", "jsonl", str(good), env=env)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------ progress file

@pytest.mark.parametrize("content, problem", [
    ({"pid": 0, "stages": [1, 2]}, "'stages' is not a mapping"),
    ({"pid": 0, "stages": {"answer": 5}}, "stage 'answer'"),
    ([1, 2], "not a JSON object"),
    ("{not json", "unreadable"),
])
def test_malformed_progress_file_is_ignored_with_a_warning(content, problem, tmp_path):
    """A worker holds the DuckDB file; its progress file is malformed: status says the store is
    locked (exit 2) and warns once about the file, instead of an internal error."""
    path = tmp_path / "store.duckdb"
    seeded(f"duckdb:///{path}")
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(path)!r}); "
                               "print('ok', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        if isinstance(content, dict) and content.get("pid") == 0:
            content = {**content, "pid": holder.pid}
        Path(str(path) + ".progress.json").write_text(content if isinstance(content, str) else json.dumps(content))
        out = run_fast("status", env={"RAGROUTER_DB": f"duckdb:///{path}"})
        assert out.returncode == 2, (out.returncode, out.stderr)
        assert "Traceback" not in out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 2, lines
        assert lines[0].startswith("warning: progress file") and problem in lines[0] and "ignored" in lines[0]
        assert lines[1].startswith("error: ") and f"locked by process {holder.pid}" in lines[1]
    finally:
        holder.kill()
        holder.wait()


# ------------------------------------------------------------------ secrets

def test_password_in_db_url_is_never_recorded(pg_url, tmp_path):
    """A password given in --db (the throwaway cluster trusts every connection, so any
    password connects) is not in worker_runs.command, the progress file or any row."""
    from ragrouter.db import engine as eng
    from ragrouter.db import progress

    secret = "s3cr3t-Pa55"
    url = pg_url.replace("postgres@", f"postgres:{secret}@")
    assert secret in url
    seeded(pg_url)
    good = tmp_path / "d.jsonl"
    good.write_text('{"id": "d9", "text": "some words to chunk"}\n')
    for args in (["ingest", "--corpus", "c", "--format", "jsonl", str(good)], ["run", "--stage", "chunk"],
                 ["sql", "select nope"], ["status"]):
        saved = sys.argv
        sys.argv = ["/repo/cli.py", "--db", url, *args]  # what the worker records comes from argv
        try:
            out = run_fast("--db", url, *args)
        finally:
            sys.argv = saved
        assert secret not in out.stdout + out.stderr, args
        assert out.returncode == (2 if args[1:] == ["select nope"] else 0), (args, out.stderr)
    from tests.test_readonly_sql import _pg_dump

    dump = _pg_dump(pg_url)
    assert secret not in dump
    commands = [r[0] for r in eng.make_engine(pg_url).connect().exec_driver_sql(
        "SELECT command FROM worker_runs").all()]
    eng.dispose_all()
    assert commands and all("postgres:***@" in c for c in commands), commands
    # the progress file (DuckDB) records the command line the same way
    db = tmp_path / "p.duckdb"
    seeded(f"duckdb:///{db}")
    engine = eng.make_engine(f"duckdb:///{db}")
    saved = sys.argv
    sys.argv = ["/x/cli.py", "--db", url, "--config", f"postgresql://u:{secret}@h/x?password={secret}", "run"]
    try:
        progress.update(engine, "chunk", pending=1, force=True)
        text = progress.progress_path(db).read_text()
    finally:
        sys.argv = saved
        progress._STATE.clear()
        progress.progress_path(db).unlink(missing_ok=True)
        eng.dispose_all()
    assert secret not in text and "cli.py --db" in json.loads(text)["command"]


# ------------------------------------------------------------------ mlflow-ui

def _children(pid: int) -> list[int]:
    from ragrouter.routers.tracking import _proc_table

    return [p for p, (ppid, _) in _proc_table().items() if ppid == pid]


def test_sigterm_to_mlflow_ui_while_it_starts_leaves_no_process(tmp_path):
    delay = 1.0  # the server process exists; it answers /health only after 10-40 s
    from ragrouter.routers.tracking import group_processes

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAGROUTER__routers__mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "mlflow-ui", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    server = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server is None:
            kids = _children(proc.pid)
            server = kids[0] if kids else None
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        assert server is not None, "the MLflow server never started"
        time.sleep(delay)
        assert proc.poll() is None  # still starting: the UI line is not printed yet
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "MLflow UI at" not in out  # it was stopped while starting
    assert "Traceback" not in err and code in (0, 130), (code, err)
    deadline = time.monotonic() + 10
    while group_processes(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert group_processes(server) == []
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
