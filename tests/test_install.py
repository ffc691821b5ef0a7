"""`pip install -e .` in a fresh virtual environment gives a working `ragrouter` command
(issue 16, item 9). The fresh venv sees this interpreter's packages through a .pth file
(no download); the package itself is installed with --no-deps --no-build-isolation."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _fresh_venv_install(tmp_path: Path, *target: str) -> Path:
    """A fresh venv under ``tmp_path`` that sees this interpreter's packages through a .pth
    file (no download), with ``pip install --no-deps --no-build-isolation --no-index
    *target`` run in it (the build backend from this interpreter's packages, ahead of the
    venv's own); the venv's folder."""
    import os

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", *target], capture_output=True, text=True, cwd=tmp_path,
                         timeout=600, env={**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]})
    assert pip.returncode == 0, pip.stderr[-2000:]
    return env_dir


def test_editable_install_in_a_fresh_venv(tmp_path):
    env_dir = _fresh_venv_install(tmp_path, "-e", str(REPO))
    exe = env_dir / "bin" / "ragrouter"
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert version.returncode == 0, version.stderr
    from ragrouter import __version__

    assert version.stdout.strip() == f"ragrouter {__version__}"
    help_ = subprocess.run([str(exe), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert help_.returncode == 0 and help_.stdout.startswith("Usage: ragrouter ")
    listed = [line.split()[0] for line in help_.stdout.split("Commands:")[1].strip().splitlines()]
    assert listed[:4] == ["db", "ingest", "run", "status"]  # pipeline order
    # a command through the console script: one line for a missing store, exit 2
    st = subprocess.run([str(exe), "--db", f"duckdb:///{tmp_path / 'none.duckdb'}", "status"],
                        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert st.returncode == 2 and "does not exist" in st.stderr and len(st.stderr.strip().splitlines()) == 1
    # shell completion (click): the script prints its bash completion function
    comp = subprocess.run([str(exe)], env={"_RAGROUTER_COMPLETE": "bash_source", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "_ragrouter_completion" in comp.stdout
    assert sys.executable  # the test ran under the project's interpreter


def test_pip_install_dot_outside_the_clone_runs_the_pipeline_commands(tmp_path):
    """`pip install .` (a wheel, not editable) into a fresh venv gives a `ragrouter` that works
    from any folder: the views, migrations and configs travel inside the package (setup.py),
    and --help, --version, db upgrade, ingest and run --dry-run on the embedded default run
    without the clone. The venv sees this interpreter's packages through a .pth file (no
    download); the package is built and installed with --no-deps --no-build-isolation."""
    import json
    import os

    import shutil

    src = tmp_path / "src"  # pip builds a local folder in place: a copy keeps build/ out of the clone
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                             "mlflow", "reports", "exports", "*.duckdb*"))
    env_dir = _fresh_venv_install(tmp_path, str(src))
    py = env_dir / "bin" / "python"
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAGROUTER_DB", "RAGROUTER_CONFIG")}
    exe = str(env_dir / "bin" / "ragrouter")

    def rr(*args):
        return subprocess.run([exe, *args], capture_output=True, text=True, cwd=work, timeout=300, env=env)

    where = subprocess.run([str(py), "-c", "import ragrouter.paths as p; print(p.DATA_ROOT)"], capture_output=True,
                           text=True, cwd=work, env=env, timeout=120)
    assert where.returncode == 0 and str(env_dir) in where.stdout and "_data" in where.stdout, where
    top = subprocess.run([str(py), "-c", "import cli"], capture_output=True, text=True, cwd=work, env=env, timeout=60)
    assert top.returncode != 0 and "No module named 'cli'" in top.stderr  # the CLI lives in the package
    from ragrouter import __version__

    assert rr("--version").stdout.strip() == f"ragrouter {__version__}"
    assert rr("--help").stdout.startswith("Usage: ragrouter ")
    db = f"duckdb:///{work / 'store.duckdb'}"
    up = rr("--db", db, "db", "upgrade")
    assert up.returncode == 0, up.stderr
    (work / "docs.jsonl").write_text(json.dumps({"id": "d1", "title": "Curie", "text": "Marie Curie was born in "
                                                 "Warsaw. She won two Nobel prizes."}) + "\n")
    (work / "questions.jsonl").write_text(json.dumps({"id": "q1", "question": "Where was Marie Curie born?",
                                                      "answer": "Warsaw", "type": "factual"}) + "\n")
    ing = rr("--db", db, "ingest", "--corpus", "toy", "--format", "jsonl", "docs.jsonl", "questions.jsonl")
    assert ing.returncode == 0, ing.stderr
    dry = rr("--db", db, "run", "--dry-run", "--json", "--corpus", "toy")
    assert dry.returncode == 0, dry.stderr
    est = json.loads(dry.stdout)
    assert {"chunk", "extract", "answer"} <= {s["stage"] for s in est["stages"]} and est["expected_wall_s"] >= 0
    views = rr("--db", db, "sql", "select count(*) as n from v_run_latest", "--format", "json")
    assert views.returncode == 0 and json.loads(views.stdout) == [{"n": 0}], views.stderr
