"""The store going away under a running worker (issue 31, item 1), on a throwaway PostgreSQL
cluster of this module's own (it is stopped and started again) and the scripted fake endpoint:

* PostgreSQL stopped for ~2 s in the middle of a ``cli.py run --stage answer``: the worker
  says one line, finishes, sends no request twice, and its store equals the store of an
  uninterrupted run;
* stopped for longer than ``worker.store_outage_s``: exit 2 and one line saying what was kept
  and how to resume; the paid replies are in the spool, the next run writes them to the ledger,
  pays none of them again, starts at once (the dead worker's leases are free) and ends with
  the store of an uninterrupted run;
* a ``kill -9``'d worker's leases are taken over at once by an immediate re-run; a worker that
  waits for a live worker's leases says for what and until when;
* DuckDB errors are never taken for a lost connection.

The outage is triggered by the fake endpoint itself, from inside the n-th chat request and
before its reply: that reply, and those in flight with it, arrive while the store is away.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from sqlalchemy import text

from ragrouter.db import engine as eng
from ragrouter.db import migrate, outage
from tests.fake_openai import FakeOpenAI
from tests.test_stages_answer import fake_config, ingest, responder, run

REPO = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def pg():
    """A cluster of this module's own: the tests stop and start it."""
    from ragrouter.db.pgtemp import TempPostgres

    cluster = TempPostgres().start()
    yield cluster
    cluster.stop()


def _admin(pg, sql: str) -> None:
    import psycopg

    with psycopg.connect(f"host=127.0.0.1 port={pg.port} user={pg.user} dbname=postgres", autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture(scope="module")
def srv():
    with FakeOpenAI(responder=responder, embedding_dim=32) as server:
        yield server


@pytest.fixture(scope="module")
def prepared(pg, srv, tmp_path_factory):
    """A PostgreSQL database chunked, extracted and embedded (a template for each test's
    stores), the fake endpoint's config file, and the answer stage's requests of an
    uninterrupted run (a Counter of request bodies)."""
    work = tmp_path_factory.mktemp("outage")
    cfg = fake_config(srv, work)
    _admin(pg, 'CREATE DATABASE "prep"')
    engine = eng.make_engine(pg.url("prep"))
    migrate.upgrade(engine)
    ingest(engine)
    run(engine, cfg, "chunk", "extract", "embed")
    eng.dispose_all()
    _copy(pg, "calm")
    srv.latency_s = 0.05
    before = len(srv.requests)
    p = _worker(pg.url("calm"), work / "cfg.yaml", work)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    calm = _bodies(srv.requests[before:])
    assert sum(calm.values()) > 30 and set(calm.values()) == {1}
    chats = sum(1 for r in srv.requests[before:] if r["path"].endswith("/chat/completions"))
    snap = _snapshot(pg.url("calm"))
    assert snap["answer_calls"] == sum(calm.values()) and snap["ledger"] == snap["ledger_distinct"]
    return {"work": work, "calm": calm, "at": chats // 3, "snapshot": snap}


def _copy(pg, name: str) -> str:
    _admin(pg, f'CREATE DATABASE "{name}" TEMPLATE "prep"')
    return pg.url(name)


def _config(prepared, name: str, **worker) -> Path:
    """The fake endpoint's config with ``worker`` settings changed."""
    data = yaml.safe_load((prepared["work"] / "cfg.yaml").read_text())
    data["worker"].update(worker)
    path = prepared["work"] / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _worker(url: str, cfg: Path, work: Path, stderr=subprocess.PIPE) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1",
           "RAGROUTER_SPOOL_DIR": str(work / "spool")}
    return subprocess.Popen([sys.executable, "cli.py", "--db", url, "--config", str(cfg), "run", "--stage", "answer",
                             "--corpus", "toy", "--quiet"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=stderr, text=True)


def _bodies(requests: list[dict]) -> collections.Counter:
    """How often each distinct request (its JSON body) reached the endpoint; a body cut off by a
    kill is not a request (the endpoint answered it 400: nothing billed)."""
    return collections.Counter(json.dumps(r["body"], sort_keys=True) for r in requests
                               if r["method"] == "POST" and r["body"] is not None)


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def _snapshot(url: str) -> dict:
    """The answer stage's rows on natural keys (no ids, no timings) and the ledger's health."""
    engine = eng.make_engine(url)
    try:
        with engine.connect() as conn:
            def q(sql):
                return [tuple(r) for r in conn.execute(text(sql)).all()]

            runs = q("SELECT r.id, q.external_id, r.paradigm, r.generator, r.config_hash, r.answer, "
                     "CAST(r.retrieved_chunk_ids AS text), r.context_tokens, r.iterations, r.ret_in_tokens, "
                     "r.ret_out_tokens, r.gen_in_tokens, r.gen_out_tokens FROM paradigm_runs r "
                     "JOIN queries q ON q.id = r.query_id")
            per_run = collections.defaultdict(list)
            for run_id, seq, phase, h in q("SELECT rc.run_id, rc.seq, rc.phase, c.request_hash FROM run_calls rc "
                                           "JOIN llm_calls c ON c.id = rc.llm_call_id"):
                per_run[run_id].append((seq, phase, h))
            ledger = q("SELECT COUNT(*), COUNT(DISTINCT request_hash) FROM llm_calls")[0]
            return {
                "runs": sorted((r[1:5], r[5:], tuple(sorted(per_run[r[0]]))) for r in runs),
                "ledger": ledger[0], "ledger_distinct": ledger[1],
                "answer_calls": q("SELECT COUNT(*) FROM llm_calls WHERE stage = 'answer'")[0][0],
                "failures": q("SELECT COUNT(*) FROM unit_failures")[0][0],
                "leases": q("SELECT state, COUNT(*) FROM work_leases GROUP BY state ORDER BY state"),
            }
    finally:
        eng.dispose_all()


class Outage:
    """A responder that stops PostgreSQL inside the ``at``-th chat request, before its reply,
    and starts it again ``down_s`` later (never, with None)."""

    def __init__(self, pg, at: int, down_s: float | None) -> None:
        self.pg, self.at, self.down_s = pg, at, down_s
        self.seen = 0
        self.lock = threading.Lock()
        self.stopped_at = self.started_at = None
        self.timer = None

    def __call__(self, req: dict):
        with self.lock:
            self.seen += 1
            fire = self.seen == self.at
        if fire:
            self.pg.server_stop()
            self.stopped_at = time.monotonic()
            if self.down_s is not None:
                self.timer = threading.Timer(self.down_s, self._start)
                self.timer.start()
        return responder(req)

    def _start(self) -> None:
        self.pg.server_start()
        self.started_at = time.monotonic()


@pytest.fixture
def restoring(pg, srv):
    """The endpoint's plain responder and a running server after the test, whatever happened."""
    yield
    srv.responder = responder
    if not pg.server_running():
        pg.server_start()


# ------------------------------------------------------------------------------ outages mid-run


def test_a_short_outage_mid_run_is_ridden_out_with_one_line_and_nothing_paid_twice(pg, srv, prepared,
                                                                                    restoring):
    url = _copy(pg, "short")
    calm = prepared["calm"]
    trigger = Outage(pg, at=prepared["at"], down_s=2.0)
    srv.responder = trigger
    before = len(srv.requests)
    t0 = time.monotonic()
    p = _worker(url, prepared["work"] / "cfg.yaml", prepared["work"])
    out, err = p.communicate(timeout=300)
    wall = time.monotonic() - t0
    assert trigger.timer is not None, "the outage did not happen mid-run"
    trigger.timer.join()
    assert p.returncode == 0, err[-3000:]
    lines = _lines(err)
    assert len(lines) == 1, lines
    m = re.fullmatch(r"warning: the store was unreachable for (\d+\.\d) s; reconnected, nothing was lost", lines[0])
    assert m and 1.0 <= float(m.group(1)) <= wall, lines
    assert "answer: 30 done, 0 failed of 30 pending" in out, out

    sent = _bodies(srv.requests[before:])
    assert sent == calm, "a request was sent twice or not at all"  # the same requests, each once
    snap = _snapshot(url)
    # ledger rows = distinct request hashes; the endpoint's request count = the run's ledger rows
    assert snap["ledger"] == snap["ledger_distinct"] == prepared["snapshot"]["ledger"]
    assert snap["answer_calls"] == sum(sent.values())
    assert snap == prepared["snapshot"]
    print(f"short outage: {lines[0]!r}; {sum(sent.values())} requests, each once; worker {wall:.1f} s")

    srv.responder = responder  # a re-run has nothing to do and pays nothing
    before = len(srv.requests)
    p = _worker(url, prepared["work"] / "cfg.yaml", prepared["work"])
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and len(srv.requests) == before, err[-3000:]
    assert "answer: 0 done, 0 failed of 0 pending" in out, out


def test_an_outage_past_the_limit_exits_2_keeps_the_paid_replies_and_the_next_run_pays_none_again(
        pg, srv, prepared, restoring):
    url = _copy(pg, "long")
    work = prepared["work"]
    cfg = _config(prepared, "limit3", store_outage_s=3)  # lease_seconds stays 600
    spool = work / "spool"
    srv.responder = Outage(pg, at=prepared["at"], down_s=None)
    before = len(srv.requests)
    t0 = time.monotonic()
    p = _worker(url, cfg, work)
    out, err = p.communicate(timeout=120)
    first_wall = time.monotonic() - t0
    first = _bodies(srv.requests[before:])
    assert p.returncode == 2, err[-3000:]
    lines = _lines(err)
    assert len(lines) == 1 and "Traceback" not in err, lines
    m = re.fullmatch(r"error: the store stayed unreachable for (\d+) s while .+; (\d+) paid repl(?:y|ies) kept in "
                     r"(\S+\.jsonl): they are written to the ledger when the next run on this store starts on this "
                     r"machine — run the same command again to resume", lines[0])
    assert m, lines[0]
    assert 3 <= int(m.group(1)) <= first_wall
    kept = int(m.group(2))
    path = Path(m.group(3))
    assert path.parent.parent == spool and path.exists()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == kept >= 1  # at least the reply of the request the store went away in
    assert all(r["table"] == "call" and r["row"]["stage"] == "answer" for r in rows)
    assert first_wall < 60, f"the worker took {first_wall:.0f} s to give up after a 3 s limit"

    srv.responder = responder
    pg.server_start()
    before = len(srv.requests)
    t0 = time.monotonic()
    p = _worker(url, cfg, work)
    out, err = p.communicate(timeout=300)
    second_wall = time.monotonic() - t0
    assert p.returncode == 0, err[-3000:]
    assert "answer: " in out and " 0 failed" in out, out
    assert f"ledger: {kept} row(s) kept in {path} during an earlier outage of the store are in the ledger now" \
        in err, err
    assert "waiting for" not in err, err  # the first worker's leases were free at once
    assert second_wall < 60, f"{second_wall:.0f} s: the re-run waited for the dead worker's leases (600 s)"
    second = _bodies(srv.requests[before:])
    assert first + second == prepared["calm"], "a paid reply was paid again, or a request was never sent"
    assert not any(spool.rglob("*.jsonl")), "the spool was not emptied"
    snap = _snapshot(url)
    assert snap["answer_calls"] == sum((first + second).values()) and snap["ledger"] == snap["ledger_distinct"]
    assert snap == prepared["snapshot"]
    print(f"long outage: exit 2 after {first_wall:.1f} s, {kept} paid replies spooled and replayed; "
          f"{sum(first.values())} + {sum(second.values())} requests = the calm run's {sum(prepared['calm'].values())}; "
          f"re-run {second_wall:.1f} s; the line: {lines[0]!r}")


def test_an_immediate_rerun_after_kill_9_takes_the_dead_workers_leases_at_once(pg, srv, prepared, restoring):
    url = _copy(pg, "killed")
    work = prepared["work"]
    before = len(srv.requests)
    p = _worker(url, work / "cfg.yaml", work)  # leases of 600 s
    deadline = time.monotonic() + 120
    while len(srv.requests) - before < sum(prepared["calm"].values()) // 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert p.poll() is None, "the worker ended before it could be killed"
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    engine = eng.make_engine(url)
    with engine.connect() as conn:
        leased = conn.execute(text("SELECT COUNT(*) FROM work_leases WHERE state = 'leased'")).scalar()
    eng.dispose_all()
    assert leased > 0, "the killed worker held no lease: the test proves nothing"
    t0 = time.monotonic()
    p = _worker(url, work / "cfg.yaml", work)
    out, err = p.communicate(timeout=300)
    wall = time.monotonic() - t0
    assert p.returncode == 0, err[-3000:]
    assert wall < 60 and "waiting for" not in err, (wall, err)
    sent = _bodies(srv.requests[before:])
    assert set(sent) == set(prepared["calm"])
    # paid twice: what the killed worker had in flight or had received but not committed, at
    # most one request per unit thread (concurrency 4 x worker.threads_per_slot 4)
    assert sum(sent.values()) - len(sent) <= 4 * 4, sent.most_common(3)
    assert _snapshot(url) == prepared["snapshot"]
    print(f"kill -9 with {leased} units leased for 600 s: re-run {wall:.1f} s, "
          f"{sum(sent.values()) - len(sent)} requests paid twice")


def test_a_worker_waiting_for_live_leases_says_for_what_and_until_when(pg, tmp_path, capsys):
    """Worker A (another process) holds every unit; worker B says once what it waits for and
    until when at the latest, and ends when A's units are done."""
    import datetime as dt

    from ragrouter.config import Config
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services
    from tests.support.touch_stage import TouchStage

    _admin(pg, 'CREATE DATABASE "waits"')
    url = pg.url("waits")
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        cid = conn.execute(text("INSERT INTO corpora (name) VALUES ('touch') RETURNING id")).scalar()
    a = subprocess.Popen([sys.executable, "-m", "tests.support.touch_stage", url, "4", str(cid), str(tmp_path), "3",
                          "30"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    leased = 0
    while leased < 4 and time.monotonic() < deadline and a.poll() is None:
        with engine.connect() as conn:
            leased = conn.execute(text("SELECT COUNT(*) FROM work_leases WHERE state = 'leased'")).scalar()
        time.sleep(0.05)
    assert leased == 4, a.communicate()[1][-2000:]
    cfg = Config.load(env={"RAGROUTER__worker__lease_seconds": "30"})
    now = dt.datetime.now(dt.timezone.utc)
    capsys.readouterr()
    rep = run_stage(TouchStage(4, cid, str(tmp_path)), Services(cfg, engine, command="touch"), Scope(config=cfg),
                    workers=4, progress=False)
    err = capsys.readouterr().err
    a_out, a_err = a.communicate(timeout=60)
    eng.dispose_all()
    assert a.returncode == 0, a_err[-2000:]
    assert (rep.done, rep.failed) == (0, 0) and "done=4" in a_out
    lines = _lines(err)
    assert len(lines) == 1, lines
    m = re.fullmatch(r"waiting for 4 unit\(s\) of stage touch leased by 1 other live worker\(s\) \((\S+)\) "
                     r"until (\d\d:\d\d:\d\d) UTC at the latest", lines[0])
    assert m and f":{a.pid}:" in m.group(1), lines
    until = dt.datetime.combine(now.date(), dt.time.fromisoformat(m.group(2)), dt.timezone.utc)
    if until < now - dt.timedelta(hours=1):
        until += dt.timedelta(days=1)  # past midnight
    assert now <= until + dt.timedelta(seconds=1) <= now + dt.timedelta(seconds=31 + 60), (now, until)


# ------------------------------------------------------------------------------ what counts as an outage


@pytest.fixture
def fresh_state():
    outage.STATE.reset()
    yield outage.STATE
    outage.STATE.reset()


def _wrapped(orig: BaseException, invalidated: bool = False):
    from sqlalchemy.exc import DBAPIError

    return DBAPIError.instance("SELECT 1", {}, orig, Exception, connection_invalidated=invalidated)


def test_duckdb_errors_are_never_an_outage(tmp_path, fresh_state):
    import duckdb

    closed = duckdb.connect(str(tmp_path / "x.duckdb"))
    closed.close()
    live = duckdb.connect(str(tmp_path / "x.duckdb"))
    real = []
    for act in (lambda: closed.execute("SELECT 1"),  # a closed connection: ConnectionException
                lambda: live.execute("SELECT * FROM nowhere")):  # CatalogException
        try:
            act()
        except duckdb.Error as exc:
            real.append(exc)
    live.close()
    assert len(real) == 2
    made = [duckdb.IOException("IO Error: Could not set lock on file: Conflicting lock is held (PID 1)"),
            duckdb.ConnectionException("Connection Error: Connection already closed!"),
            duckdb.OperationalError("server closed the connection unexpectedly")]
    for exc in real + made:
        assert not outage.is_disconnect(exc), exc
        assert not outage.is_disconnect(_wrapped(exc, invalidated=True)), exc
    # through a DuckDB engine: raised at once, never waited for
    engine = eng.make_engine(f"duckdb:///{tmp_path / 'y.duckdb'}")
    calls = []

    def bad():
        calls.append(1)
        with engine.connect() as conn:
            conn.execute(text("SELECT * FROM nowhere"))

    with pytest.raises(Exception) as info:
        outage.retry(bad, "reading", 5.0)
    assert len(calls) == 1 and not outage.is_disconnect(info.value)
    eng.dispose_all()


def test_lost_postgres_connections_are_an_outage_and_bad_statements_are_not(fresh_state):
    import psycopg
    from psycopg import errors

    refused = None
    try:
        psycopg.connect("host=127.0.0.1 port=9 user=x dbname=x connect_timeout=2")
    except psycopg.OperationalError as exc:
        refused = exc
    assert refused is not None
    lost = [refused, psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"),
            errors.AdminShutdown("terminating connection due to administrator command"),
            errors.CannotConnectNow("the database system is starting up"),
            psycopg.OperationalError("the connection is closed"),
            # what a server that shuts down, restarts or recovers says (no SQLSTATE on a refused connection)
            psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port 5432 failed: '
                                     "FATAL:  the database system is shutting down"),
            psycopg.OperationalError("terminating connection due to administrator command"),
            psycopg.OperationalError("server closed the connection unexpectedly\n\tThis probably means the server "
                                     "terminated abnormally"),
            psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port 5432 failed: '
                                     "FATAL:  the database system is not yet accepting connections"),
            psycopg.OperationalError("FATAL:  the database system is in recovery mode"),
            psycopg.OperationalError("could not send data to server: Broken pipe"),
            psycopg.OperationalError("SSL SYSCALL error: EOF detected"),
            errors.ConnectionTimeout("connection timeout expired")]
    for exc in lost:
        assert outage.is_disconnect(exc) and outage.is_disconnect(_wrapped(exc)), exc
    for exc in (errors.UniqueViolation("duplicate key"), errors.DeadlockDetected("deadlock detected"),
                errors.SyntaxError("syntax error"), psycopg.OperationalError("out of memory"),
                errors.QueryCanceled("canceling statement due to statement timeout"), ValueError("x"),
                # a server that answers and refuses for good: never waited for (a mistyped database or password)
                psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port 5432 failed: '
                                         'FATAL:  database "nodb" does not exist'),
                psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port 5432 failed: '
                                         'FATAL:  password authentication failed for user "me"')):
        assert not outage.is_disconnect(exc) and not outage.is_disconnect(_wrapped(exc)), exc


def test_retry_waits_out_a_lost_connection_once_then_gives_up_past_the_limit(fresh_state, capsys):
    import psycopg

    gone = psycopg.OperationalError("server closed the connection unexpectedly")
    tries = []

    def flaky():
        tries.append(1)
        if len(tries) < 3:
            raise gone
        return "ok"

    assert outage.retry(flaky, "writing", 10.0, sleep=lambda s: None) == "ok" and len(tries) == 3
    err = capsys.readouterr().err
    assert re.fullmatch(r"warning: the store was unreachable for \d+\.\d s; reconnected, nothing was lost\n", err)

    def down():
        raise gone

    t0 = time.monotonic()
    with pytest.raises(outage.StoreUnavailable, match=r"stayed unreachable for \d+ s while writing the ledger"):
        outage.retry(down, "writing the ledger", 0.3)
    assert time.monotonic() - t0 < 2
    tries.clear()
    with pytest.raises(outage.StoreUnavailable):  # another statement gave up: this one does at once
        outage.retry(lambda: (tries.append(1), down()), "claiming", 30.0)
    assert len(tries) == 1
    assert outage.retry(lambda: "back", "claiming", 30.0) == "back"  # a statement that goes through ...
    tries.clear()
    assert outage.retry(flaky, "writing", 10.0, sleep=lambda s: None) == "ok" and len(tries) == 3  # ... ends it
    assert capsys.readouterr().err.count("warning:") == 1  # the given-up outage said nothing


def test_store_outage_s_is_range_checked_with_the_rest_of_the_config():
    from ragrouter.config import Config, ConfigError

    with pytest.raises(ConfigError, match=r"environment RAGROUTER__worker__store_outage_s.*>= 0"):
        Config.load(env={"RAGROUTER__worker__store_outage_s": "-1"})
    assert Config.load(env={}).get("worker.store_outage_s") == 60


def test_the_spool_is_replayed_once_without_doubling_and_a_refused_row_is_set_aside(store, tmp_path, monkeypatch,
                                                                                      caplog):
    """DuckDB, in process: two paid replies spooled (one still in the ledger, one not) and a row
    the store refuses; the next gateway writes what is missing, doubles nothing, sets the bad
    row aside in ``.rejected`` and empties the spool."""
    from sqlalchemy import delete, select

    from ragrouter.config import Config
    from ragrouter.db.models import LLMCall
    from ragrouter.llm import spool
    from ragrouter.llm.gateway import Gateway

    monkeypatch.setenv("RAGROUTER_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("RAGROUTER_SPOOL_KEY", "k")
    with FakeOpenAI() as fake:
        spec = {"kind": "openai", "base_url": fake.base_url, "model": "m", "api_key_env": "RAGROUTER_SPOOL_KEY",
                "concurrency": 2, "timeout_s": 10, "retries": 0}
        cfg = Config({"backends": {"b": spec}, "roles": {"generators": ["b"]}}, source="spool")
        with Gateway(cfg, store) as gw:
            for i in range(2):
                gw.chat("b", [{"role": "user", "content": f"q{i}"}], temperature=0.0, max_tokens=5, stage="answer",
                        phase="generation")
        with eng.write_lock(store), store.begin() as conn:
            rows = [dict(r._mapping) for r in conn.execute(select(LLMCall.__table__).order_by(LLMCall.id))]
            conn.execute(delete(LLMCall).where(LLMCall.id == rows[1]["id"]))  # lost with the outage
        for r in rows:
            r.pop("created_at", None)
        path = spool.keep(store, [("call", rows[0]), ("call", rows[1]), ("failure", {"no_such_column": 1})])
        assert path.stat().st_mode & 0o077 == 0  # prompts and replies: the owner's only
        with caplog.at_level("WARNING", logger="ragrouter.llm.gateway"), Gateway(cfg, store) as gw:
            again = gw.chat("b", [{"role": "user", "content": "q1"}], temperature=0.0, max_tokens=5, stage="answer",
                            phase="generation")
        assert again.cached and fake.stats()["total"] == 2  # the replayed reply was not paid again
    with eng.write_lock(store), store.connect() as conn:
        hashes = conn.execute(select(LLMCall.request_hash).order_by(LLMCall.request_hash)).scalars().all()
    assert hashes == sorted(r["request_hash"] for r in rows)
    assert not path.exists() and not list(path.parent.glob("*.jsonl"))
    rejected = path.with_name(path.name + ".rejected")
    assert [json.loads(x)["row"] for x in rejected.read_text().splitlines()] == [{"no_such_column": 1}]
    assert "2 row(s) kept in" in caplog.text and "refused by the store" in caplog.text


def test_postgres_engines_time_out_connecting_and_keep_the_session_alive(pg_url):
    """A blackholed store: connecting gives up after 10 s and TCP keepalives find a dead peer
    (libpq parameters on every PostgreSQL engine); a URL's own parameter wins."""
    from ragrouter.db import engine as eng

    engine = eng.make_engine(pg_url)
    try:
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            params = raw.info.get_parameters()
            assert params["connect_timeout"] == "10" and params["keepalives_idle"] == "30", params
            assert params["keepalives"] == "1" and params["keepalives_count"] == "3"
    finally:
        eng.dispose_all()
    mine = eng.make_engine(pg_url + ("&" if "?" in pg_url else "?") + "connect_timeout=30")
    try:
        with mine.connect() as conn:
            assert conn.connection.dbapi_connection.info.get_parameters()["connect_timeout"] == "30"
    finally:
        eng.dispose_all()



class _OutageStartingAWorker(Outage):
    """An Outage that starts a second worker (``start(stderr_file)``) just before it shuts
    PostgreSQL down: that worker opens its store while the server shuts down and is away. The
    server comes back ``down_s`` after the stop, but not before the second worker has said that
    it waits for the store (at most 60 s): on a busy machine its Python took over 3 s to start
    and found the server back up, which tested nothing."""

    def __init__(self, pg, at: int, down_s: float, start, stderr_path: Path) -> None:
        super().__init__(pg, at, down_s)
        self.start, self.second, self.stderr_path = start, None, stderr_path

    def __call__(self, req: dict):
        with self.lock:
            fire = self.seen + 1 == self.at
        if fire:
            self.second = self.start(open(self.stderr_path, "w"))
        return super().__call__(req)

    def _start(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "cannot reach the store" not in self.stderr_path.read_text():
            time.sleep(0.1)
        super()._start()


def test_two_workers_wait_out_a_server_shutdown_and_restart(pg, srv, prepared, restoring):
    """Two workers on one store; PostgreSQL shut down ("fast": sessions ended by an
    administrator command, connections refused while it shuts down and once it is down) in the
    middle of the first one's run, the second started just then, and the server started again
    3 s later (not before the second has said it waits): each waits for the store
    (worker.store_outage_s) and finishes with exit 0 — the second one quit at once ("cannot open store ...: Connection refused") — and the store is
    that of an uninterrupted run."""
    url = _copy(pg, "two")
    cfg, work = prepared["work"] / "cfg.yaml", prepared["work"]
    trigger = _OutageStartingAWorker(pg, at=prepared["at"], down_s=3.0, start=lambda err: _worker(url, cfg, work, err),
                                     stderr_path=work / "second.err")
    srv.responder = trigger
    before = len(srv.requests)
    first = _worker(url, cfg, work)
    out1, err1 = first.communicate(timeout=300)
    assert trigger.second is not None, "the outage did not happen mid-run"
    out2, _ = trigger.second.communicate(timeout=300)
    trigger.timer.join()
    err2 = (work / "second.err").read_text()
    assert first.returncode == 0, err1[-3000:]
    assert trigger.second.returncode == 0, err2[-3000:]
    assert "Traceback" not in err1 + err2
    assert any(re.fullmatch(r"warning: the store was unreachable for \d+\.\d s; reconnected, nothing was lost", line)
               for line in _lines(err1)), err1
    waited = _lines(err2)
    assert re.fullmatch(r"warning: cannot reach the store \(.+\); waiting up to 60 s for it \(worker.store_outage_s\)",
                        waited[0]), waited
    assert any("reconnected, nothing was lost" in line for line in waited), waited
    assert set(_bodies(srv.requests[before:])) == set(prepared["calm"])
    assert _snapshot(url) == prepared["snapshot"]
    print(f"two workers: the second one's lines {waited!r}")


def test_a_stage_started_while_the_store_is_away_waits_for_it(pg, tmp_path, fresh_state, capsys):
    """In process: PostgreSQL stopped before a stage starts and started 2 s later; reading the
    pending units, recording the worker's run and the rest wait for it (the first statements
    of a stage were not waited for: the worker ended on the first refused connection)."""
    from ragrouter.config import Config
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services
    from tests.support.touch_stage import TouchStage

    _admin(pg, 'CREATE DATABASE "away"')
    engine = eng.make_engine(pg.url("away"))
    migrate.upgrade(engine)
    with engine.begin() as conn:
        cid = conn.execute(text("INSERT INTO corpora (name) VALUES ('touch') RETURNING id")).scalar()
    cfg = Config.load(env={"RAGROUTER__worker__store_outage_s": "30"})
    pg.server_stop()
    timer = threading.Timer(2.0, pg.server_start)
    timer.start()
    try:
        t0 = time.monotonic()
        rep = run_stage(TouchStage(6, cid, str(tmp_path)), Services(cfg, engine, command="touch"), Scope(config=cfg),
                        workers=2, progress=False)
        wall = time.monotonic() - t0
    finally:
        timer.join()
        if not pg.server_running():
            pg.server_start()
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT COUNT(*) FROM corpus_metrics WHERE variant = 'touch'")).scalar()
        runs = conn.execute(text("SELECT stages FROM worker_runs")).all()
    eng.dispose_all()
    assert (rep.done, rep.failed, rows) == (6, 0, 6)
    assert len(runs) == 1 and "touch" in str(runs[0][0])
    assert 2.0 <= wall < 30
    assert re.fullmatch(r"warning: the store was unreachable for \d+\.\d s; reconnected, nothing was lost\n",
                        capsys.readouterr().err)



def test_opening_a_store_that_is_away_is_an_outage_only_for_a_worker(tmp_path, fresh_state):
    """The one-line StoreError of opening a PostgreSQL store that refuses connections hides the
    driver's error: a worker opening its store looks through it (``wrapped``), every other
    command keeps its 'cannot open store' line; a DuckDB file's StoreError is never an outage, nor
    is a verdict already given."""
    from ragrouter.db.engine import StoreError

    with pytest.raises(StoreError, match="cannot open store") as info:
        eng.make_engine("postgresql+psycopg://x@127.0.0.1:9/x")
    refused = info.value
    assert not outage.is_disconnect(refused) and outage.is_disconnect(refused, wrapped=True)
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError, match="not a readable DuckDB store") as info:
        eng.make_engine(f"duckdb:///{bad}")
    assert not outage.is_disconnect(info.value, wrapped=True)
    try:
        try:
            raise outage.StoreUnavailable("the store stayed unreachable for 60 s") from refused
        except outage.StoreUnavailable:
            raise StoreError("wrapped verdict") from None
    except StoreError as exc:
        assert not outage.is_disconnect(exc, wrapped=True)
    # opening waits: after one line, for as long as worker.store_outage_s, then one line
    t0 = time.monotonic()
    with pytest.raises(outage.StoreUnavailable, match=r"while opening the store \(cannot open store"):
        outage.opening(lambda: eng.make_engine("postgresql+psycopg://x@127.0.0.1:9/x"), 0.5)
    assert 0.5 <= time.monotonic() - t0 < 5


def test_the_ledger_waits_for_a_store_that_is_away_when_it_draws_ids_or_replays_its_spool(pg, tmp_path, fresh_state,
                                                                                         monkeypatch):
    """In process, PostgreSQL stopped and started 2 s later: drawing a block of ledger ids (async
    ledger mode) and replaying a spooled reply (done when a unit's thread first makes the
    gateway) wait for it — they failed the unit on the first refused connection."""
    from sqlalchemy import delete, select

    from ragrouter.config import Config
    from ragrouter.db.models import LLMCall
    from ragrouter.llm import spool
    from ragrouter.llm.gateway import Gateway
    from ragrouter.llm.ledger import _IdBlock

    monkeypatch.setenv("RAGROUTER_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("RAGROUTER_SPOOL_KEY", "k")
    _admin(pg, 'CREATE DATABASE "ids_away"')
    engine = eng.make_engine(pg.url("ids_away"))
    migrate.upgrade(engine)
    with FakeOpenAI() as fake:
        spec = {"kind": "openai", "base_url": fake.base_url, "model": "m", "api_key_env": "RAGROUTER_SPOOL_KEY",
                "concurrency": 1, "timeout_s": 10, "retries": 0}
        cfg = Config({"backends": {"b": spec}, "roles": {"generators": ["b"]}}, source="spool")
        with Gateway(cfg, engine) as gw:
            gw.chat("b", [{"role": "user", "content": "q"}], temperature=0.0, max_tokens=5, stage="answer",
                    phase="generation")
    with engine.begin() as conn:
        row = dict(conn.execute(select(LLMCall.__table__)).one()._mapping)
        conn.execute(delete(LLMCall))
    row.pop("created_at", None)
    spool.keep(engine, [("call", row)])

    def away_for_2s(fn):
        pg.server_stop()
        timer = threading.Timer(2.0, pg.server_start)
        timer.start()
        try:
            t0 = time.monotonic()
            out = fn()
            return out, time.monotonic() - t0
        finally:
            timer.join()
            if not pg.server_running():
                pg.server_start()

    block = _IdBlock(engine, eng.write_lock(engine), False, 30.0)
    first, wall = away_for_2s(block.next)
    assert first >= 1 and 1.5 <= wall < 30
    replayed, wall = away_for_2s(lambda: spool.replay(engine, eng.write_lock(engine), 30.0))
    assert replayed == 1 and 1.5 <= wall < 30
    with engine.connect() as conn:
        assert conn.execute(select(LLMCall.request_hash)).scalars().all() == [row["request_hash"]]
    eng.dispose_all()
