"""The command line: store URL handling, sql output formats, status, one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from ragrouter.db import migrate

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args], capture_output=True,
                          text=True, env=full_env, cwd=cwd, timeout=120)


def test_issue_example_count_chunks_json(tmp_path):
    env = {"RAGROUTER_DB": f"duckdb:///{tmp_path / 'x.duckdb'}"}
    assert run_cli("db", "upgrade", env=env).returncode == 0
    out = run_cli("sql", "select count(*) as n from chunks", "--format", "json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"n": 0}]
    assert run_cli("db", "downgrade", "base", env=env).returncode == 0
    up = run_cli("db", "upgrade", env=env)
    assert up.returncode == 0 and f"store at revision {migrate.head_revision()}" in up.stdout


def test_default_store_is_duckdb_file_in_working_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAGROUTER_DB"}
    out = subprocess.run([sys.executable, str(REPO / "cli.py"), "db", "upgrade"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ragrouter.duckdb").exists()


def test_sql_formats_and_file(tmp_path):
    env = {"RAGROUTER_DB": f"duckdb:///{tmp_path / 'x.duckdb'}"}
    run_cli("db", "upgrade", env=env)
    csv_out = run_cli("sql", "select 1 as a, 'x' as b", "--format", "csv", env=env)
    assert csv_out.stdout.strip().splitlines() == ["a,b", "1,x"]
    table = run_cli("sql", "select 1 as a", env=env)
    assert "(1 row)" in table.stdout
    sql_file = tmp_path / "q.sql"
    sql_file.write_text("select 2 as two;\n")
    js = run_cli("sql", "-f", str(sql_file), "--format", "json", env=env)
    assert json.loads(js.stdout) == [{"two": 2}]


def test_sql_error_is_one_line_and_nonzero(tmp_path):
    env = {"RAGROUTER_DB": f"duckdb:///{tmp_path / 'x.duckdb'}"}
    run_cli("db", "upgrade", env=env)
    out = run_cli("sql", "select * from no_such_table", env=env)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "no_such_table" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_status_json_zeros_on_empty_store(tmp_path):
    env = {"RAGROUTER_DB": f"duckdb:///{tmp_path / 'x.duckdb'}"}
    assert run_cli("status", env=env).returncode == 2  # only db upgrade (or --create) makes a store
    assert not (tmp_path / "x.duckdb").exists()
    out = run_cli("--create", "status", "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["tokens"] == []
    assert all(s["done"] == 0 and s["failed"] == 0 for s in data["stages"])


def test_sql_against_postgres(pg_url):
    env = {"RAGROUTER_DB": pg_url}
    assert run_cli("db", "upgrade", env=env).returncode == 0
    out = run_cli("sql", "select count(*) as n from chunks", "--format", "json", env=env)
    assert json.loads(out.stdout) == [{"n": 0}]
    assert run_cli("db", "downgrade", "base", env=env).returncode == 0
    assert run_cli("db", "upgrade", env=env).returncode == 0


def test_bad_config_names_the_file_and_setting(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("roles:\n  judge: nowhere\n")
    out = run_cli("--config", str(cfg), "--db", f"duckdb:///{tmp_path / 'x.duckdb'}", "status")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.yaml" in lines[0] and "roles.judge" in lines[0] and "nowhere" in lines[0]
    assert not (tmp_path / "x.duckdb").exists() or "Traceback" not in out.stderr


def test_api_key_in_config_is_refused(tmp_path):
    from ragrouter.config import Config, ConfigError

    cfg = tmp_path / "k.yaml"
    cfg.write_text("backends:\n  openai:\n    api_key: sk-secret\n")
    with pytest.raises(ConfigError, match=r"backends.openai.api_key") as err:
        Config.load(cfg, env={})
    assert "sk-secret" not in str(err.value)


def test_locked_duckdb_file_gives_one_line_with_pid(tmp_path):
    path = tmp_path / "locked.duckdb"
    env = {"RAGROUTER_DB": f"duckdb:///{path}"}
    run_cli("db", "upgrade", env=env)
    holder = subprocess.Popen([sys.executable, "-c",
                               f"import duckdb, time; c = duckdb.connect({str(path)!r}); "
                               "print('ready', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        for args in (["status"], ["sql", "select 1"], ["db", "current"], ["db", "upgrade"]):
            out = run_cli(*args, env=env)
            assert out.returncode == 2, (args, out.stderr)
            lines = out.stderr.strip().splitlines()
            assert len(lines) == 1, out.stderr
            assert f"locked by process {holder.pid}" in lines[0]
            assert "Traceback" not in out.stderr
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.2)
    assert run_cli("status", env=env).returncode == 0


def _all_command_paths():
    from ragrouter.cli import cli

    def walk(cmd, path):
        yield path
        if isinstance(cmd, click.Group):  # the root group loads each command's module when asked
            ctx = click.Context(cmd)
            for name in sorted(cmd.list_commands(ctx)):
                yield from walk(cmd.get_command(ctx, name), path + [name])

    return list(walk(cli, []))


def test_a_command_loads_only_its_own_modules():
    """The root group imports a command's module when that command runs: `sql` and `status` do
    not load scipy, the paradigms or the decision rule (every command used to, about a second of
    start-up on each call), `run` does not load scipy.stats until a stage needs it, and --help
    still lists every command in pipeline order."""
    light = ("scipy", "ragrouter.decisions.budget", "ragrouter.paradigms", "ragrouter.commands.run")
    probe = "import sys\nfrom ragrouter.cli import main\nmain({args!r})\nprint(sorted(m for m in {mods!r} if m in sys.modules))"
    for args, mods in ((["sql", "--help"], light), (["status", "--help"], light), (["db", "current", "--help"], light),
                       (["run", "--help"], ("scipy.stats",))):
        out = subprocess.run([sys.executable, "-c", probe.format(args=args, mods=mods)], cwd=REPO, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().splitlines()[-1] == "[]", (args, out.stdout[-300:])
    listed = run_cli("--help").stdout
    names = re.findall(r"^  ([a-z][\w-]*)\s", listed.split("Commands:")[1], flags=re.M)
    assert names[:4] == ["db", "ingest", "run", "status"] and {"corpus", "plan", "mlflow-ui"} <= set(names)


def test_the_installed_command_names_itself_in_every_help_and_hint(tmp_path, capsys):
    """Run as the `ragrouter` console script (prog name 'ragrouter'), no --help page and no error
    hint says `python cli.py` (42 help lines did): each names the command the user invoked; run
    from the clone they keep `python cli.py`."""
    from ragrouter.cli import main

    paths = _all_command_paths()
    assert len(paths) > 30
    for path in paths:
        assert main([*path, "--help"], prog_name="ragrouter") == 0, path
        out, err = capsys.readouterr()
        assert "python cli.py" not in out + err, (path, out)
        assert f"Usage: ragrouter {' '.join(path)}".rstrip() in out, (path, out[:200])
    assert main(["run", "--help"]) == 0 and "python cli.py run" in capsys.readouterr().out
    # the console script itself, and an error hint (a corpus that does not exist)
    script = tmp_path / "ragrouter"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
                      "from ragrouter.cli import entry\nentry()\n")
    script.chmod(0o755)
    env = {**os.environ, "RAGROUTER_DB": f"duckdb:///{tmp_path / 's.duckdb'}"}
    assert subprocess.run([str(script), "db", "upgrade"], env=env, cwd=tmp_path, timeout=120).returncode == 0
    out = subprocess.run([str(script), "ask", "--corpus", "nope", "why?"], env=env, cwd=tmp_path, timeout=120,
                         capture_output=True, text=True)
    assert out.returncode == 2 and "python cli.py" not in out.stderr and "ragrouter " in out.stderr, out.stderr
    clone = run_cli("ask", "--corpus", "nope", "why?", env={"RAGROUTER_DB": env["RAGROUTER_DB"]})
    assert clone.returncode == 2 and "python cli.py" in clone.stderr, clone.stderr


def test_every_user_error_named_by_module_is_an_exception_class():
    """The errors printed as one line with exit 2 are named by module (a command imports only its
    own modules): each name resolves to an exception class, so a rename cannot drop one silently."""
    import importlib

    from ragrouter.commands import common

    for module, names in common.USER_ERROR_NAMES.items():
        for name in names:
            cls = getattr(importlib.import_module(module), name)
            assert isinstance(cls, type) and issubclass(cls, Exception), (module, name)
            exc = cls.__new__(cls)  # some take several arguments; being one is what counts here
            assert common.is_user_error(exc), (module, name)
    assert not common.is_user_error(ValueError("x")) and not common.is_user_error(KeyError("x"))
