"""A quiet, informative console: library warnings go to a log file, progress to a bar.

Commands that drive libraries (``routers train`` and ``promote``: scikit-learn, XGBoost, torch,
MLflow; ``report``: matplotlib, pandas; ``serve``) run inside :func:`library_warnings`: every
``warnings.warn`` and every warning-level record of the libraries' loggers is written to
``$RAGROUTER_HOME/logs/warnings.log`` (time, command, category, message, where) instead of the
console, MLflow's own prints and artifact download bars are off, and the command ends with one
line saying how many warnings were kept and where. Our own ``ragrouter.*`` loggers are left as
they are: what they say is meant for the user.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import warnings
from pathlib import Path
from typing import Callable, Iterator

from ragrouter.paths import sub

LIBRARY_LOGGERS = ("mlflow", "alembic", "sklearn", "xgboost", "torch", "matplotlib", "sentence_transformers",
                   "transformers", "urllib3", "httpx", "numexpr")


# MLflow's own progress bars ("Downloading artifacts", one per artifact fetch): a command shows
# one bar per long step, its own
QUIET_ENV = {"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


def log_path() -> Path:
    return sub("logs") / "warnings.log"


class _Counter(logging.Handler):
    def __init__(self, fh, command: str):
        super().__init__(level=logging.WARNING)
        self.fh, self.command, self.n = fh, command, 0

    def emit(self, record: logging.LogRecord) -> None:
        self.n += 1
        when = dt.datetime.now().isoformat(timespec="seconds")
        self.fh.write(f"{when} [{self.command}] {record.name} {record.levelname}: {record.getMessage()}\n")


@contextlib.contextmanager
def library_warnings(command: str, echo: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Send library warnings to :func:`log_path` for the duration; on exit ``echo`` one line
    with their count (nothing when there were none)."""
    import importlib.util
    import os
    import sys

    if importlib.util.find_spec("mlflow") is not None:
        import mlflow  # noqa: F401 - it configures its loggers on import: do that before they are redirected
    saved_env = {k: os.environ.get(k) for k in QUIET_ENV}
    os.environ.update(QUIET_ENV)
    stream = getattr(sys.modules.get("mlflow.utils.logging_utils"), "MLFLOW_LOGGING_STREAM", None)
    stream_was = getattr(stream, "enabled", None)
    if stream is not None:
        stream.enabled = False  # MLflow's own prints ('Successfully registered model ...'): our lines say it
    path = log_path()
    with open(path, "a", encoding="utf-8") as fh:
        handler = _Counter(fh, command)
        saved: list[tuple[logging.Logger, list, bool]] = []
        for name in LIBRARY_LOGGERS:
            lg = logging.getLogger(name)
            saved.append((lg, list(lg.handlers), lg.propagate))
            lg.handlers = [handler]
            lg.propagate = False
        old_show = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            handler.n += 1
            when = dt.datetime.now().isoformat(timespec="seconds")
            fh.write(f"{when} [{command}] {category.__name__}: {message} ({filename}:{lineno})\n")

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("default")  # each distinct warning once per place, as Python does
                warnings.showwarning = show
                yield path
        finally:
            warnings.showwarning = old_show
            for lg, handlers, propagate in saved:
                lg.handlers, lg.propagate = handlers, propagate
            mlflow_log = logging.getLogger("mlflow")
            if mlflow_log.getEffectiveLevel() < logging.WARNING:
                # MLflow's INFO lines at interpreter exit (its trace queue's "Flushing …") come after
                # the command has said what it did: they are not the console's
                mlflow_log.setLevel(logging.WARNING)
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if stream is not None:
                stream.enabled = stream_was
            fh.flush()
    if echo is not None and handler.n:
        echo(f"({handler.n} library warning{'s' if handler.n != 1 else ''} written to {path})")


def bar(total: int, desc: str, enabled: bool = True, unit: str = "run"):
    """A tqdm bar on stderr like the stages' (a no-op object when disabled)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, leave=False, dynamic_ncols=True)


# How the docs, help texts and hints name the command: the clone's entry point. A user who
# installed the package runs `ragrouter` (the console script) and reads that name instead.
CLONE_COMMAND = "python cli.py"


class _Renaming:
    """A text stream that writes :data:`CLONE_COMMAND` as the name the user invoked."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name

    def write(self, text: str) -> int:
        self._stream.write(text.replace(CLONE_COMMAND, self._name) if isinstance(text, str) else text)
        return len(text)

    def __getattr__(self, attr):
        return getattr(self._stream, attr)


@contextlib.contextmanager
def invoked_as(name: str) -> Iterator[None]:
    """For the duration, every line on stdout and stderr — help texts, hints, errors — names the
    command as the user invoked it (``ragrouter``) where it says ``python cli.py``."""
    import sys

    if name == CLONE_COMMAND:
        yield
        return
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Renaming(sys.stdout, name), _Renaming(sys.stderr, name)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
