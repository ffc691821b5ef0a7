"""MLflow's own server and UI, opening experiments on their runs table (``cli.py mlflow-ui``).

Why this exists: MLflow 3.17's UI ignores the experiment tag ``mlflow.experimentKind``. In its
bundle (``mlflow/server/js/build/static/js``) the experiment's kind comes from the *browser's*
workflow setting whenever the feature flag that the OSS build hard-codes to true is on: the URL's
``?workflowType=`` if present, else ``localStorage["mlflow.workflowType_v1"]``, else
``"genai"``. So a fresh browser opens every experiment on the GenAI "Traces" page, and only
the sidebar's workflow switch or a deep link with ``?workflowType=machine_learning`` changes
it. There is no server flag or experiment setting for it in 3.17.

What this does: it serves MLflow's own application (``mlflow.server.fastapi_app``, the one
``mlflow server`` runs under uvicorn) behind one ASGI wrapper that adds a few bytes to the UI's
landing page (``index.html`` at ``/``): a script that sets that browser setting to
``machine_learning`` when the browser has none. A user's own choice (the sidebar's switch, or a
link's ``?workflowType=genai``) still wins, and is kept; the Model training view has its own
Traces tab (review's traces open there). The store is
initialised like ``mlflow server`` does it (``initialize_backend_stores``: the database
migrated), and the REST API and UI are MLflow's, unchanged.

    python -m ragrouter.routers.mlflow_ui --backend-store-uri sqlite:///mlflow/mlflow.db --port 5000

It binds 127.0.0.1 by default and stops on SIGTERM (uvicorn's graceful shutdown).

:func:`source_tags` gives a run the ``mlflow.source.*`` tags that fill the UI's "Source" column
(the program and the git commit).
"""

from __future__ import annotations

import argparse
import os
import sys

WORKFLOW_KEY = "mlflow.workflowType_v1"  # MLflow's useLocalStorage key: f"{key}_v{version}"
DEFAULT_WORKFLOW = "machine_learning"
SCRIPT = ('<script>try{var k="%s";if(!localStorage.getItem(k))localStorage.setItem(k,JSON.stringify("%s"))}'
          "catch(e){}</script>" % (WORKFLOW_KEY, DEFAULT_WORKFLOW)).encode("ascii")
SOURCE_NAME = "cli.py routers train"


def source_tags(git_commit: str | None, name: str = SOURCE_NAME) -> dict[str, str]:
    """The ``mlflow.source.*`` tags of a run: its program (``name``), LOCAL, and the commit
    (``paths.git_commit()``'s, without its ``+dirty`` mark; none when it is ``unknown``)."""
    tags = {"mlflow.source.name": name, "mlflow.source.type": "LOCAL"}
    commit = str(git_commit or "").split("+")[0].strip()
    if commit and commit != "unknown":
        tags["mlflow.source.git.commit"] = commit
    return tags


def landing_page(html: bytes) -> bytes:
    """``index.html`` with the default-workflow script first in its head."""
    if SCRIPT in html or b"<head>" not in html:
        return html
    return html.replace(b"<head>", b"<head>" + SCRIPT, 1)


class RunsFirst:
    """ASGI wrapper: the UI's landing page gets :data:`SCRIPT`; everything else is passed through."""

    def __init__(self, app, prefix: str = ""):
        self.app = app
        self.paths = {prefix.rstrip("/") + "/", prefix.rstrip("/") or "/"}

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or scope.get("method") != "GET" or scope.get("path") not in self.paths:
            return await self.app(scope, receive, send)
        start: dict = {}
        chunks: list[bytes] = []

        async def capture(message):
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                return await send(message)
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            if start.get("status") == 200 and any(k.lower() == b"content-type" and v.startswith(b"text/html")
                                                   for k, v in headers):
                body = landing_page(body)
                headers = [(k, v) for k, v in headers if k.lower() != b"etag"]  # not the file's any more
            headers.append((b"content-length", str(len(body)).encode("ascii")))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return await self.app(scope, receive, capture)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m ragrouter.routers.mlflow_ui", description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend-store-uri", required=True)
    ap.add_argument("--default-artifact-root")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5000)
    a = ap.parse_args(argv)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.server.constants import ARTIFACT_ROOT_ENV_VAR, BACKEND_STORE_URI_ENV_VAR, REGISTRY_STORE_URI_ENV_VAR

    os.environ[BACKEND_STORE_URI_ENV_VAR] = a.backend_store_uri
    os.environ[REGISTRY_STORE_URI_ENV_VAR] = a.backend_store_uri
    if a.default_artifact_root:
        os.environ[ARTIFACT_ROOT_ENV_VAR] = a.default_artifact_root
    from mlflow.server.handlers import initialize_backend_stores

    initialize_backend_stores(a.backend_store_uri, a.backend_store_uri, a.default_artifact_root)
    import uvicorn
    from mlflow.server.fastapi_app import app

    print(f"MLflow UI (runs table first) at http://{a.host}:{a.port}", flush=True)
    uvicorn.run(RunsFirst(app), host=a.host, port=a.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    sys.exit(main())
