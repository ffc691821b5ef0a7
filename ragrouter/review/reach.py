"""Whether the MLflow tracking store that ``review pull`` reads is there, checked before MLflow
touches it, and MLflow's HTTP calls bounded in time for the pull.

MLflow opens a ``sqlite:///`` URI whose file is gone by creating an empty store, and a folder
URI by creating the folder, so a pull from a moved store read nothing and said so with exit 0.
Against a server that is down or does not answer, MLflow's client waits 120 s per request and
retries seven times with backoff: minutes with nothing on the screen. :func:`check` refuses
both in one line naming the URI; :func:`bounded` caps every MLflow HTTP request made inside it.
"""

from __future__ import annotations

import math
import os
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote, urlparse

DEFAULT_TIMEOUT_S = 10.0
TIMEOUT_ENV = "MLFLOW_HTTP_REQUEST_TIMEOUT"
RETRIES_ENV = "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
RETRIES = 1  # one retry of a failed request (MLflow's default is 7, with backoff)


class TrackingUnavailable(RuntimeError):
    """The tracking store cannot be read: the message names the URI and why."""


def local_path(uri: str) -> tuple[str, Path] | None:
    """("file" or "folder", the path) of a local store URI — a ``sqlite:///`` database file, or
    a ``file:`` URI / plain path of a folder store; None for a server or another database."""
    if uri.startswith("sqlite:///"):
        return "file", Path(uri[len("sqlite:///"):].split("?", 1)[0])
    if uri.split(":", 1)[0] in ("databricks", "databricks-uc", "uc"):  # MLflow's names, not folders
        return None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return "folder", Path(unquote(parsed.path))
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):  # a plain (or drive-letter) path
        return "folder", Path(uri)
    return None


def timeout_s(given: float | None) -> float:
    """The per-request limit: ``given`` (--timeout), else MLFLOW_HTTP_REQUEST_TIMEOUT when set,
    else :data:`DEFAULT_TIMEOUT_S`."""
    if given is not None:
        return float(given)
    try:
        env = float(os.environ.get(TIMEOUT_ENV) or "nan")
    except ValueError:
        env = math.nan
    return env if math.isfinite(env) and env > 0 else DEFAULT_TIMEOUT_S


def check(uri: str, timeout: float, local: bool = True) -> None:
    """Raise :class:`TrackingUnavailable` when the store at ``uri`` is not there: a local
    store's file or folder missing (only when ``local``), or a server that gives no HTTP answer
    within ``timeout`` seconds (any HTTP status counts as an answer: the server is up)."""
    where = local_path(uri)
    if where is not None:
        if not local:
            return
        what, path = where
        there = path.is_file() if what == "file" else path.is_dir()
        if not there:
            raise TrackingUnavailable(
                f"MLflow tracking store {uri} not found: no {what} {path} (moved? point routers.mlflow_uri "
                f"at it, or run 'review start' to log a review experiment there); nothing was read or created")
        return
    parsed = urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return  # databricks, a database URI: MLflow's own errors
    probe = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(probe, timeout=timeout) as resp:  # noqa: S310 (http(s) only, checked above)
            resp.read(64)
    except urllib.error.HTTPError:
        return  # it answered
    except OSError as exc:  # URLError, a timeout, a reset connection
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            what = f"did not answer within {timeout:g} s (--timeout or {TIMEOUT_ENV} sets the limit)"
        else:
            what = f"not reachable ({str(reason) or type(reason).__name__})"
        raise TrackingUnavailable(f"MLflow tracking server {uri} {what}; is it running there?") from None


@contextmanager
def bounded(timeout: float) -> Iterator[None]:
    """Inside the block every MLflow HTTP request gives up after ``timeout`` seconds (rounded
    up: MLflow reads whole seconds) and is retried at most :data:`RETRIES` times, unless
    MLFLOW_HTTP_REQUEST_MAX_RETRIES is set; the environment is restored afterwards."""
    values = {TIMEOUT_ENV: str(max(1, math.ceil(timeout)))}
    if RETRIES_ENV not in os.environ:
        values[RETRIES_ENV] = str(RETRIES)
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
