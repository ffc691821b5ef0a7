"""Where a router zoo's MLflow store lives, and how it moves.

The default store is ``sqlite:///<dir>/mlflow.db`` with artefacts in ``<dir>/artifacts``.
MLflow writes absolute ``file:`` URIs into the database (it resolves a relative artifact
location when an experiment is created; relative locations are an open feature request,
mlflow/mlflow#3144), so a bare ``cp -r`` of the folder still points at the original. Two ways out:

* :func:`relocate_store` — every open of a SQLite store by ragrouter (and ``ragrouter routers
  relocate FOLDER``) rebases every artefact URI under a folder named ``artifacts`` (experiments,
  runs, registered model versions, logged models, trace tags) onto ``<dir>/artifacts`` of the
  database actually opened; after that, plain MLflow reads the copy with the original gone.
* :func:`copy_store` (``ragrouter routers copy DEST``) — the MLflow-native export: a consistent
  snapshot of the database (SQLite's online backup, safe while a trainer writes) and its
  artefacts, already rebased, so plain MLflow opens DEST at once.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from urllib.parse import unquote, urlparse

from ragrouter.paths import mlflow_dir


def default_tracking_uri() -> str:
    """The clone's ``mlflow/mlflow.db`` (an installed package: ``paths.mlflow_dir()``)."""
    folder = mlflow_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else ``None``."""
    return Path(tracking_uri[len("sqlite:///"):]) if tracking_uri.startswith("sqlite:///") else None


def default_artifact_location(tracking_uri: str) -> str | None:
    """``<folder of the SQLite file>/artifacts`` for a SQLite store, else ``None`` (server decides)."""
    db = sqlite_path(tracking_uri)
    if db is not None:
        return (db.parent / "artifacts").resolve().as_uri()
    return None


def relocate_store(tracking_uri: str) -> int:
    """Rebase artefact URIs of a SQLite store onto ``<its folder>/artifacts`` (see the module
    docstring); returns the number of experiments rebased (0 when nothing moved)."""
    db = sqlite_path(tracking_uri)
    if db is None or not db.exists():
        return 0
    root = default_artifact_location(tracking_uri)
    con = sqlite3.connect(db, timeout=60)
    moved = 0
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"experiments", "runs"} <= tables:
            return 0
        with con:
            olds = set()
            for exp_id, loc in con.execute("SELECT experiment_id, artifact_location FROM experiments").fetchall():
                if not loc or not loc.startswith("file:") or loc.rstrip("/") == root:
                    continue
                if Path(unquote(urlparse(loc).path)).name != "artifacts":
                    continue  # not a ragrouter-made location: leave it alone
                olds.add(loc.rstrip("/"))
                moved += 1
            for old in olds:
                _rebase(con, old, root)
    finally:
        con.close()
    return moved


def _rebase(con: sqlite3.Connection, old: str, root: str) -> None:
    """Every text value of the store under ``old`` (a ``file:`` URI, or its plain path) moved
    under ``root``: experiments and runs, and what else MLflow keeps paths in — registered model
    versions (``source``, ``storage_location``), logged models, trace tags — so that plain
    MLflow (``runs:/``, ``models:/``, the UI) finds every artefact of the opened folder."""
    pairs = [(old, root), (unquote(urlparse(old).path), unquote(urlparse(root).path))]
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')
                if any(t in (r[2] or "").upper() for t in ("CHAR", "TEXT", "CLOB"))]
        for col in cols:
            for a, b in pairs:
                con.execute(f'UPDATE "{table}" SET "{col}" = ? || substr("{col}", ?) '
                            f'WHERE "{col}" = ? OR substr("{col}", 1, ?) = ?',
                            (b, len(a) + 1, a, len(a) + 1, a + "/"))


def sqlite_uri(folder: Path) -> str:
    """The tracking URI of the store kept in ``folder`` (``folder/mlflow.db``)."""
    return f"sqlite:///{Path(folder).resolve() / 'mlflow.db'}"


class StoreCopyError(RuntimeError):
    """A copy that cannot be made: the message names the folder."""


def copy_store(src_folder: Path, dest_folder: Path) -> int:
    """Copy the store in ``src_folder`` (``mlflow.db`` + ``artifacts/``) to ``dest_folder``,
    which must not exist yet, and rebase the copy onto itself; returns the number of
    experiments rebased. Nothing is left at ``dest_folder`` when the copy fails."""
    src_folder, dest_folder = Path(src_folder).resolve(), Path(dest_folder).resolve()
    db = src_folder / "mlflow.db"
    if not db.is_file():
        raise StoreCopyError(f"{db}: no MLflow SQLite store to copy (expected FOLDER/mlflow.db)")
    if dest_folder.exists():
        raise StoreCopyError(f"{dest_folder}: already exists; give a new folder to copy into")
    if dest_folder == src_folder or src_folder in dest_folder.parents:
        raise StoreCopyError(f"{dest_folder}: inside the store being copied ({src_folder})")
    dest_folder.mkdir(parents=True)
    try:
        source = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
        target = sqlite3.connect(dest_folder / "mlflow.db")
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
        if (src_folder / "artifacts").is_dir():
            shutil.copytree(src_folder / "artifacts", dest_folder / "artifacts")
        return relocate_store(sqlite_uri(dest_folder))
    except BaseException:
        shutil.rmtree(dest_folder, ignore_errors=True)
        raise
