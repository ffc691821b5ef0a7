"""The store and command line as users expect (issue #16): read-only readers, a safe `sql`,
guarded migrations, --db checks, exit codes, a typed config. Each bad input: exit code, one
line naming the file/record/setting, no traceback, store unchanged (row counts + content hash)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragrouter.db import migrate

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args: str, env: dict | None = None, cwd: Path = REPO, timeout: int = 120):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=timeout)


def run_fast(*args: str, env: dict | None = None):
    """The CLI in this process (no interpreter start-up): returncode, stdout, stderr."""
    import contextlib
    import io

    sys.path.insert(0, str(REPO))
    import cli as cli_module

    from ragrouter.db import engine as eng

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_module.main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        eng.dispose_all()
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def one_line(out, code: int, *needles: str) -> str:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def fingerprint(url: str) -> tuple[dict, str]:
    """Row counts per table and a hash of every row (the store unchanged = same fingerprint)."""
    from sqlalchemy import text

    from ragrouter.db import engine as eng

    engine = eng.make_engine(url, create=False)
    try:
        with engine.connect() as conn:
            schema = "main" if engine.dialect.name.startswith("duckdb") else "public"
            tables = [r[0] for r in conn.execute(text(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = :s "
                "AND table_type = 'BASE TABLE' ORDER BY table_name"), {"s": schema})]
            counts, digest = {}, hashlib.sha256()
            for t in tables:
                rows = sorted(repr(tuple(r)) for r in conn.execute(text(f'SELECT * FROM "{t}"')))
                counts[t] = len(rows)
                digest.update(t.encode())
                for r in rows:
                    digest.update(r.encode())
    finally:
        eng.dispose_all()
    return counts, digest.hexdigest()


def seeded(url: str) -> None:
    """A migrated store with a few rows (a corpus, a document, a paid call, a failure)."""
    from sqlalchemy import text

    from ragrouter.db import engine as eng
    from ragrouter.db import migrate

    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO corpora (name) VALUES ('c')"))
        cid = conn.execute(text("SELECT id FROM corpora")).scalar_one()
        conn.execute(text("INSERT INTO documents (corpus_id, external_id, title, text, n_tokens) "
                          "VALUES (:c, 'd1', '', 'some text', 2)"), {"c": cid})
        conn.execute(text("INSERT INTO unit_failures (stage, unit_key, error, attempts) "
                          "VALUES ('judge', 'u1', 'boom', 1)"))
    eng.dispose_all()


@pytest.fixture
def duck_store(tmp_path):
    url = f"duckdb:///{tmp_path / 'store.duckdb'}"
    seeded(url)
    return url


# ------------------------------------------------------------------ 1. read-only readers

def test_readers_share_the_file_with_a_read_only_holder(duck_store, tmp_path):
    path = duck_store.split("///", 1)[1]
    holder = subprocess.Popen([sys.executable, "-c",
                               f"import duckdb, time; c = duckdb.connect({path!r}, read_only=True); "
                               "print(c.execute('select count(*) from documents').fetchone()[0], flush=True); "
                               "time.sleep(900)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "1"
        env = {"RAGROUTER_DB": duck_store}
        st = run_cli("status", "--json", env=env)
        assert st.returncode == 0, st.stderr
        assert {s["stage"]: s["failed"] for s in json.loads(st.stdout)["stages"]}["judge"] == 1
        sq = run_cli("sql", "select count(*) as n from documents", "--format", "json", env=env)
        assert sq.returncode == 0, sq.stderr
        assert json.loads(sq.stdout) == [{"n": 1}]
        rep = run_cli("report", "--out", str(tmp_path / "rep"), env=env)
        assert rep.returncode == 0, rep.stderr
        assert (tmp_path / "rep" / "report.md").exists()
        cur = run_cli("db", "current", env=env)
        assert cur.returncode == 0 and f"current: {migrate.head_revision()}" in cur.stdout
        ex = run_cli("export", "--format", "parquet", str(tmp_path / "ex"), env=env)
        assert ex.returncode == 0, ex.stderr
        assert (tmp_path / "ex" / "queries.parquet").exists()
        cmp_ = run_cli("routers", "compare", env=env)  # it reads the store: no lock error
        one_line(cmp_, 2, "no router scores for dataset 'store'")
        # a writer is refused with one line that never says "kill"
        line = one_line(run_cli("sql", "--write", "delete from documents", env=env), 2,
                        f"locked by process {holder.pid}")
        assert "kill" not in line
    finally:
        holder.kill()
        holder.wait()
    assert fingerprint(duck_store)[0]["documents"] == 1


def test_status_shows_a_running_workers_progress(duck_store):
    """A worker holding the file read-write keeps <store>.progress.json; status reads it,
    other readers get one line saying a run is in progress and since when."""
    path = duck_store.split("///", 1)[1]
    worker = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from ragrouter.db import engine as eng, progress\n"
        "e = eng.make_engine(%r); e.connect().close()\n"
        "progress.update(e, 'judge', done=3, failed=1, pending=10, force=True)\n"
        "print('ready', flush=True); time.sleep(900)\n") % (str(REPO), duck_store)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "ready"
        env = {"RAGROUTER_DB": duck_store}
        st = run_cli("status", env=env)
        assert st.returncode == 0, st.stderr
        assert f"a run is in progress on {path}: process {worker.pid}" in st.stdout
        assert "judge" in st.stdout and "10" in st.stdout
        js = json.loads(run_cli("status", "--json", env=env).stdout)["running"]
        judge = js["stages"]["judge"]
        assert js["pid"] == worker.pid and {k: judge[k] for k in ("done", "failed", "pending")} == \
            {"done": 3, "failed": 1, "pending": 10}
        # the ETA at the stage's pace so far: 6 units left after 3 done
        eta = json.loads(run_cli("status", "--json", env=env).stdout)["eta_s"]["judge"]
        assert eta is not None and eta >= 0 and "eta" in st.stdout
        line = one_line(run_cli("sql", "select 1", env=env), 2, "a run is in progress since",
                        js["started_at"])
        assert "kill" not in line
    finally:
        worker.kill()
        worker.wait()
    # the dead worker's file is ignored: status reads the store again
    assert run_cli("status", "--json", env={"RAGROUTER_DB": duck_store}).returncode == 0


def test_progress_file_is_written_by_the_stage_runner(duck_store):
    from ragrouter.db import engine as eng
    from ragrouter.db import progress

    engine = eng.make_engine(duck_store)
    try:
        progress.update(engine, "chunk", done=1, pending=2, force=True)
        data = progress.read(duck_store.split("///", 1)[1])
        assert data["pid"] == os.getpid() and data["stages"]["chunk"]["pending"] == 2
    finally:
        eng.dispose_all()
    runner = (REPO / "ragrouter" / "stages" / "runner.py").read_text()
    assert runner.count("progress_file.update(") == 3


# ------------------------------------------------------------------ 2. sql

@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_sql_is_read_only_unless_write(backend, duck_store, request):
    url = duck_store
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")
        seeded(url)
    env = {"RAGROUTER_DB": url}
    before = fingerprint(url)
    for stmt in ("delete from chunks", "delete from documents", "drop table llm_calls cascade",
                 "insert into corpora (name) values ('x')"):
        one_line(run_fast("sql", stmt, env=env), 2, "SQL error", "--write")
        assert fingerprint(url) == before, stmt
    out = run_fast("sql", "select ':x' as a, 'a%b' as p" + (", {'k': 1} as b" if backend == "duckdb" else ""),
                  "--format", "json", env=env)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)[0]
    assert row["a"] == ":x" and row["p"] == "a%b"
    bad = one_line(run_fast("sql", "selec 1", env=env), 2, "SQL error")
    assert "syntax" in bad.lower()
    ok = run_fast("sql", "--write", "delete from unit_failures", env=env)
    assert ok.returncode == 0, ok.stderr
    assert fingerprint(url)[0]["unit_failures"] == 0


def test_sql_struct_literal_and_colon(duck_store):
    out = run_cli("sql", "select ':x' as a, {'k': 1} as b", "--format", "json", env={"RAGROUTER_DB": duck_store})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"a": ":x", "b": {"k": 1}}]


# ------------------------------------------------------------------ 3. migrations

@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_downgrade_that_loses_rows_needs_yes(backend, duck_store, request):
    url = duck_store
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")
        seeded(url)
    env = {"RAGROUTER_DB": url}
    before = fingerprint(url)
    line = one_line(run_fast("db", "downgrade", "base", env=env), 2, "would drop", "documents (1 row)",
                    "unit_failures (1 row)", "--yes")
    assert "nothing was changed" in line
    assert fingerprint(url) == before
    one_line(run_fast("db", "downgrade", "0099", env=env), 2, "'0099'")
    one_line(run_fast("db", "upgrade", "nope", env=env), 2, "'nope'")
    assert fingerprint(url) == before
    out = run_fast("db", "downgrade", "base", "--yes", env=env)
    assert out.returncode == 0 and "dropped" in out.stdout and "documents (1 rows)" in out.stdout
    assert set(fingerprint(url)[0]) <= {"alembic_version"}


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_unknown_revision_in_store_is_one_line(backend, duck_store, request):
    from sqlalchemy import text

    from ragrouter.db import engine as eng

    url = duck_store if backend == "duckdb" else request.getfixturevalue("pg_url")
    if backend == "postgresql":
        seeded(url)
    engine = eng.make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    eng.dispose_all()
    before = fingerprint(url)
    for args in (["status"], ["db", "current"], ["db", "upgrade"], ["report", "--out", "/tmp/never"],
                 ["sql", "select 1"]):
        one_line(run_fast(*args, env={"RAGROUTER_DB": url}), 2, "revision '9999'", "newer")
    assert fingerprint(url) == before


def test_views_recreated_when_their_sql_differs(duck_store):
    """A store made by an earlier commit at the same revision: a view missing, another stale."""
    from sqlalchemy import text

    from ragrouter.db import engine as eng

    engine = eng.make_engine(duck_store)
    with engine.begin() as conn:
        conn.execute(text("DROP VIEW v_router_scores"))
        conn.execute(text("DROP VIEW v_router_routed"))
        conn.execute(text("UPDATE ragrouter_views SET sql_sha256 = 'old' WHERE name = 'v_quality'"))
        conn.execute(text("DELETE FROM ragrouter_views WHERE name LIKE 'v_router_%'"))
    eng.dispose_all()
    env = {"RAGROUTER_DB": duck_store}
    assert "views: outdated" in run_fast("db", "current", env=env).stdout
    out = run_fast("sql", "select count(*) as n from v_router_scores", "--format", "json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"n": 0}]
    assert "views: current" in run_fast("db", "current", env=env).stdout


def test_store_without_view_bookkeeping_gets_views(duck_store, tmp_path):
    """An earlier commit's store has no ragrouter_views table: report and export still work."""
    from sqlalchemy import text

    from ragrouter.db import engine as eng

    engine = eng.make_engine(duck_store)
    with engine.begin() as conn:
        conn.execute(text("DROP VIEW v_router_scores"))
        conn.execute(text("DROP TABLE ragrouter_views"))
    eng.dispose_all()
    env = {"RAGROUTER_DB": duck_store}
    assert run_fast("report", "--out", str(tmp_path / "r"), env=env).returncode == 0
    ex = run_fast("export", "--format", "parquet", str(tmp_path / "x"), env=env)
    assert ex.returncode == 0, ex.stderr


def test_corrupt_truncated_and_read_only_files(tmp_path, duck_store):
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"not a database" * 1000)
    path = Path(duck_store.split("///", 1)[1])
    truncated = tmp_path / "truncated.duckdb"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 3])
    for f in (garbage, truncated):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        for args in (["status"], ["sql", "select 1"], ["db", "upgrade"], ["db", "current"]):
            one_line(run_fast("--db", f"duckdb:///{f}", *args), 2, str(f), "not a readable DuckDB store")
        assert hashlib.sha256(f.read_bytes()).hexdigest() == digest
    # a read-only file and directory (as on a read-only file system): readers work, writers say why
    ro = tmp_path / "ro"
    ro.mkdir()
    target = ro / "store.duckdb"
    target.write_bytes(path.read_bytes())
    target.chmod(0o444)
    ro.chmod(0o555)
    try:
        if os.access(target, os.W_OK):
            return  # root ignores permissions: test_read_only_file_system covers this with a read-only mount
        env = {"RAGROUTER_DB": f"duckdb:///{target}"}
        assert run_fast("status", env=env).returncode == 0
        sq = run_fast("sql", "select count(*) as n from documents", "--format", "json", env=env)
        assert json.loads(sq.stdout) == [{"n": 1}]
        one_line(run_fast("sql", "--write", "delete from documents", env=env), 2, str(target), "cannot be opened for writing")
    finally:
        ro.chmod(0o755)


# ------------------------------------------------------------------ 4. --db

def test_db_urls(tmp_path):
    missing = tmp_path / "typo.duckdb"
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": "alpha"}) + "\n")
    for args in (["status"], ["sql", "select 1"], ["report"], ["run", "--stage", "chunk"], ["db", "current"],
                 ["ingest", "--corpus", "c", "--format", "jsonl", str(docs)]):
        one_line(run_fast("--db", f"duckdb:///{missing}", *args), 2, str(missing), "does not exist", "db upgrade")
        assert not missing.exists()
    one_line(run_fast("--db", "foo://bar", "status"), 2, "malformed store URL 'foo://bar'")
    one_line(run_fast("--db", "duckdb://x.duckdb", "status"), 2, "three slashes")
    one_line(run_fast("--db", "duckdb:///", "status"), 2, "names no file")
    one_line(run_fast("--db", "duckdb:///:memory:", "db", "upgrade"), 2, "names no file")
    one_line(run_fast("--db", f"duckdb:///{tmp_path}", "status"), 2, "is a directory")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    one_line(run_fast("--db", f"duckdb:///{blocker}/sub/s.duckdb", "db", "upgrade"), 2, "cannot create the directory")
    one_line(run_fast("--db", "postgresql://me@127.0.0.1:1/nodb", "status"), 2, "cannot open store")
    assert run_fast("--db", f"duckdb:///{missing}", "--create", "status").returncode == 0
    assert missing.exists()
    created = tmp_path / "new" / "s.duckdb"
    assert run_fast("--db", f"duckdb:///{created}", "db", "upgrade").returncode == 0 and created.exists()


# ------------------------------------------------------------------ 5. exit codes

def test_exit_codes(duck_store, tmp_path):
    env = {"RAGROUTER_DB": duck_store}
    one_line(run_fast("run", "--limit", "-1", env=env), 2, "--limit")
    one_line(run_fast("run", "--stage", "nope", env=env), 2, "--stage", "chunk")
    one_line(run_fast("run", "--paradigm", "nope", env=env), 2, "--paradigm", "llm_only")
    one_line(run_fast("no-such-command", env=env), 2, "no-such-command")
    help_ = run_fast("run", "--help").stdout
    assert "[chunk|extract|embed" in help_ and "llm_only|naive|graph" in help_
    assert run_cli("--version").stdout.strip().startswith("ragrouter ")
    # internal error: exit 1, one line
    sys.path.insert(0, str(REPO))
    import cli as cli_module

    import click

    @click.command("boom")
    def boom():
        raise ZeroDivisionError("division by zero")

    cli_module.cli.add_command(boom)
    try:
        assert cli_module.main(["boom"]) == 1
    finally:
        cli_module.cli.commands.pop("boom")


def test_run_with_failed_units_exits_3(duck_store, tmp_path):
    """A chunk unit whose document cannot be chunked fails: the run finishes with exit 3."""
    from ragrouter.commands.common import FailedUnits

    assert FailedUnits("x").exit_code == 3
    src = (REPO / "ragrouter" / "commands" / "run.py").read_text()
    assert "raise FailedUnits(" in src and "unit_failures" in src


# ------------------------------------------------------------------ 6. typed config

CONFIG_CASES = [
    ("typo in a backend", "backends:\n  openai:\n    concurency: 3\n", {}, "line 3",
     "unknown setting 'backends.openai.concurency' (did you mean concurrency?)"),
    ("typo in a section", "retrieval:\n  token_budget: 10\n  topk: 5\n", {}, "line 3",
     "unknown setting 'retrieval.topk' (did you mean top_k?)"),
    ("unknown section", "retreival:\n  top_k: 5\n", {}, "line 1", "unknown setting 'retreival' (did you mean retrieval?)"),
    ("wrong type", "\n\nretrieval:\n  top_k: ten\n", {}, "line 4", "'retrieval.top_k' has the wrong type"),
    ("float for int", "chunking:\n  window: 1.5\n", {}, "line 2", "'chunking.window'"),
    ("bool for number", "judge:\n  temperature: yes\n", {}, "line 2", "'judge.temperature' has the wrong type"),
    ("env typo", "", {"RAGROUTER__retrieval__topk": "3"}, "environment RAGROUTER__retrieval__topk",
     "did you mean top_k?"),
    ("env wrong type", "", {"RAGROUTER__worker__batch_size": "many"}, "environment RAGROUTER__worker__batch_size",
     "'worker.batch_size'"),
    ("env overrides a file value", "worker:\n  batch_size: 5\n", {"RAGROUTER__worker__batch_size": "[1]"},
     "environment RAGROUTER__worker__batch_size", "wrong type"),
    ("env unknown section", "", {"RAGROUTER__retreival__top_k": "3"}, "environment RAGROUTER__retreival__top_k",
     "unknown setting 'retreival' (did you mean retrieval?)"),  # was blamed on configs/default.yaml
]


@pytest.mark.parametrize("name,yaml_text,env,where,needle", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_config_errors_name_where(tmp_path, duck_store, name, yaml_text, env, where, needle):
    cfg = tmp_path / "user.yaml"
    cfg.write_text(yaml_text)
    before = fingerprint(duck_store)
    expect_file = str(cfg) if where.startswith("line") else ""
    line = one_line(run_fast("--config", str(cfg), "--db", duck_store, "status", env=env), 2, where, needle)
    if expect_file:
        assert f"{cfg} {where}" in line
    assert fingerprint(duck_store) == before


def test_config_accepts_what_the_code_reads():
    from ragrouter.config import Config

    cfg = Config.load(REPO / "configs" / "demo.yaml", env={
        "RAGROUTER__roles__generators": "[deepseek, vllm]",
        "RAGROUTER__backends__mine__kind": "openai", "RAGROUTER__backends__mine__model": "m",
        "RAGROUTER__backends__mine__base_url": "http://127.0.0.1:1/v1",
        "RAGROUTER__backends__mine__requests_per_minute": "60",
        "RAGROUTER__backends__mine__price_per_million": "{input: 0.1, output: 0.2}",
        "RAGROUTER__querygen__reasoning_hops": "{2: 0.3, 4: 0.7}"})
    assert cfg.generators() == ["deepseek", "vllm"]
    assert cfg.where("retrieval.top_k").endswith("demo.yaml line 32") or "demo.yaml line" in cfg.where("retrieval.top_k")
    assert cfg.where("backends.mine.model") == "environment RAGROUTER__backends__mine__model"
    assert cfg.get("paradigms.llm_only.max_tokens") == 150
    assert Config.load(None, env={}).get("paradigms.llm_only.max_tokens", 7) == 7  # null = the code's default


def test_dry_run_reads_beside_a_read_only_holder(tmp_path):
    """run --dry-run only reads: it works while a notebook holds the file read-only, and writes
    nothing (no worker_runs row)."""
    url = f"duckdb:///{tmp_path / 's.duckdb'}"
    docs = tmp_path / "c.jsonl"
    docs.write_text(json.dumps({"id": "d1", "title": "T", "text": "Alpha beta gamma. Delta epsilon."}) + "\n")
    assert run_fast("--db", url, "db", "upgrade").returncode == 0
    assert run_fast("--db", url, "ingest", "--corpus", "c", "--format", "jsonl", str(docs)).returncode == 0
    assert run_fast("--db", url, "run", "--stage", "chunk", "--quiet").returncode == 0
    before = fingerprint(url)
    path = url.split("///", 1)[1]
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({path!r}, read_only=True); "
                               "print('ready', flush=True); time.sleep(900)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        out = run_cli("--db", url, "run", "--stage", "extract", "--dry-run")
        assert out.returncode == 0, out.stderr
        assert "extract" in out.stdout and "to_call" in out.stdout
    finally:
        holder.kill()
        holder.wait()
    assert fingerprint(url) == before


def test_read_only_file_system(duck_store, tmp_path):
    """The store on a read-only mount (a private mount namespace, `unshare -m`): readers work,
    writers get one line; skipped where mount namespaces are not allowed."""
    import shlex
    import shutil

    ro = tmp_path / "rofs"
    ro.mkdir()
    shutil.copy(duck_store.split("///", 1)[1], ro / "s.duckdb")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.strip()[:100]}")
    cli = f"{shlex.quote(sys.executable)} {shlex.quote(str(REPO / 'cli.py'))} --db duckdb:///{ro}/s.duckdb"
    script = (f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} || exit 99; "
              f"{cli} sql 'select count(*) as n from documents' --format json; echo rc=$?; "
              f"{cli} status --json > /dev/null; echo rc=$?; "
              f"{cli} sql --write 'delete from documents' 2>&1; echo rc=$?; "
              f"{cli} db upgrade 2>&1; echo rc=$?")
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == '[{"n": 1}]' and lines[1] == "rc=0" and lines[2] == "rc=0", out.stdout + out.stderr
    for i in (3, 5):
        assert "cannot be opened for writing (Read-only file system)" in lines[i] and str(ro) in lines[i], lines
        assert lines[i + 1] == "rc=2"
    assert "Traceback" not in out.stdout + out.stderr
    assert fingerprint(f"duckdb:///{ro / 's.duckdb'}") == fingerprint(duck_store)


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_status_leaves_a_downgraded_store_at_its_revision(backend, duck_store, request):
    """`db downgrade` on purpose, then a plain `status` or read-only `sql`: it says the revision the store is at and
    that `db upgrade` brings it to head (one line, exit 2); it migrates nothing (it used to
    upgrade the store back to head silently)."""
    url = duck_store
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")
        seeded(url)
    env = {"RAGROUTER_DB": url}
    head, below = migrate.head_revision(), migrate.known_revisions()[1]
    out = run_fast("db", "downgrade", below, "--yes", env=env)
    assert out.returncode == 0 and f"store at revision {below}" in out.stdout, out.stderr
    before = fingerprint(url)
    for args in (["status"], ["status", "--json"], ["status", "--corpus", "c"], ["sql", "select 1 as one"]):
        line = one_line(run_fast(*args, env=env), 2, f"revision {below}", f"head {head}", "'db upgrade'")
        assert "does not migrate" in line, line
        assert fingerprint(url) == before, args
        assert f"current: {below} " in run_fast("db", "current", env=env).stdout, args
    assert run_fast("db", "upgrade", env=env).returncode == 0
    out = run_fast("status", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert {s["stage"]: s["failed"] for s in json.loads(out.stdout)["stages"]}["judge"] == 1
