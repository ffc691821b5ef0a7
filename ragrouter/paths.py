"""Where ragrouter keeps files outside the store (model weights, tokenizer files, indexes).

``RAGROUTER_HOME`` (default ``~/.cache/ragrouter``) holds everything that is derived or
downloaded once per machine; the repository itself stays clean.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


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
