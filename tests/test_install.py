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


def test_editable_install_in_a_fresh_venv(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # the build backend (setuptools, wheel) from this interpreter's packages, ahead of the venv's own
    import os

    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "-e", str(REPO)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=600, env={**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]})
    assert pip.returncode == 0, pip.stderr[-2000:]
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
