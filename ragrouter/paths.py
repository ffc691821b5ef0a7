"""Where ragrouter keeps files outside the store (model weights, tokenizer files, indexes), and
which commit of the checkout runs.

``RAGROUTER_HOME`` (default ``~/.cache/ragrouter``) holds everything that is derived or
downloaded once per machine; the repository itself stays clean.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The data folders (queries/, migrations/, configs/, alembic.ini, requirements.txt): the clone's
# own in a checkout (or an editable install), else the copy a wheel carries (setup.py).
_PACKAGED = Path(__file__).resolve().parent / "_data"
IN_CLONE = (REPO_ROOT / "queries" / "views").is_dir() and (REPO_ROOT / "migrations").is_dir()
DATA_ROOT = REPO_ROOT if IN_CLONE or not _PACKAGED.is_dir() else _PACKAGED


def mlflow_dir() -> Path:
    """The MLflow folder: the clone's ``mlflow/``; for an installed package
    ``$RAGROUTER_MLFLOW_DIR``, else ``./mlflow`` of the working directory."""
    env = os.environ.get("RAGROUTER_MLFLOW_DIR")
    if env:
        return Path(env)
    return REPO_ROOT / "mlflow" if IN_CLONE else Path.cwd() / "mlflow"


def home() -> Path:
    """The per-machine cache folder, created on first use."""
    path = Path(os.environ.get("RAGROUTER_HOME", Path.home() / ".cache" / "ragrouter"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def sub(name: str) -> Path:
    """A named sub-folder of :func:`home`, created on first use."""
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def git_commit() -> str:
    """The checkout's commit (``unknown`` outside a git checkout), ``+dirty`` with local changes."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
