"""`cli.py mlflow-ui` opens experiments on their runs table (issue 33 item 4): MLflow 3.17's UI
takes the experiment view from the browser's workflow setting (default GenAI), so the server
here adds a default of 'machine_learning' to its landing page; the REST API is MLflow's own.
(The browser side, a fresh Chromium profile clicking the experiment on the home page, is
benchmarks/mlflow_home_screenshots.py.)"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from ragrouter.routers import mlflow_ui
from ragrouter.routers.tracking import start_ui, stop_ui


def test_the_landing_page_gets_the_default_workflow_once():
    html = b"<!doctype html><html><head><meta charset=utf-8><title>MLflow</title></head><body></body></html>"
    out = mlflow_ui.landing_page(html)
    assert out.startswith(b"<!doctype html><html><head>" + mlflow_ui.SCRIPT + b"<meta")
    assert mlflow_ui.landing_page(out) == out  # not twice
    script = mlflow_ui.SCRIPT.decode()
    # MLflow's useLocalStorage stores JSON under f"{key}_v{version}"; a browser's own choice is kept
    assert '"mlflow.workflowType_v1"' in script and 'JSON.stringify("machine_learning")' in script
    assert "if(!localStorage.getItem(k))" in script


def test_the_key_is_the_one_mlflow_3_17_reads():
    """The bundle reads the workflow from ?workflowType= or localStorage 'mlflow.workflowType'
    (version 1), default genai, and ignores mlflow.experimentKind while its flag is on."""
    import mlflow

    js = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    main = next(js.glob("main.*.js")).read_text(errors="replace")
    assert 'key:"mlflow.workflowType",version:1,initialValue:c' in main
    assert re.search(r"const o=\(e,t\)=>`\$\{e\}_v\$\{t\}`", main)  # the storage key's form
    assert 'e.GENAI="genai",e.MACHINE_LEARNING="machine_learning"' in main


def test_source_tags_fill_mlflows_source_column():
    assert mlflow_ui.source_tags("a" * 40 + "+dirty") == {
        "mlflow.source.name": "cli.py routers train", "mlflow.source.type": "LOCAL",
        "mlflow.source.git.commit": "a" * 40}
    assert "mlflow.source.git.commit" not in mlflow_ui.source_tags("unknown")


def test_the_ui_serves_mlflow_with_the_runs_first_landing_page(tmp_path):
    proc, url = start_ui(f"sqlite:///{tmp_path / 'mlflow.db'}", host="127.0.0.1", port=0)
    try:
        with urllib.request.urlopen(url + "/", timeout=30) as r:
            body = r.read()
            assert r.status == 200 and int(r.headers["content-length"]) == len(body)
        assert mlflow_ui.SCRIPT in body and b"static-files/static/js/main." in body
        req = urllib.request.Request(url + "/api/2.0/mlflow/experiments/create", method="POST",
                                     data=json.dumps({"name": "probe"}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            exp_id = json.load(r)["experiment_id"]
        with urllib.request.urlopen(f"{url}/api/2.0/mlflow/experiments/get?experiment_id={exp_id}", timeout=30) as r:
            assert json.load(r)["experiment"]["name"] == "probe"
        with urllib.request.urlopen(url + "/static-files/static/js/" + re.search(
                rb"static/js/(main\.[0-9a-f]+\.js)", body).group(1).decode(), timeout=30) as r:
            assert mlflow_ui.SCRIPT not in r.read(1 << 20)  # only the landing page is changed
    finally:
        stop_ui(proc)
    assert proc.poll() is not None
