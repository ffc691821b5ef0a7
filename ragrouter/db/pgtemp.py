"""A throwaway PostgreSQL cluster on 127.0.0.1 (tests, local scale-out trials).

Uses Debian's ``postgresql`` server binaries (``/usr/lib/postgresql/<v>/bin``). ``initdb``
refuses to run as root, so as root the cluster is owned by the ``postgres`` user. The cluster
runs with ``fsync=off`` in a temporary folder and is removed on :meth:`stop`.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def find_bindir() -> Path:
    """The folder holding initdb/pg_ctl, or a clear error saying how to install them."""
    env = os.environ.get("RAGROUTER_PG_BINDIR")
    candidates = [env] if env else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for cand in candidates:
        if cand and (Path(cand) / "initdb").exists():
            return Path(cand)
    raise RuntimeError("PostgreSQL server binaries not found: run 'make setup' (installs Debian 'postgresql')")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TempPostgres:
    """Start with :meth:`start`, get URLs with :meth:`url`, stop with :meth:`stop`."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="ragrouter-pg-"))
        self.datadir = self.root / "data"
        self._as_postgres = os.geteuid() == 0
        self.user = "postgres" if self._as_postgres else pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, args: list[str]) -> None:
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")

            def demote() -> None:  # pragma: no cover - runs in the child
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)

            subprocess.run(args, check=True, capture_output=True, preexec_fn=demote, cwd="/")
        else:
            subprocess.run(args, check=True, capture_output=True)

    def start(self) -> "TempPostgres":
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run([str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", self.user,
                   "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        self.server_start()
        return self

    def server_start(self) -> None:
        """Start the server on the cluster's data folder and port (again, after server_stop)."""
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c fsync=off "
                f"-c synchronous_commit=off -c full_page_writes=off -c unix_socket_directories={self.root} "
                "-c max_connections=100")
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-o", opts,
                   "-l", str(self.root / "log"), "-w", "start"])

    def server_stop(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data (an outage: every session is cut)."""
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", mode, "-w", "stop"])

    def server_running(self) -> bool:
        try:
            self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "status"])
        except subprocess.CalledProcessError:
            return False
        return True

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create database ``name`` (a copy of database ``template`` if given); its URL."""
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "stop"])
        except subprocess.CalledProcessError:
            pass
        for _ in range(20):
            try:
                shutil.rmtree(self.root)
                break
            except OSError:
                time.sleep(0.1)

    def __enter__(self) -> "TempPostgres":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
