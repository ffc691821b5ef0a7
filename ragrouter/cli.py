"""ragrouter command line: `ragrouter --help` (the package's console script) or, in a clone,
`python cli.py --help` (cli.py at the top is a thin entry to this module).

Exit statuses: 0 success, 1 internal error, 2 user error (input, flag, config, store),
3 a run finished with failed units.
"""

from __future__ import annotations

import os
import sys
import traceback

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import importlib  # noqa: E402

import click  # noqa: E402

from ragrouter.commands import common  # noqa: E402
from ragrouter import __version__, console  # noqa: E402
from ragrouter.db.engine import DEFAULT_URL  # noqa: E402
from ragrouter.llm.errors import BackendError, GatewayError  # noqa: E402

# Each command's module, imported when the command is run or listed: a command loads only what
# it needs (`status` or `sql` start in about half the time of loading every command first, which
# pulls in scipy, the paradigms and the decision rule). This is the one deferred project import
# of the command line; ragrouter/docsgen.py lists every command through the same group.
COMMANDS = {  # in the order --help lists them: the pipeline's, then reading, then tools
    "db": "ragrouter.commands.db:db_group",
    "ingest": "ragrouter.commands.ingest:ingest_command",
    "run": "ragrouter.commands.run:run_command",
    "status": "ragrouter.commands.status:status_command",
    "judge": "ragrouter.commands.judge:judge_group",
    "review": "ragrouter.commands.review:review_group",
    "routers": "ragrouter.commands.routers:routers_group",
    "ask": "ragrouter.commands.ask:ask_command",
    "serve": "ragrouter.commands.serve:serve_command",
    "report": "ragrouter.commands.report:report_command",
    "export": "ragrouter.commands.export:export_command",
    "sql": "ragrouter.commands.sql:sql_command",
    "demo": "ragrouter.commands.demo:demo_command",
    "models": "ragrouter.commands.models:models_group",
    "mlflow-ui": "ragrouter.commands.routers:mlflow_ui_command",
    "corpus": "ragrouter.commands.corpus:corpus_group",
    "plan": "ragrouter.commands.plan:plan_command",
}
ORDER = list(COMMANDS)


class PipelineOrder(click.Group):
    """A group whose --help lists commands in COMMANDS' order (others last, by name), each loaded
    from its module when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(self.commands) | set(COMMANDS)
        return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attr = COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return self.commands.get(cmd_name)


@click.group(cls=PipelineOrder, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="ragrouter", message="%(prog)s %(version)s")
@click.option("--db", "db_url", envvar="RAGROUTER_DB", default=DEFAULT_URL, show_default=True,
              help="Store URL: duckdb:///FILE or postgresql://USER@HOST/DB (env RAGROUTER_DB). "
                   "A DuckDB file that does not exist is created only by 'db upgrade' or --create.")
@click.option("--create", is_flag=True, help="Create the DuckDB file named by --db if it does not exist.")
@click.option("--config", "config_path", envvar="RAGROUTER_CONFIG", default=None,
              help="YAML config merged over configs/default.yaml (env RAGROUTER_CONFIG); "
                   "RAGROUTER__a__b=value overrides any setting.")
@click.pass_context
def cli(click_ctx: click.Context, db_url: str, create: bool, config_path: str | None) -> None:
    """ragrouter: which RAG paradigm answers best, for your corpus and queries, at what cost.

    Every artefact of the benchmark is a row in one store (DuckDB file by default); stages
    are resumable and never spend a token twice.

    \b
    Exit status: 0 success, 1 internal error, 2 user error (input, flag, config,
    store), 3 a run finished with failed units.
    """
    click_ctx.obj = common.Ctx(db_url=db_url, config_path=config_path, create=create)




def main(argv: list[str] | None = None, prog_name: str = "cli.py") -> int:
    """Run the CLI; user errors become one line on stderr and exit status 2, an unexpected
    error one line and status 1 (RAGROUTER_DEBUG=1 prints its traceback)."""
    with console.invoked_as(console.CLONE_COMMAND if prog_name == "cli.py" else prog_name):
        return _main(argv, prog_name)


def _main(argv: list[str] | None, prog_name: str) -> int:
    try:
        cli.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        common.echo_err("aborted")
        return 130
    except click.UsageError as exc:  # a bad flag or argument: one line, exit 2
        where = exc.ctx.command_path if exc.ctx is not None else prog_name
        common.echo_err(f"error: {exc.format_message()} (see '{where} --help')")
        return common.EXIT_USER
    except click.ClickException as exc:
        common.echo_err(f"error: {exc.format_message()}")
        return exc.exit_code
    except KeyboardInterrupt:
        common.echo_err("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - sorted by _error_line: the user's to fix, or the last line of defence
        return _error_line(exc)
    return 0


def _error_line(exc: Exception) -> int:
    """One line on stderr for an exception a command raised, and the exit status."""
    lost = common.outage_line(exc)
    if lost is not None:  # the store went away: what was kept, how to resume (db/outage.py)
        common.echo_err(f"error: {lost}")
        return common.EXIT_USER
    if common.is_user_error(exc):
        common.echo_err(f"error: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__}")
        return common.EXIT_USER
    if isinstance(exc, (GatewayError, BackendError)):  # a model call failed: what, which model, what to do
        common.echo_err(f"error: {model_call_line(exc)}")
        return common.EXIT_INTERNAL
    fs = common.file_system_error(exc)
    if fs is not None:  # a folder missing or read-only, a disk full: the user's to fix, exit 2
        common.echo_err(f"error: {fs}")
        return common.EXIT_USER
    if os.environ.get("RAGROUTER_DEBUG"):
        traceback.print_exc()
    first = (str(exc).strip().splitlines() or [""])[0]
    common.echo_err(f"internal error: {exc.__class__.__name__}: {first} (set RAGROUTER_DEBUG=1 for the traceback)")
    return common.EXIT_INTERNAL


def model_call_line(exc: BaseException) -> str:
    """One line for a model call that failed outside a stage's units (those are recorded as
    the unit's failure): what happened, naming the backend and model, and what to do."""
    first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    if getattr(exc, "reason", None) == "timeout":
        return (f"a model call timed out: {first}; the machine may be busy or the call large: run the command "
                "again when it is idle (finished work is kept), or set that backend's timeout_s in the config")
    return f"a model call failed: {first}"


def entry() -> None:
    """The `ragrouter` console script (pyproject.toml)."""
    sys.exit(main(prog_name="ragrouter"))
