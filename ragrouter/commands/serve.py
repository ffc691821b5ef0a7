"""`cli.py serve`: an OpenAI-compatible server that routes every question (ragrouter/serve)."""

from __future__ import annotations

import ipaddress

import click

from ragrouter.commands.common import Ctx, fail, pass_ctx
from ragrouter.console import library_warnings
from ragrouter.db import migrate
from ragrouter.stages.services import Services

KEY_ENV = "RAGROUTER_SERVE_API_KEY"
DEBUG_ENV = "RAGROUTER_SERVE_DEBUG"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


@click.command("serve")
@click.option("--corpus", "corpora", multiple=True, required=True,
              help="Corpus to serve as model 'ragrouter/<corpus>' (repeatable).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (127.0.0.1: this machine only). Any other needs --api-key.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (0: any free one).")
@click.option("--router", help="Router to use (default: this store's best trained router, as for ask).")
@click.option("--run-id", "run_id", help="Use the router of this MLflow run (one trained on this store).")
@click.option("--max-tokens-budget", type=click.IntRange(min=1), help="Skip paradigms whose expected tokens on "
              "the corpus exceed N.")
@click.option("--cost-share", type=click.FloatRange(0, 1), help="Share of questions allowed the expensive "
              "paradigms (all but --cheap): a threshold on the router's probability mass on them, calibrated on "
              "its cross-validated predictions on this store's labelled queries (RouteLLM's calibration).")
@click.option("--cheap", multiple=True, default=("llm_only", "naive"), show_default=True,
              help="The cheap paradigms of --cost-share (repeatable).")
@click.option("--max-question-tokens", type=click.IntRange(min=1), default=4096, show_default=True,
              help="A longer question is refused (400 context_length_exceeded).")
@click.option("--prefetch-embedding/--no-prefetch-embedding", default=True, show_default=True,
              help="Embed each question while the router decides, so the dense retrieval does not wait for "
              "it (a question routed to a paradigm that embeds none, llm_only or iterative, pays that embedding "
              "for nothing: a ledger row with no run).")
@click.option("--grace", type=click.FloatRange(min=0), default=60.0, show_default=True,
              help="Seconds a SIGTERM waits for the requests in flight before the server stops.")
@click.option("--api-key", "api_key", envvar=KEY_ENV, show_envvar=True, metavar="KEY",
              help="Every request (but GET /health) must send 'Authorization: Bearer KEY'. Required with a --host "
              f"other than loopback. Prefer the variable {KEY_ENV}: a flag shows in the process list.")
@click.option("--max-body-bytes", type=click.IntRange(min=1024), default=1 << 20, show_default=True,
              help="A larger request body is refused with 413 before it is read.")
@click.option("--read-timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds a client has to send a whole request (headers and body) from its first byte; a slower "
              "one gets 408 and its connection is closed, so half-sent requests cannot hold connections open.")
@click.option("--debug/--no-debug", envvar=DEBUG_ENV, default=False, show_envvar=True,
              help="A failed request logs its traceback too (default: one line each).")
@pass_ctx
def serve_command(ctx: Ctx, corpora: tuple[str, ...], host: str, port: int, router: str | None, run_id: str | None,
                  max_tokens_budget: int | None, cost_share: float | None, cheap: tuple[str, ...],
                  max_question_tokens: int, prefetch_embedding: bool, grace: float, api_key: str | None,
                  max_body_bytes: int, read_timeout: float, debug: bool) -> None:
    """Serve /v1/models and /v1/chat/completions: each question is routed, answered by the
    chosen paradigm through the gateway, and stored (origin 'serve').

    The reply is an OpenAI chat.completion with the routing decision in its 'ragrouter' field
    and the x-ragrouter-* headers; 'stream': true sends server-sent events; GET /health and
    /version answer too. SIGTERM stops accepting, lets every accepted request finish (within
    --grace), then stops. Bound to anything but loopback, the server needs an API key
    (docs/how-to/serve.md says how to expose it safely).

    \b
    Example:
      python cli.py --config configs/demo.yaml serve --corpus medical-demo --cost-share 0.3
      curl -s 127.0.0.1:8000/v1/chat/completions -H 'content-type: application/json' \\
        -d '{"model": "ragrouter/medical-demo", "messages": [{"role": "user", "content": "What is a melanoma?"}]}'
    """
    import logging

    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import ask as ask_mod
    # deferred (start-up): pulls in anyio, fastapi, pandas, sklearn, starlette, torch
    from ragrouter.serve.app import ServeError, create_app, prepare
    # deferred (start-up): pulls in uvicorn
    from ragrouter.serve.drain import DrainingServer, server_config

    import signal

    api_key = (api_key or "").strip() or None
    if not is_loopback(host) and api_key is None:
        fail(f"--host {host} lets other machines reach the server: give it a key to check (--api-key KEY, or the "
             f"variable {KEY_ENV}), or bind 127.0.0.1")
    if not debug:  # a failed model call is serve's one line, not the gateway's and the retries' as well
        logging.getLogger("ragrouter.llm").setLevel(logging.ERROR)
    engine = ctx.engine()
    migrate.ensure_current(engine)
    services = Services(ctx.config, engine, command="serve")
    stops: list[int] = []
    # uvicorn drains on SIGTERM/SIGINT, restores the handlers it found and raises the signal
    # again: these record it, so the command ends normally (exit 0) instead of dying by it
    previous = {sig: signal.signal(sig, lambda signum, frame: stops.append(signum))
                for sig in (signal.SIGTERM, signal.SIGINT)}
    warnings_ctx = library_warnings("serve", echo=lambda line: click.echo(line, err=True))
    warnings_ctx.__enter__()  # MLflow's model-loading warnings go to the log file
    state = None
    try:
        try:
            state = prepare(engine, ctx.config, services, list(corpora), router, run_id, max_tokens_budget,
                            cost_share, tuple(cheap), max_question_tokens, prefetch_embedding)
        except (ServeError, ask_mod.AskError) as exc:
            fail(getattr(exc, "message", str(exc)))
        state.debug = debug
        server = DrainingServer(server_config(create_app(state, max_body=max_body_bytes, api_key=api_key), host,
                                              port, grace, read_timeout))

        def announce():
            for s in server.servers:
                for sock in s.sockets:
                    h, p = sock.getsockname()[:2]
                    for v in state.corpora.values():
                        extra = f"; {v.threshold.describe()}" if v.threshold is not None else ""
                        extra += "; API key required" if api_key is not None else ""
                        click.echo(f"serving {v.model_id} at http://{h}:{p}/v1 (router {v.chosen.router}/"
                                   f"{v.chosen.features}/{v.chosen.encoder}, MLflow run {v.chosen.run_id}{extra})")
            if api_key is not None:
                click.echo("every request but GET /health needs 'Authorization: Bearer <key>' (the key given with "
                           f"--api-key or {KEY_ENV})")
            if not is_loopback(host):
                click.echo(f"bound to {host}: reachable from other machines, in plain HTTP; put a TLS proxy in front "
                           "(docs/how-to/serve.md)")
            click.echo("stop with Ctrl-C or SIGTERM (the requests accepted finish first)")

        original_startup = server.startup

        async def startup(sockets=None):
            await original_startup(sockets=sockets)
            announce()

        server.startup = startup
        server.run()  # uvicorn handles SIGTERM/SIGINT: stops accepting, drains, returns
    finally:
        if state is not None:
            state.close()  # the batched writes of the last requests are committed
        services.finish()
        try:
            with engine.connect() as conn:
                migrate.checkpoint(conn)  # a DuckDB store's WAL into the file: none is left beside it
        except Exception as exc:  # noqa: BLE001 - the store keeps its WAL, which DuckDB replays on open
            click.echo(f"warning: the store's write-ahead log was not written into it at shutdown ({exc})", err=True)
        warnings_ctx.__exit__(None, None, None)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("stopped" + (f" ({signal.Signals(stops[0]).name})" if stops else ""))
