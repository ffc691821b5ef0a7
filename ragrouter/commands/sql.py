"""`cli.py sql`: ad-hoc SQL against the store (DuckDB or PostgreSQL alike).

The statement goes to the database driver verbatim (no SQLAlchemy ``text()`` parsing, so
``':x'`` and DuckDB struct literals ``{'k': 1}`` work). Without ``--write`` it runs read-only:
a DuckDB file is opened read-only (other readers and notebooks keep it open meanwhile) with
DuckDB's external access, extension auto-loading and configuration changes disabled, so no
file is written or read beside the store; on PostgreSQL the string must be one query, sent as
a prepared statement in a ``READ ONLY`` transaction that is rolled back (``_execute_pg_read_only``).

A READ ONLY transaction does not stop a superuser's query from reading the server's files
(``pg_read_file``), ending other sessions (``pg_terminate_backend``) and the like, so on
PostgreSQL the query also runs as :data:`READER_ROLE`, a NOLOGIN role that may read the store's
tables and views and nothing else (made, and granted SELECT on what it lacks, on first use, by a
user that may); and the functions that act beyond the store, or run SQL from text, are refused
by name before anything is sent (:func:`check_pg_functions`), which is all there is where the
role cannot be made (a standby, a user that may not create roles).
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from ragrouter.commands.common import Ctx, fail, pass_ctx, render_rows
from ragrouter.db import migrate
from ragrouter.db.engine import StoreError, duckdb_path, forget, forget_sandbox, make_engine, resolve_url


_HINT_PREFIXES = ("candidate bindings:", "did you mean", "hint:", "perhaps you meant")


def _db_message(exc: BaseException) -> str:
    """The database's error as one line: its first line plus its own hint (DuckDB's
    ``Candidate bindings: …`` / ``Did you mean …?``, PostgreSQL's HINT), never the rest."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else orig.__class__.__name__
    hints = [line for line in lines[1:] if line.lower().startswith(_HINT_PREFIXES)]
    diag_hint = getattr(getattr(orig, "diag", None), "message_hint", None)  # psycopg
    if diag_hint and not any(diag_hint in h for h in hints):
        hints.append(f"HINT: {diag_hint}")
    if "did you mean" in first.lower():
        hints = [h for h in hints if h not in first]
    return first + (f" ({'; '.join(hints)})" if hints else "")


# What read-only ``sql`` runs on PostgreSQL: one query. Everything else — transaction control
# (COMMIT, END, ROLLBACK, BEGIN, PREPARE TRANSACTION …), SET/RESET, DO, CALL, COPY, LOCK … —
# is refused before it reaches the server.
PG_READ_KEYWORDS = ("select", "with", "values", "table", "show", "explain")
# The first words of PostgreSQL's commands (its SQL Commands reference); a string starting with
# any other word is a syntax error the server reports (sent as it is, so a typo reads as one).
PG_COMMAND_KEYWORDS = frozenset(
    "abort alter analyze analyse begin call checkpoint close cluster comment commit copy create "
    "deallocate declare delete discard do drop end execute explain fetch grant import insert listen "
    "load lock merge move notify prepare reassign refresh reindex release reset revoke rollback "
    "savepoint security select set show start table truncate unlisten update vacuum values with".split())


def first_keyword(statement: str) -> str:
    """The first word of a statement, past whitespace, comments (``--``, nested ``/* */``)
    and opening parentheses; lower case ('' when there is none)."""
    i, n = 0, len(statement)
    while i < n:
        ch = statement[i]
        if ch.isspace() or ch == "(":
            i += 1
        elif statement.startswith("--", i):
            j = statement.find("\n", i)
            i = n if j < 0 else j + 1
        elif statement.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if statement.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif statement.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        else:
            break
    j = i
    while j < n and (statement[j].isalnum() or statement[j] == "_"):
        j += 1
    return statement[i:j].lower()


class ReadOnlyRefused(ValueError):
    """A read-only ``sql`` string that is not one query (PostgreSQL)."""


def check_pg_read_only(statement: str) -> None:
    word = first_keyword(statement)
    if word in PG_COMMAND_KEYWORDS and word not in PG_READ_KEYWORDS:
        raise ReadOnlyRefused(
            f"sql without --write runs one query ({', '.join(w.upper() for w in PG_READ_KEYWORDS)}); "
            f"{(word or statement[:20]).upper()!s} is refused (add --write to change the store)")


# Functions read-only sql refuses by name on PostgreSQL (exact names, or a prefix before '*'),
# and why: what they do reaches beyond reading the store.
_PG_REFUSED = {
    "reads or writes the server's files": (
        "pg_read_file", "pg_read_binary_file", "pg_stat_file", "pg_ls_*", "pg_file_*", "pg_logdir_ls",
        "pg_current_logfile", "lo_import", "lo_export"),
    "acts on other sessions or on the server": (
        "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_promote",
        "pg_log_backend_memory_contexts", "pg_switch_wal", "pg_backup_*", "pg_start_backup", "pg_stop_backup",
        "pg_create_*", "pg_drop_replication_slot", "pg_replication_*", "pg_copy_*", "pg_wal_replay_*",
        "pg_stat_reset*", "pg_import_system_collations"),
    "sleeps, holding a server connection and its snapshot": ("pg_sleep", "pg_sleep_for", "pg_sleep_until"),
    "reaches other servers": ("dblink*",),
    "runs SQL given as text": ("query_to_xml", "query_to_xml_and_xmlschema", "query_to_xmlschema", "cursor_to_xml",
                               "cursor_to_xmlschema", "ts_stat", "ts_rewrite"),
}
# set_config may change any setting but these (which would leave READER_ROLE for the session's own)
_PG_GUARDED_SETTINGS = ("role", "session_authorization")


def _why_refused(name: str) -> str | None:
    for why, names in _PG_REFUSED.items():
        for pattern in names:
            if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1])):
                return why
    return None


def _pg_tokens(statement: str):
    """(kind, text) of a PostgreSQL statement, comments and whitespace dropped: kind 'name' (an
    unquoted identifier in lower case, or a quoted one's text), 'string' (a plain '…' literal's
    text), 'other_string' (E'…', U&'…', B'…', X'…', $tag$…$tag$), 'unicode_name' (U&"…") or
    'punct' (one character)."""
    i, n = 0, len(statement)
    while i < n:
        ch = statement[i]
        if ch.isspace():
            i += 1
        elif statement.startswith("--", i):
            j = statement.find("\n", i)
            i = n if j < 0 else j + 1
        elif statement.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if statement.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif statement.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif ch in "'\"":
            unicode = statement[max(0, i - 2):i].lower() == "u&"
            prefix = ch == "'" and i > 0 and (statement[i - 1].isalpha() or unicode)  # E'…', B'…', U&'…'
            escapes = prefix and statement[i - 1] in "eE"
            j = i + 1
            while j < n:
                if escapes and statement[j] == "\\":
                    j += 2
                elif statement.startswith(ch * 2, j):
                    j += 2
                elif statement[j] == ch:
                    break
                else:
                    j += 1
            body = statement[i + 1:j].replace(ch * 2, ch)
            if ch == '"':
                yield ("unicode_name" if unicode else "name"), body.lower()
            else:
                yield ("other_string" if prefix else "string"), body
            i = j + 1
        elif ch == "$" and (m := _DOLLAR.match(statement, i)):
            j = statement.find(m.group(0), m.end())
            yield "other_string", ""
            i = n if j < 0 else j + len(m.group(0))
        elif ch.isalpha() or ch == "_" or ord(ch) > 127:
            j = i
            while j < n and (statement[j].isalnum() or statement[j] in "_$" or ord(statement[j]) > 127):
                j += 1
            if not (j < n and statement[j] == "'"):  # E'…', B'…', X'…' are literals' prefixes, not names
                yield "name", statement[i:j].lower()
            i = j
        else:
            yield "punct", ch
            i += 1


_DOLLAR = re.compile(r"\$(?:[A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")


def check_pg_functions(statement: str) -> None:
    """Refuse (ReadOnlyRefused) a read-only PostgreSQL query that calls a function of
    :data:`_PG_REFUSED`, a ``U&"…"`` name (it could spell one), or ``set_config`` on anything but
    a plain literal naming a setting other than role / session_authorization."""
    tokens = list(_pg_tokens(statement))
    for k, (kind, value) in enumerate(tokens):
        call = k + 1 < len(tokens) and tokens[k + 1] == ("punct", "(")
        if kind == "unicode_name":
            raise ReadOnlyRefused('sql without --write does not take U&"…" names; write the name plainly')
        if kind != "name" or not call:
            continue
        why = _why_refused(value)
        if why is not None:
            raise ReadOnlyRefused(f"sql without --write refuses {value}(): it {why} "
                                  "(--write runs it with the store user's own rights)")
        if value == "set_config":
            arg = tokens[k + 2] if k + 2 < len(tokens) else ("punct", "")
            if arg[0] != "string" or arg[1].strip().lower() in _PG_GUARDED_SETTINGS:
                raise ReadOnlyRefused("sql without --write refuses set_config() of role or session_authorization "
                                      "(or of a setting not named by a plain string literal)")


# The role read-only sql runs its query as on PostgreSQL: NOLOGIN, SELECT on the store's own
# tables, views and sequences (those the migrations make), nothing else: no foreign table, no
# table or view made later with --write, no file, session or server functions.
READER_ROLE = "ragrouter_sql_reader"

# The reader may read, of the names the migrations make: plain and partitioned tables without
# row-level security (a policy may call any function, as the reader), the store's sequences, and
# the store's views whose rules use only such relations (or such views) and catalog functions
# that are not SECURITY DEFINER — a view runs with its owner's rights, so a view replaced with
# --write could otherwise read the server's files.
_RELATIONS_SQL = """
SELECT c.oid, c.relname, c.relkind, c.relrowsecurity FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()
"""
_VIEW_USES_SQL = """
SELECT r.ev_class, d.refclassid = 'pg_class'::regclass, d.refobjid,
       d.refclassid = 'pg_proc'::regclass AND EXISTS (
         SELECT 1 FROM pg_proc p JOIN pg_namespace pn ON pn.oid = p.pronamespace
         WHERE p.oid = d.refobjid AND (pn.nspname <> 'pg_catalog' OR p.prosecdef OR p.proname = ANY(%(refused)s)))
FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
JOIN pg_class v ON v.oid = r.ev_class JOIN pg_namespace n ON n.oid = v.relnamespace
WHERE n.nspname = current_schema() AND v.relkind = 'v' AND d.refobjid <> r.ev_class
"""


def _readable(cur, tables: set[str], seqs: set[str]) -> set[str]:
    """The names of the schema's relations the reader may read (see above)."""
    rels = {oid: (name, kind, rls) for oid, name, kind, rls in cur.execute(_RELATIONS_SQL)}
    ok = {oid for oid, (name, kind, rls) in rels.items()
          if (kind in ("r", "p") and name in tables and not rls) or (kind == "S" and name in seqs)}
    views = {oid for oid, (name, kind, _) in rels.items() if kind == "v" and name in tables}
    uses: dict[int, list[tuple[bool, int, bool]]] = {oid: [] for oid in views}
    for view, on_rel, ref, bad_fn in cur.execute(_VIEW_USES_SQL, {"refused": _refused_names()}):
        if view in uses:
            uses[view].append((on_rel, ref, bad_fn))
    changed = True
    while changed:  # a view is readable once everything it reads is
        changed = False
        for view in sorted(views - ok):
            if all(not bad_fn and (not on_rel or ref in ok) for on_rel, ref, bad_fn in uses[view]):
                ok.add(view)
                changed = True
    return {rels[oid][0] for oid in ok if _why_refused(rels[oid][0]) is None}


_GRANTED_SQL = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'm', 'p', 'f', 'S')
  AND has_table_privilege(%(role)s, c.oid, 'SELECT')
"""


def _refused_names() -> list[str]:
    """The exact names of :data:`_PG_REFUSED` (prefixes are matched in Python)."""
    return [n for names in _PG_REFUSED.values() for n in names if not n.endswith("*")]


def reader_role(conn) -> bool:
    """Make :data:`READER_ROLE` ready on a psycopg connection (outside a transaction): create it,
    grant it SELECT on the store's own relations it may read (:func:`_readable`) and revoke
    SELECT on everything else of the schema (foreign tables, relations made with --write, a view
    replaced to call a function beyond the store) — one short transaction, only when the grants
    differ; True when this session can ``SET ROLE`` to it. False where that cannot be (not a
    superuser, a standby): then the query runs with the store user's rights and only the checks
    by name and by catalog (:func:`check_pg_catalog`) stand."""
    import psycopg
    from psycopg import sql as pgsql

    tables, seqs = migrate.store_relations()
    for _ in range(3):  # another sql may create the role at the same moment
        try:
            with conn.transaction():
                cur = conn.cursor()
                readable = _readable(cur, tables, seqs)
                exists = cur.execute("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s)",
                                     (READER_ROLE,)).fetchone()[0]
                if exists:
                    usage = cur.execute("SELECT has_schema_privilege(%s, current_schema(), 'USAGE')",
                                        (READER_ROLE,)).fetchone()[0]
                    granted = {r[0] for r in cur.execute(_GRANTED_SQL, {"role": READER_ROLE})}
                else:
                    cur.execute(f"CREATE ROLE {READER_ROLE} NOLOGIN NOINHERIT")
                    usage, granted = False, set()
                schema = _schema(cur)
                if not usage:
                    cur.execute(f"GRANT USAGE ON SCHEMA {schema} TO {READER_ROLE}")
                for name, verb in [(n, "GRANT") for n in sorted(readable - granted)] + \
                                  [(n, "REVOKE") for n in sorted(granted - readable)]:
                    what = pgsql.SQL("{} SELECT ON {}.{} {} {}").format(
                        pgsql.SQL(verb), pgsql.SQL(schema), pgsql.Identifier(name),
                        pgsql.SQL("TO" if verb == "GRANT" else "FROM"), pgsql.SQL(READER_ROLE))
                    cur.execute(what)
            break
        except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
            continue
        except psycopg.Error:
            break  # no right to create roles or to grant: whatever is there is tried below
    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL ROLE {READER_ROLE}")
            ok = conn.execute("SELECT has_schema_privilege(current_schema(), 'USAGE')").fetchone()[0]
    except psycopg.Error:
        return False
    return bool(ok)


# What a query may call on PostgreSQL, read from the server's catalog at the moment it runs: a
# function named in the query that exists outside pg_catalog or is SECURITY DEFINER (made with
# --write: it runs with its owner's rights, or reaches other servers as dblink does), an operator
# or a cast made outside the catalog, a domain made outside it (its CHECK may call a function).
_CATALOG_SQL = """
SELECT 'function ' || p.proname || '()' FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
  WHERE p.proname = ANY(%(calls)s) AND (n.nspname <> 'pg_catalog' OR p.prosecdef)
UNION ALL
SELECT 'operator ' || o.oprname FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
  WHERE n.nspname <> 'pg_catalog' AND position(o.oprname IN %(text)s) > 0
UNION ALL
SELECT 'cast to ' || format_type(c.casttarget, NULL) FROM pg_cast c JOIN pg_proc p ON p.oid = c.castfunc
  JOIN pg_namespace n ON n.oid = p.pronamespace
  WHERE (n.nspname <> 'pg_catalog' OR p.prosecdef) AND %(casts)s
UNION ALL
SELECT 'domain ' || t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
  WHERE t.typtype = 'd' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND t.typname = ANY(%(names)s)
LIMIT 1
"""


def check_pg_catalog(conn, statement: str) -> None:
    """Refuse (ReadOnlyRefused) a read-only query that would call what was made in the store
    rather than shipped with PostgreSQL (:data:`_CATALOG_SQL`), whoever runs it."""
    tokens = list(_pg_tokens(statement))
    names = sorted({v for kind, v in tokens if kind == "name"})
    calls = sorted({v for k, (kind, v) in enumerate(tokens)
                    if kind == "name" and k + 1 < len(tokens) and tokens[k + 1] == ("punct", "(")})
    bare = "".join(v if kind == "punct" else " " for kind, v in tokens)  # operators, strings blanked
    casts = "::" in bare or "cast" in names
    found = conn.execute(_CATALOG_SQL, {"calls": calls, "names": names, "text": bare,
                                        "casts": casts}).fetchone()
    if found:
        raise ReadOnlyRefused(f"sql without --write calls no {found[0]} made in the store: it is not part of "
                              "PostgreSQL's catalog or runs with its owner's rights (SECURITY DEFINER); "
                              "--write runs it with the store user's own rights")


def _schema(cur) -> str:
    """The store's schema, quoted as an identifier."""
    from psycopg import sql

    name = cur.execute("SELECT current_schema()").fetchone()[0]
    return sql.Identifier(name).as_string(cur.connection)


def _execute_pg_read_only(engine, statement: str) -> tuple[list[str], list[tuple]]:
    """One query in a READ ONLY transaction that is always rolled back, on a connection that
    is discarded afterwards. Three locks on the door: the statement must start with a query
    keyword; it is sent as a prepared statement, so the server refuses a second command in the
    string (``select 1; commit; …``); and the transaction is read-only from its first statement
    — what could end it early is refused above, and it is checked to be still open before the
    rollback. And what the query may do is what :data:`READER_ROLE` may, after the functions
    that reach beyond the store are refused by name (:func:`check_pg_functions`)."""
    check_pg_read_only(statement)
    check_pg_functions(statement)
    import psycopg

    raw = engine.raw_connection()
    try:
        conn = raw.driver_connection
        as_reader = reader_role(conn)
        with conn.transaction():
            check_pg_catalog(conn, statement)
        cursor = conn.cursor()
        cursor.execute("SET TRANSACTION READ ONLY")
        if as_reader:
            cursor.execute(f"SET LOCAL ROLE {READER_ROLE}")
        cursor.execute(statement, prepare=True)
        if conn.info.transaction_status not in (psycopg.pq.TransactionStatus.INTRANS,
                                                psycopg.pq.TransactionStatus.INERROR):
            raise ReadOnlyRefused("the statement ended the read-only transaction; refused")
        if cursor.description:
            columns = [d[0] for d in cursor.description]
            rows = [tuple(r) for r in cursor.fetchall()]
        else:
            columns, rows = [], []
    finally:
        try:
            raw.rollback()
        except Exception:  # noqa: BLE001 - the connection is discarded either way
            pass
        raw.invalidate()  # never back to the pool: nothing of this session is reused
    return columns, rows


def execute(engine, statement: str, write: bool) -> tuple[list[str], list[tuple]]:
    """Run one statement verbatim on the driver's own cursor; (columns, rows).

    Read-only unless ``write``: a DuckDB engine of a reader is opened read-only and sandboxed
    (:data:`ragrouter.db.engine.DUCKDB_SANDBOX`); on PostgreSQL see
    :func:`_execute_pg_read_only`."""
    pg = engine.dialect.name == "postgresql"  # DuckDB's driver cursor autocommits each statement
    if pg and not write:
        return _execute_pg_read_only(engine, statement)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(statement)
        if cursor.description:
            columns = [d[0] for d in cursor.description]
            rows = [tuple(r) for r in cursor.fetchall()]
        else:
            columns, rows = [], []
        if pg:
            raw.commit()
    except BaseException:
        try:
            if pg:
                raw.rollback()
        except Exception:  # noqa: BLE001 - the original error matters
            pass
        raise
    finally:
        raw.close()
    return columns, rows


def reader_engine(ctx: Ctx):
    """The engine of read-only ``sql``: a store at head (one behind is refused, not upgraded)
    with its views brought up to date by ``Ctx.engine``, then,
    for a DuckDB file, reopened read-only in DuckDB's sandbox (one configuration per file and
    process: the plain reader is closed first)."""
    forget_sandbox(ctx.db_url)  # an earlier sql of this process (tests, notebooks) left it open
    engine = ctx.engine_at_head()  # a store behind head: one line, never upgraded by a reader
    url = resolve_url(ctx.db_url)
    if duckdb_path(url) is None:
        return engine
    if not getattr(engine, "ragrouter_read_only", False):
        raise StoreError(f"store {duckdb_path(url)} is open for writing in this process; "
                         "read-only sql needs it closed")
    forget(engine)
    return make_engine(url, read_only=True, create=False, sandbox=True)


@click.command("sql")
@click.argument("query", required=False)
@click.option("-f", "--file", "file_", type=click.Path(dir_okay=False, path_type=Path),
              help="Read the SQL from this file (e.g. queries/examples/*.sql).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="json = a JSON array of row objects.")
@click.option("--write", is_flag=True, help="Allow statements that change the store (INSERT, DELETE, "
              "DROP, ...), transaction control and SET, and commit them; on DuckDB also files and "
              "extensions (COPY ... TO, EXPORT DATABASE, ATTACH, read_csv, INSTALL/LOAD). Without it "
              "the store is read-only: on PostgreSQL one query (SELECT, WITH, VALUES, TABLE, SHOW, "
              "EXPLAIN) in a read-only transaction that is rolled back; on DuckDB the file is opened "
              "read-only with file access, extension loading and SET disabled.")
@pass_ctx
def sql_command(ctx: Ctx, query: str | None, file_: Path | None, fmt: str, write: bool) -> None:
    """Run one SQL statement and print its rows (read-only unless --write).

    The SQL is passed to the database unchanged (DuckDB or PostgreSQL syntax).

    \b
    Examples:
      python cli.py sql "select count(*) as n from chunks" --format json
      python cli.py sql -f queries/examples/tokens_per_correct_answer.sql
      python cli.py sql --write "delete from unit_failures where stage = 'judge'"
    """
    if bool(query) == bool(file_):
        fail("give either a SQL string or -f FILE (not both)")
    if file_:
        try:
            query = file_.read_text(encoding="utf-8")
        except OSError as exc:
            fail(f"{file_}: {exc.strerror}")
        except UnicodeDecodeError as exc:
            fail(f"{file_}: not UTF-8 text (byte offset {exc.start})")
    statement = query.strip().rstrip(";").strip()
    if not statement:
        fail(f"{file_ or 'the SQL string'}: no SQL statement")
    engine = ctx.engine() if write else reader_engine(ctx)
    where = f"{file_}: " if file_ else ""
    try:
        columns, rows = execute(engine, statement, write)
    except StoreError:
        raise
    except ReadOnlyRefused as exc:
        fail(f"{where}SQL error: {exc}")
    except Exception as exc:  # noqa: BLE001 - every database error becomes one line
        msg = _db_message(exc)
        hint = ""
        low = msg.lower()
        if not write and ("read-only" in low or "read only" in low or "disabled by configuration" in low
                          or "configuration has been locked" in low or "external extensions is disabled" in low):
            hint = " (sql is read-only; add --write to change the store or use files and extensions)"
        elif not write and engine.dialect.name == "postgresql" and (
                "permission denied" in low or "must be a superuser" in low or "must be superuser" in low):
            hint = f" (sql without --write runs as {READER_ROLE}, which may only read the store's tables and views)"
        elif not write and "multiple commands" in low:
            hint = " (sql without --write runs one query; --write runs several statements)"
        fail(f"{where}SQL error: {msg}{hint}")
    if columns:
        click.echo(render_rows(columns, rows, fmt))
