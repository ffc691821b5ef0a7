"""`sql` without --write is read-only whatever the string holds (issue #31, item 2).

PostgreSQL: transaction control, SET and every other non-query is refused before it reaches
the server, the query runs as a prepared statement (one command) in a READ ONLY transaction
that is rolled back — the store's dump (rows, sequences, schema) is unchanged. DuckDB: the file
is opened read-only in DuckDB's sandbox — no file written or read beside it, no extension
installed or loaded, no SET — and the file stays byte-for-byte the same."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.test_store_cli import one_line, run_fast, seeded

PG_ATTACKS = [
    "select 1; commit; delete from corpora",
    "rollback; drop table llm_calls cascade",
    "begin read write; delete from documents; commit",
    "select 1; end; create table evil (a int)",
    "commit",
    "END",
    "abort; delete from corpora",
    "/* a comment */ commit; delete from corpora",
    "-- a comment\ncommit; delete from corpora",
    "(commit)",
    "start transaction read write; delete from corpora; commit",
    "set default_transaction_read_only = off",
    "set session characteristics as transaction read write",
    "reset all",
    "prepare transaction 'x'",
    "savepoint s; release s; delete from corpora",
    "do $$ begin delete from corpora; commit; end $$",
    "copy corpora to '/tmp/ragrouter-readonly-copy.csv'",
    "delete from corpora",
    "with d as (delete from documents returning *) select count(*) from d",
    "select * into evil from corpora",
    "select nextval('corpora_id_seq')",
    "select setval('corpora_id_seq', 1000)",
    "select 1 from corpora for update",
    "explain analyze delete from corpora",
    "select set_config('default_transaction_read_only', 'off', false); delete from corpora",
    "select 1; select 2",
    "vacuum",
    "lock table corpora",
    "truncate unit_failures",
    "checkpoint",
    "discard all",
    "listen x",
    "notify x",
    "call nothing()",
    "selec 1; commit; delete from corpora",
]
# Queries the server runs in the read-only transaction: whatever they did is rolled back.
PG_ROLLED_BACK = ["select lo_from_bytea(0, 'x') > 0 as made", "select pg_advisory_lock(42) is null as locked"]


def _pg_dump(url: str) -> str:
    """The whole database as SQL (schema, rows, sequence values) — the store unchanged = equal."""
    from sqlalchemy.engine import make_url

    from ragrouter.db.pgtemp import find_bindir

    u = make_url(url)
    out = subprocess.run([str(find_bindir() / "pg_dump"), "-h", u.host, "-p", str(u.port), "-U", u.username,
                          "--no-owner", u.database], capture_output=True, text=True, check=True, cwd="/")
    return "\n".join(line for line in out.stdout.splitlines()  # \restrict KEY: random per dump
                     if not line.startswith(("\\restrict", "\\unrestrict")))


def test_postgres_sql_without_write_commits_nothing(pg_url, tmp_path):
    seeded(pg_url)
    env = {"RAGROUTER_DB": pg_url}
    # the first read-only sql of a superuser makes the reader role and grants it SELECT (ACLs, no rows)
    assert run_fast("sql", "select 1", env=env).returncode == 0
    before = _pg_dump(pg_url)
    assert "some text" in before
    for stmt in PG_ATTACKS:
        out = run_fast("sql", "--", stmt, env=env)
        line = one_line(out, 2, "SQL error")
        assert "--write" in line or "read-only" in line or "syntax error" in line, (stmt, line)
        assert _pg_dump(pg_url) == before, stmt
    for stmt in PG_ROLLED_BACK:
        out = run_fast("sql", "--", stmt, env=env)
        assert out.returncode == 0, (stmt, out.stderr)
        assert _pg_dump(pg_url) == before, stmt
    # set_config in one call does not outlive it: the next call is as read-only as ever
    assert run_fast("sql", "select set_config('default_transaction_read_only', 'off', false)",
                    env=env).returncode == 0
    one_line(run_fast("sql", "delete from corpora", env=env), 2, "--write")
    assert not os.path.exists("/tmp/ragrouter-readonly-copy.csv")
    assert _pg_dump(pg_url) == before
    # queries still work: comments, parentheses, WITH, VALUES, SHOW, EXPLAIN, now() (pytz)
    for stmt, expect in (("/* c */ -- x\n select name from corpora", "c"),
                         ("(select count(*) from documents)", "1"),
                         ("with x as (select 2 as n) select n from x", "2"),
                         ("values (7)", "7"), ("show transaction_read_only", "on"),
                         ("explain select * from corpora", "Seq Scan"),
                         ("select extract(year from now()) > 2000 as ok", "True")):
        out = run_fast("sql", stmt, "--format", "csv", env=env)
        assert out.returncode == 0, (stmt, out.stderr)
        assert expect in out.stdout, (stmt, out.stdout)
    assert _pg_dump(pg_url) == before
    # --write still writes
    assert run_fast("sql", "--write", "delete from unit_failures", env=env).returncode == 0
    assert _pg_dump(pg_url) != before


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_duckdb_sql_without_write_writes_no_file_and_loads_nothing(tmp_path, monkeypatch):
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    url = f"duckdb:///{store_dir / 'store.duckdb'}"
    seeded(url)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    env = {"RAGROUTER_DB": url, "HOME": str(home)}
    before = _files(tmp_path)
    attacks = [
        f"COPY (select * from documents) TO '{tmp_path / 'ledger.csv'}'",
        "COPY documents TO 'relative.parquet' (FORMAT parquet)",
        f"EXPORT DATABASE '{tmp_path / 'exported'}'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "FORCE INSTALL json",
        f"ATTACH '{tmp_path / 'new.duckdb'}' AS n",
        "SET enable_external_access = true",
        f"SET enable_external_access = true; COPY documents TO '{tmp_path / 'x.csv'}'",
        "RESET enable_external_access",
        "SET autoinstall_known_extensions = true",
        f"select * from read_csv('{other}')",
        f"select * from '{other}'",
        "select * from glob('*')",
        "delete from corpora",
        "select 1; delete from documents",
        "create table evil (a int)",
        "drop table llm_calls",
        "update unit_failures set attempts = 9",
    ]
    for stmt in attacks:
        out = run_fast("sql", "--", stmt, env=env)
        line = one_line(out, 2, "SQL error", "read-only")
        assert _files(tmp_path) == before, (stmt, line)
    for stmt, expect in (("select name from corpora", "c"), ("select year(now()) > 2000 as ok", "True"),
                         ("select {'k': 1} as s", "k"), ("FROM documents SELECT external_id", "d1")):
        out = run_fast("sql", stmt, "--format", "csv", env=env)
        assert out.returncode == 0, (stmt, out.stderr)
        assert expect in out.stdout
    assert _files(tmp_path) == before
    # --write documents what it allows: files beside the store
    out = run_fast("sql", "--write", f"COPY (select 1 as a) TO '{tmp_path / 'ok.csv'}'", env=env)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ok.csv").read_text().splitlines() == ["a", "1"]


@pytest.mark.parametrize("stmt, word", [("commit", "commit"), ("/* x /* nested */ */ (( select", "select"),
                                        ("-- only a comment", ""), ("  WITH x", "with"), ("Values(1)", "values")])
def test_first_keyword_skips_comments_and_parentheses(stmt, word):
    from ragrouter.commands.sql import first_keyword

    assert first_keyword(stmt) == word


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_an_sql_error_keeps_the_databases_own_hint_on_one_line(backend, duck_url, pg_url):
    """A misspelt column or table: the one error line carries what the database suggests
    (DuckDB's 'Candidate bindings' / 'Did you mean', PostgreSQL's HINT) — issue 32 item 5."""
    url = duck_url if backend == "duckdb" else pg_url
    seeded(url)
    env = {"RAGROUTER_DB": url}
    line = one_line(run_fast("sql", "select latency_ms from llm_calls", env=env), 2, "SQL error", "latency_ms")
    assert "latency_s" in line, line  # the column it meant, as the database names it
    if backend == "duckdb":
        assert "Candidate bindings" in line
        table = one_line(run_fast("sql", "select * from llm_cals", env=env), 2, "SQL error")
        assert 'Did you mean "llm_calls"' in table, table
    else:
        assert "HINT" in line


PG_BEYOND = ["select pg_read_file('/etc/passwd')", "select pg_read_binary_file('/etc/passwd')",
             "select * from pg_ls_dir('.')", "select pg_stat_file('postgresql.conf')",
             "select pg_terminate_backend({pid})", "select pg_cancel_backend({pid})", "select lo_import('/etc/passwd')",
             "select lo_export(1, '/tmp/ragrouter-lo-export')", "select pg_sleep(30)", "select pg_reload_conf()",
             'select pg_catalog."pg_read_file"(\'/etc/passwd\')', "select dblink_connect('host=x')",
             # leaving the reader role, then running SQL text with the session's own rights
             "select set_config('role', 'postgres', true), query_to_xml('select pg_read_file(''/etc/passwd'')', "
             "true, true, '')",
             "select set_config('session_authorization', 'postgres', true)", "select set_config(lower('ROLE'), 'x', true)",
             "select ts_stat('select pg_read_file(''/etc/passwd'')::tsvector')",
             'select U&"\\0070g_read_file"(\'/etc/passwd\')']


def test_postgres_read_only_sql_of_a_superuser_reaches_no_file_and_no_other_session(pg_url, monkeypatch):
    """Connected as a superuser (the test cluster's postgres), a READ ONLY transaction alone
    would let a query read the server's files and end other sessions: they are refused by name
    with one line, and behind that the query runs as the reader role, which has no right to
    them (shown with the names let through); the other session lives on, tables and views read."""
    import psycopg
    from sqlalchemy.engine import make_url

    from ragrouter.commands import sql

    seeded(pg_url)
    env = {"RAGROUTER_DB": pg_url}
    u = make_url(pg_url)
    other = psycopg.connect(f"host={u.host} port={u.port} user={u.username} dbname={u.database}", autocommit=True)
    try:
        pid = other.execute("select pg_backend_pid()").fetchone()[0]
        assert other.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()[0]
        assert run_fast("sql", "select 1", env=env).returncode == 0  # the reader role made, its grants given
        before = _pg_dump(pg_url)
        for stmt in PG_BEYOND:
            stmt = stmt.format(pid=pid)
            out = run_fast("sql", "--", stmt, env=env)
            line = one_line(out, 2, "SQL error", "--write")
            assert "root:" not in out.stdout + out.stderr, (stmt, out.stdout)
            assert "refuses" in line or 'U&"' in line, (stmt, line)
        # the wall behind the names: the reader role itself may not
        monkeypatch.setattr(sql, "check_pg_functions", lambda statement: None)
        for stmt, says in (("select pg_read_file('/etc/passwd')", "permission denied for function pg_read_file"),
                           ("select * from pg_ls_dir('.')", "permission denied for function pg_ls_dir"),
                           (f"select pg_terminate_backend({pid})", "superuser"),
                           (f"select pg_cancel_backend({pid})", "superuser"),
                           ("select lo_import('/etc/passwd')", "permission denied for function lo_import")):
            out = run_fast("sql", "--", stmt, env=env)
            line = one_line(out, 2, "SQL error", says, sql.READER_ROLE)
            assert "root:" not in out.stdout, (stmt, out.stdout)
        monkeypatch.undo()
        # the other session lives on
        assert other.execute("select 42").fetchone()[0] == 42
        assert other.execute("select pg_backend_pid()").fetchone()[0] == pid
        # tables, views, sequences and plain settings still read, as the reader role
        for stmt, expect in (("select count(*) as n from documents", [{"n": 1}]),
                             ("select name from corpora", [{"name": "c"}]),
                             ("select count(*) as n from v_tokens_by_stage", [{"n": 0}]),
                             ("select current_user as u, session_user <> current_user as switched",
                              [{"u": sql.READER_ROLE, "switched": True}]),
                             ("select last_value >= 1 as seq from corpora_id_seq", [{"seq": True}]),
                             ("select set_config('statement_timeout', '5s', true) as t", [{"t": "5s"}]),
                             ("select 'pg_read_file(x)' as s", [{"s": "pg_read_file(x)"}])):
            out = run_fast("sql", stmt, "--format", "json", env=env)
            assert out.returncode == 0, (stmt, out.stderr)
            assert json.loads(out.stdout) == expect, (stmt, out.stdout)
        assert _pg_dump(pg_url) == before
    finally:
        other.close()


def test_postgres_read_only_sql_of_a_plain_user_refuses_by_name_and_reads(pg_cluster):
    """A store owned by a user that may not create roles (nor SET ROLE to the reader): the
    query runs with that user's rights, the names are refused all the same."""
    import psycopg

    dsn = f"host=127.0.0.1 port={pg_cluster.port} user={pg_cluster.user} dbname=postgres"
    with psycopg.connect(dsn, autocommit=True) as admin:
        if not admin.execute("select 1 from pg_roles where rolname = 'ragrouter_plain'").fetchone():
            admin.execute("CREATE ROLE ragrouter_plain LOGIN NOSUPERUSER NOCREATEROLE")
        admin.execute("CREATE DATABASE t_plain_owner OWNER ragrouter_plain")
    url = f"postgresql+psycopg://ragrouter_plain@127.0.0.1:{pg_cluster.port}/t_plain_owner"
    seeded(url)
    env = {"RAGROUTER_DB": url}
    one_line(run_fast("sql", "select pg_read_file('/etc/passwd')", env=env), 2, "refuses pg_read_file()")
    out = run_fast("sql", "select count(*) as n, current_user as u from documents", "--format", "json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"n": 1, "u": "ragrouter_plain"}]


# Objects a user could make with --write that act beyond the store when read-only sql uses them
# (each made by a superuser, the store's owner here): a SECURITY DEFINER function deleting through
# dblink, a SECURITY DEFINER wrapper of pg_read_file, a file_fdw foreign table over /etc/passwd, a
# store view replaced to read a file, a view made with --write, an operator and a cast and a domain
# whose functions read a file, and a row-level policy on a store table calling the wrapper.
PG_WRITE_OBJECTS = [
    "create extension if not exists dblink",
    "create extension if not exists file_fdw",
    "create function evil_delete() returns text language sql security definer as "
    "$$ select dblink_exec('dbname=' || current_database() || ' port=' || current_setting('port') || "
    "' host=127.0.0.1 user=' || current_user, 'delete from queries') $$",
    "create function read_passwd() returns text language sql security definer as $$ select pg_read_file('/etc/passwd') $$",
    "create function plain_read(t text) returns text language sql as $$ select t $$",
    "create server files foreign data wrapper file_fdw",
    "create foreign table passwd (line text) server files options (filename '/etc/passwd')",
    "create view my_view as select read_passwd() as p",
    "drop view v_tokens_by_stage cascade",
    "create view v_tokens_by_stage as select pg_read_file('/etc/passwd') as stage",
    "create function passwd_op(text, text) returns text language sql security definer as "
    "$$ select pg_read_file('/etc/passwd') $$",
    "create operator ### (leftarg = text, rightarg = text, function = passwd_op)",
    "create domain checked_text as text check (read_passwd() is not null)",
]
PG_WRITE_ATTACKS = [
    ("select evil_delete()", "function evil_delete()"),
    ("select read_passwd()", "function read_passwd()"),
    ("select * from read_passwd()", "function read_passwd()"),
    ("select public.read_passwd()", "function read_passwd()"),
    ('select "read_passwd"()', "function read_passwd()"),
    ("select plain_read('x')", "function plain_read()"),
    ("select dblink('dbname=postgres', 'select 1')", "refuses dblink()"),
    ("select 'a' ### 'b'", "operator ###"),
    ("select 'x'::checked_text", "domain checked_text"),
    ("select * from passwd", "permission denied"),
    ("select * from my_view", "permission denied"),
    ("select * from v_tokens_by_stage", "permission denied"),
]


def test_postgres_read_only_sql_does_not_act_through_objects_made_with_write(pg_url):
    """Objects made earlier with --write (functions, foreign tables, views, operators, domains)
    give read-only sql nothing beyond the store: every attack is one line, exit 2, no file read,
    no row deleted; the store's own tables and untouched views still read."""
    seeded(pg_url)
    env = {"RAGROUTER_DB": pg_url}
    with_query = ("insert into queries (corpus_id, external_id, origin, qtype, question, answer, status) "
                  "select id, 'q1', 'imported', 'factual', 'what?', 'this', 'accepted' from corpora")
    for stmt in [with_query] + PG_WRITE_OBJECTS:
        out = run_fast("sql", "--write", stmt, env=env)
        assert out.returncode == 0, (stmt, out.stderr)
    assert run_fast("sql", "select 1", env=env).returncode == 0  # the reader's grants settled (ACLs, no rows)
    before = _pg_dump(pg_url)
    for stmt, says in PG_WRITE_ATTACKS:
        out = run_fast("sql", stmt, env=env)
        line = one_line(out, 2, "SQL error", says)
        assert "root:" not in out.stdout + out.stderr, (stmt, out.stdout)
    assert _pg_dump(pg_url) == before
    out = run_fast("sql", "select count(*) as n from queries", "--format", "json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout) == [{"n": 1}], out.stderr
    out = run_fast("sql", "select count(*) as n from v_accuracy_by_type", "--format", "json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout) == [{"n": 0}], out.stderr
    # the replaced view back as the migrations make it: readable again
    assert run_fast("db", "upgrade", env=env).returncode == 0
    for stmt in ("select count(*) as n from v_tokens_by_stage", "select count(*) as n from documents"):
        out = run_fast("sql", stmt, "--format", "json", env=env)
        assert out.returncode == 0, (stmt, out.stderr)
