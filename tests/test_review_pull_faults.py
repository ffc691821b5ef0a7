"""review pull under fault: the MLflow store moved away, the tracking server down or silent, a
label of a run the store does not hold, a trace whose run tag is not an integer. Each is one
line naming what is wrong; a refused pull changes nothing (no MLflow store made, no label
stored), a skipped trace or label leaves the rest of the pull to land."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest
from sqlalchemy import text

from cli import main
from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.report import synthetic
from ragrouter.review import traces

WAIT_S = 30  # a pull that has not ended by then hangs (MLflow's own retries: minutes)


def _store(kind: str, tmp_path, request):
    """A synthetic store (with the synthetic reviewer's labels, so "unchanged" means something)."""
    rows = synthetic.random_rows(3, n_corpora=1, queries_per_corpus=8, generators=("gen-a",), judges=("judge-x",),
                                 p_missing_run=0.0, p_old_config=0.0, p_correct=0.45, with_router=False)
    url = f"duckdb:///{tmp_path / 's.duckdb'}" if kind == "duckdb" else request.getfixturevalue("pg_url")
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    synthetic.insert_rows(engine, rows)
    return url, engine


def _snapshot(engine) -> tuple:
    with engine.connect() as conn:
        return (sorted(tuple(r) for r in conn.execute(text(
                    "SELECT trace_id, reviewer, run_id, label, assessment_id FROM human_labels"))),
                sorted(tuple(r) for r in conn.execute(text("SELECT id, status, origin FROM queries"))))


def _pull(url: str, *args: str) -> int:
    """``review pull`` in a thread, so that a hang fails the test instead of stalling it."""
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(main(["--db", url, "review", "pull", *args])),
                              daemon=True)
    worker.start()
    worker.join(WAIT_S)
    assert result, f"review pull still running after {WAIT_S} s"
    return result[0]


def _one_error_line(err: str, *parts: str) -> None:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for p in parts:
        assert p in err, (p, err)


# -- the store moved ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind,where", [("duckdb", "sqlite"), ("duckdb", "folder"), ("postgresql", "sqlite")])
def test_pull_from_a_moved_mlflow_store_is_refused_and_creates_nothing(kind, where, tmp_path, monkeypatch, capsys,
                                                                       request):
    url, engine = _store(kind, tmp_path, request)
    try:
        gone = tmp_path / "moved" / "mlflow"
        uri = f"sqlite:///{gone / 'mlflow.db'}" if where == "sqlite" else gone.as_uri()
        monkeypatch.setenv("RAGROUTER__routers__mlflow_uri", uri)
        before = _snapshot(engine)
        assert before[0], "the synthetic store should hold labels"
        assert _pull(url) == 2
        _one_error_line(capsys.readouterr().err, f"MLflow tracking store {uri} not found")
        assert not (tmp_path / "moved").exists()  # no empty store made in its place
        assert _snapshot(engine) == before
    finally:
        eng.dispose_all()


# -- the server down or silent -----------------------------------------------------------------

class _Silent(http.server.BaseHTTPRequestHandler):
    """Answers /health, then never answers MLflow's API calls (a hung server behind a live port)."""

    release = threading.Event()

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/").endswith("/health"):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")
            return
        self.release.wait(WAIT_S * 3)

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture
def dead_server(request):
    """(tracking URI of a server that does not work, what the error line says)."""
    how = request.param
    if how == "closed":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        yield f"http://127.0.0.1:{port}", "not reachable"
    elif how == "accepts":  # the kernel completes the handshake; nobody reads or answers
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}", "did not answer within 1 s"
        s.close()
    else:  # a server whose /health answers but whose API hangs: the bounded MLflow requests
        _Silent.release.clear()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}", "did not answer within 1 s (a request and its retry"
        _Silent.release.set()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("dead_server", ["closed", "accepts", "api-hangs"], indirect=True)
def test_pull_from_an_unreachable_server_gives_up_in_bounded_time(dead_server, tmp_path, monkeypatch, capsys,
                                                                  request):
    uri, says = dead_server
    url, engine = _store("duckdb", tmp_path, request)
    try:
        monkeypatch.setenv("RAGROUTER__routers__mlflow_uri", uri)
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")  # MLflow alone still retries seven times
        before = _snapshot(engine)
        t0 = time.monotonic()
        assert _pull(url) == 2
        took = time.monotonic() - t0
        _one_error_line(capsys.readouterr().err, uri, says)
        assert took < 15, took  # 1 s per request, one retry
        assert _snapshot(engine) == before
    finally:
        eng.dispose_all()


def test_timeout_option_sets_the_limit(tmp_path, monkeypatch, capsys, request):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    uri = f"http://127.0.0.1:{s.getsockname()[1]}"
    url, engine = _store("duckdb", tmp_path, request)
    try:
        monkeypatch.setenv("RAGROUTER__routers__mlflow_uri", uri)
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")  # the option wins
        t0 = time.monotonic()
        assert _pull(url, "--timeout", "2") == 2
        assert 1.5 < time.monotonic() - t0 < 15
        _one_error_line(capsys.readouterr().err, f"MLflow tracking server {uri} did not answer within 2 s")
    finally:
        s.close()
        eng.dispose_all()


# -- labels the store cannot take --------------------------------------------------------------

def _human(trace_id: str, value, reviewer: str) -> None:
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    mlflow.log_feedback(trace_id=trace_id, name="label", value=value,
                        source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=reviewer))


def _reviewed(kind: str, tmp_path, monkeypatch, capsys, request):
    """A store with 4 judged runs logged as traces, each labelled 'incorrect' by ann: (store
    URL, engine, MLflow client, the traces by run id)."""
    from ragrouter.routers import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"
    monkeypatch.setenv("RAGROUTER__routers__mlflow_uri", uri)
    url, engine = _store(kind, tmp_path, request)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM human_labels"))
    assert main(["--db", url, "review", "start", "--n", "4", "--seed", "1"]) == 0
    capsys.readouterr()
    client = tracking.client(uri)
    exp = client.get_experiment_by_name(traces.experiment_name(
        engine.connect().execute(text("SELECT store_id FROM store_info")).scalar()))
    found = {int(t.info.tags[traces.TAG_RUN]): t for t in client.search_traces(locations=[exp.experiment_id])}
    assert len(found) == 4
    for t in found.values():
        _human(t.info.trace_id, "incorrect", "ann")
    return url, engine, client, found


def _stored(engine) -> dict:
    with engine.connect() as conn:
        return {r[0]: (r[1], r[2], r[3]) for r in conn.execute(text(
            "SELECT trace_id, run_id, reviewer, label FROM human_labels"))}


@pytest.mark.parametrize("kind", ["duckdb", "postgresql"])
def test_label_of_a_run_not_in_the_store_is_skipped_with_a_warning(kind, tmp_path, monkeypatch, capsys, request):
    url, engine, client, found = _reviewed(kind, tmp_path, monkeypatch, capsys, request)
    try:
        with engine.connect() as conn:
            missing = int(conn.execute(text("SELECT MAX(id) FROM paradigm_runs")).scalar()) + 1000
        stray_run, stray = sorted(found.items())[0]
        client.set_trace_tag(stray.info.trace_id, traces.TAG_RUN, str(missing))  # a run this store never had
        _human(stray.info.trace_id, "correct", "bob")  # two labels on it: two warnings
        assert _pull(url) == 0
        out, err = capsys.readouterr()
        warnings = err.splitlines()
        assert warnings == [f"warning: trace {stray.info.trace_id}: run {missing} is not in this store; "
                            f"the label of reviewer {who} skipped" for who in ("ann", "bob")]
        assert "review pull: 3 human labels from experiment" in out
        assert "; 2 labels skipped (run or query not in this store)" in out
        assert _stored(engine) == {t.info.trace_id: (run_id, "ann", "incorrect")
                                   for run_id, t in found.items() if run_id != stray_run}
    finally:
        eng.dispose_all()


@pytest.mark.parametrize("kind,tag", [("duckdb", "run-7b"), ("duckdb", "1" * 40), ("postgresql", "1" * 40),
                                      ("duckdb", "-3"), ("duckdb", str(2**31))])
def test_trace_with_a_run_tag_that_is_no_store_id_is_skipped_and_the_rest_pulled(kind, tag, tmp_path, monkeypatch,
                                                                                   capsys, request):
    url, engine, client, found = _reviewed(kind, tmp_path, monkeypatch, capsys, request)
    try:
        bad_run, bad = sorted(found.items())[1]
        client.set_trace_tag(bad.info.trace_id, traces.TAG_RUN, tag)
        assert _pull(url) == 0
        out, err = capsys.readouterr()
        assert err.splitlines() == [f"warning: trace {bad.info.trace_id}: tag {traces.TAG_RUN} {tag!r} is not a "
                                    f"store id (an integer 1..{2**31 - 1}); trace skipped"]
        assert "review pull: 3 human labels from experiment" in out
        assert "; 1 traces skipped (run/query tag missing or not a store id)" in out
        assert _stored(engine) == {t.info.trace_id: (run_id, "ann", "incorrect")
                                   for run_id, t in found.items() if run_id != bad_run}
        # a later review start of the same sample is not thrown by it either
        assert main(["--db", url, "review", "start", "--n", "4", "--seed", "1"]) == 0
    finally:
        eng.dispose_all()
