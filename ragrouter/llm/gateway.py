"""The LLM gateway: every chat and embedding call of ragrouter passes through here.

``Gateway(config, engine)`` resolves a role or backend name to a backend (``backends.py``),
serves a request from the ledger when the same request was answered before, and otherwise
makes it — under the backend's concurrency limit, with its timeout and our own retry loop —
and writes it to the ledger (``llm_calls``) or, when it fails for good, to ``llm_failures``.
Only :class:`GatewayError` (with a ``.reason``) ever leaves :meth:`Gateway.chat` and
:meth:`Gateway.embed`.

Cache keys, ledger rows and durability: :mod:`ragrouter.llm.ledger`; a reply's checks, tokens and
ledger row: :mod:`ragrouter.llm.replies`. A lost store connection
is waited for (``worker.store_outage_s``) and paid replies that cannot be committed are spooled
to local disk and replayed by the next gateway: :mod:`ragrouter.db.outage`, :mod:`.spool`.

Slots
    A backend's ``concurrency`` is a pool of request slots (:mod:`ragrouter.llm.slots`): a free
    slot goes to the waiting request whose unit (set by the stage runner) has the most expected
    calls left, so more unit threads than slots keep the slots full (call-level scheduling).

Tokens
    From the endpoint's ``usage`` when it reports both counts (``token_source='usage'``), else
    cl100k_base counts of the message texts as sent and of the reply (``'tiktoken'``); a local
    encoder counts with its own tokenizer (``'encoder'``). *Billed* tokens of a run are the rows
    whose ``worker_run_id`` is that run; *consumed* tokens are the tokens of every row a unit
    used, cached or not (``ChatResult`` carries them either way; ``cached`` says which).

Requests and retries
    Arguments are checked and keyed by :mod:`ragrouter.llm.prepare` (structured-output modes);
    the attempts of one request run in :mod:`ragrouter.llm.retries` (up to ``retries`` more on
    429, 5xx, timeouts and connection errors, full-jitter backoff or ``Retry-After``). The
    sleep function and the RNG are injectable for tests.

Secrets
    Keys live only in the environment; error texts are passed through
    :func:`backends.redact` (the key's value, ``Bearer …``, ``Authorization:``/``api_key=``
    and ``sk-…``) before they are logged, stored or raised.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import dataclasses
import logging
import random
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Any, Callable

import numpy as np
from sqlalchemy.engine import Engine

from ragrouter.db import outage
from ragrouter.llm import slots, spool, tokens
from ragrouter.llm.backends import HTTP_CLIENTS, Backend
from ragrouter.llm.errors import ChatReply, GatewayError, redact
from ragrouter.llm.kinds import make_backend
from ragrouter.llm.prepare import check_texts, check_timeout, prepare_chat
from ragrouter.llm.replies import Rejected, chat_record, embed_record
from ragrouter.llm.retries import BACKOFF_BASE_S, BACKOFF_CAP_S, attempt_with_retries, backoff_delay
from ragrouter.llm.ledger_writer import LINGER_S, _Job, _LedgerWriter
from ragrouter.llm.ledger import (
    _gateway_connection,
    _Claims,
    _IdBlock,
    _is_duckdb,
    _Record,
    _shared_for,
    _shutdown,
    chat_key,
    embed_key,
    engine_lock,
    lookup,
    message_tokens,
    request_hash,
)

__all__ = [
    "Gateway",
    "GatewayError",
    "ChatResult",
    "engine_lock",
    "chat_key",
    "embed_key",
    "request_hash",
    "message_tokens",
]

log = logging.getLogger("ragrouter.llm.gateway")

ROLE_NAMES = ("extractor", "judge", "query_generator", "embedder")


# --------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class ChatResult:
    """One chat reply. ``prompt_tokens``/``completion_tokens`` are what the call consumed (the
    stored cost on a cache hit); ``cached`` is True when this call paid nothing (served from the
    ledger, from memory, or by another thread's identical request in flight); ``latency_s`` is
    the wall time of this gateway call; ``call_id`` is the ``llm_calls.id`` of the row."""

    text: str
    data: Any
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    call_id: int
    latency_s: float
    token_source: str = "usage"
    attempts: int = 1
    request_hash: str = ""
    finish_reason: str | None = None  # the endpoint's ('stop', 'length', …); None when it gave none


_LIVE: "weakref.WeakSet[Gateway]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:  # pragma: no cover - interpreter exit
    for gw in list(_LIVE):
        with contextlib.suppress(Exception):
            gw.close()


# --------------------------------------------------------------------------- the gateway


class Gateway:
    """Thread-safe gateway over the configured backends (see the module docstring).

    Args:
        config: a :class:`ragrouter.config.Config`.
        engine: the store's SQLAlchemy engine (schema already migrated).
        worker_run_id: ``worker_runs.id`` of this process, written on every row it pays for.
        offline_ok: True (default): construction touches no endpoint, key or model; problems
            surface at call time as GatewayError. False: every backend bound to a role is
            checked up front (API-key variables set, local model/encoder names known) and the
            first problem is raised as GatewayError('config' or 'missing_api_key').
        sleep: the function used for backoff sleeps (tests inject a recorder).
        rng: ``random.Random`` for the jitter (tests inject a seeded one).
        ledger_commit: 'sync' or 'async' (default: config ``gateway.ledger_commit``, else
            async on DuckDB and sync elsewhere).
        backoff_base_s, backoff_cap_s: the retry schedule.
    """

    def __init__(self, config, engine: Engine, worker_run_id: int | None = None, offline_ok: bool = True, *,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 ledger_commit: str | None = None, backoff_base_s: float = BACKOFF_BASE_S,
                 backoff_cap_s: float = BACKOFF_CAP_S):
        self.config = config
        self.engine = engine
        self.worker_run_id = worker_run_id
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_cap_s = float(backoff_cap_s)
        self._duck = _is_duckdb(engine)
        mode = ledger_commit or config.get("gateway.ledger_commit", None) or ("async" if self._duck else "sync")
        if mode not in ("sync", "async"):
            raise GatewayError("config", f"{config.source}: gateway.ledger_commit must be 'sync' or 'async' "
                               f"(got {mode!r})")
        self.ledger_commit = mode
        http_client = config.get("gateway.http_client", None) or "lean"
        if http_client not in HTTP_CLIENTS:
            raise GatewayError("config", f"{config.source}: gateway.http_client must be one of "
                               f"{', '.join(HTTP_CLIENTS)} (got {http_client!r})")
        self._http_client = http_client
        self._db, self._db_lock, self._own_db = _gateway_connection(engine)
        self._shared = _shared_for(engine)
        self._index = self._shared.index
        self._backends: dict[str, Backend] = {}
        self._sems: dict[str, slots.PrioritySlots] = {}  # a backend's request slots (llm/slots.py)
        self._backend_lock = threading.Lock()
        self._state_lock = self._shared.lock
        self._pending = self._shared.pending
        self._inflight = self._shared.inflight
        self._ids = _IdBlock(self._db, self._db_lock, self._duck, outage.limit_of(config))  # async mode's ids
        self._stats = collections.Counter()
        self._stats_lock = threading.Lock()
        self._closed = False
        self.outage_s = outage.limit_of(config)  # how long a lost store is waited for (db/outage.py)
        if not getattr(engine, "ragrouter_read_only", False):
            spool.replay(self._db, self._db_lock, self.outage_s)  # paid replies kept in an earlier outage
        self._writer = _LedgerWriter(self, linger_s=LINGER_S if mode == "async" else 0.0)
        # cross-process claims (ledger.py, "Claims"): PostgreSQL, held in async mode until the row is written
        self._claims = _Claims(engine, self.outage_s) if engine.dialect.name == "postgresql" else None
        # a gateway dropped without close() still commits its queue and frees the file lock
        self._finalizer = weakref.finalize(self, _shutdown, self._writer, self._db if self._own_db else None)
        _LIVE.add(self)
        if not offline_ok:
            try:
                self.preflight()
            except BaseException:
                self.close()
                raise

    # ------------------------------------------------------------------ backends
    def resolve(self, backend_or_role: str) -> str:
        """Backend name for a role ('extractor', 'judge', 'query_generator', 'embedder') or a
        backend name (generators are named by their backend)."""
        backends = self.config.section("backends")
        if backend_or_role in ROLE_NAMES:
            name = self.config.get(f"roles.{backend_or_role}", None)
            if not isinstance(name, str) or name not in backends:
                raise GatewayError("config", f"{self.config.source}: roles.{backend_or_role} does not name a "
                                   f"backend (got {name!r})")
            return name
        if backend_or_role == "generators":
            raise GatewayError("config", "'generators' is a list: pass the generator's backend name "
                               f"(one of {', '.join(self.config.generators())})")
        if backend_or_role not in backends:
            raise GatewayError("config", f"{self.config.source}: '{backend_or_role}' is neither a role "
                               f"({', '.join(ROLE_NAMES)}) nor a backend under 'backends' "
                               f"({', '.join(sorted(backends))})")
        return backend_or_role

    def backend(self, backend_or_role: str) -> Backend:
        """The (lazily built) backend object for a role or backend name."""
        name = self.resolve(backend_or_role)
        with self._backend_lock:
            be = self._backends.get(name)
            if be is None:
                spec = self.config.section("backends")[name]
                if not isinstance(spec, dict):
                    raise GatewayError("config", f"{self.config.source}: backends.{name} must be a mapping")
                be = make_backend(name, spec, source=self.config.source)
                if hasattr(be, "http_client"):
                    be.http_client = self._http_client
                if hasattr(be, "call_timeout"):  # a local model: its calls' timeouts follow its speed
                    be.priors = dict(self.config.get("dry_run.timing.priors", None) or {})
                self._backends[name] = be
                self._sems[name] = slots.PrioritySlots(be.concurrency)
            return be

    def preflight(self) -> None:
        """Check every backend bound to a role without making a request (GatewayError)."""
        names = list(self.config.generators())
        for role in ROLE_NAMES:
            value = self.config.get(f"roles.{role}", None)
            if value:
                names.append(value)
        for name in dict.fromkeys(names):
            self.backend(name).preflight()

    # ------------------------------------------------------------------ public calls
    def chat(self, backend_or_role: str, messages: list[dict], *, temperature: float, max_tokens: int,
             json_schema: dict | None = None, stage: str, phase: str, sample: int = 0,
             timeout_s: float | None = None, stop: list[str] | None = None,
             seed: int | None = None) -> ChatResult:
        """One chat completion through the cache and the ledger. Raises GatewayError only.
        ``stop`` (stop sequences) and ``seed`` are sent, and part of the cache key, when given."""
        t0 = time.perf_counter()
        self._bump("calls")
        try:
            be, sent, key, h, response_format = self._prepare_chat(
                backend_or_role, messages, temperature, max_tokens, json_schema, sample, stop, seed)
            timeout = check_timeout(be, timeout_s, sent, max_tokens)
            sampling = {k: v for k, v in (("stop", key.get("stop")), ("seed", key.get("seed"))) if v is not None}
            rec, cached = self._get_or_run(
                h, lambda: self._produce_chat(be, h, sent, response_format, json_schema, key, temperature,
                                              max_tokens, timeout, stage, phase, sampling))
        except GatewayError:
            self._bump("errors")
            raise
        except Exception as exc:  # noqa: BLE001 - nothing else may escape
            self._bump("errors")
            raise GatewayError("client_error", f"gateway: unexpected {exc.__class__.__name__}: "
                               f"{redact(str(exc), self._secrets())}") from None
        finally:
            slots.count_call()  # the unit's next request waits with one call fewer left
        if cached:
            self._bump("cache_hits")
        return ChatResult(
            text=rec.text or "",
            data=rec.data,
            prompt_tokens=rec.prompt_tokens,
            completion_tokens=rec.completion_tokens,
            cached=cached,
            call_id=int(rec.id) if rec.id is not None else -1,
            latency_s=time.perf_counter() - t0,
            token_source=rec.token_source,
            attempts=rec.attempts,
            request_hash=h,
            finish_reason=rec.finish_reason,
        )

    def embed(self, backend_or_role: str, texts: list[str], *, stage: str, phase: str) -> np.ndarray:
        """Embeddings of ``texts`` (float32, (n, dim), rows L2-normalised), batched by the
        backend's ``batch_size``; each batch is one ledger row (a cache hit when repeated)."""
        self._bump("embed_calls")
        try:
            be = self.backend(backend_or_role)
            if not be.supports_embeddings:
                raise GatewayError("config", f"backend '{be.name}' ({be.kind}) does not serve embeddings",
                                   backend=be.name)
            texts = check_texts(texts)
            if not texts:
                return np.zeros((0, 0), dtype=np.float32)
            timeout = check_timeout(be, None)
            out = []
            for start in range(0, len(texts), be.batch_size):
                batch = texts[start:start + be.batch_size]
                h = request_hash(embed_key(be.model, batch, dimensions=be.dimensions))
                rec, cached = self._get_or_run(
                    h, lambda batch=batch, h=h: self._produce_embed(be, h, batch, timeout, stage, phase))
                if cached:
                    self._bump("cache_hits")
                out.append(np.frombuffer(rec.vectors, dtype="<f4").reshape(len(batch), -1))
            dims = {v.shape[1] for v in out}
            if len(dims) != 1:
                raise GatewayError("bad_response", f"backend '{be.name}': batches returned vectors of "
                                   f"different widths {sorted(dims)}", backend=be.name)
            return np.vstack(out).astype(np.float32, copy=True)
        except GatewayError:
            self._bump("errors")
            raise
        except Exception as exc:  # noqa: BLE001
            self._bump("errors")
            raise GatewayError("client_error", f"gateway: unexpected {exc.__class__.__name__}: "
                               f"{redact(str(exc), self._secrets())}") from None

    def is_cached(self, backend_or_role: str, messages: list[dict], *, temperature: float, max_tokens: int,
                  json_schema: dict | None = None, sample: int = 0, **_ignored) -> bool:
        """Whether ``chat`` with these arguments would be a cache hit (no HTTP call made)."""
        return self._is_stored(self.request_key(backend_or_role, messages, temperature=temperature,
                                                max_tokens=max_tokens, json_schema=json_schema, sample=sample))

    def request_key(self, backend_or_role: str, messages: list[dict], *, temperature: float, max_tokens: int,
                    json_schema: dict | None = None, sample: int = 0, **_ignored) -> str:
        """The cache key (request hash) ``chat`` with these arguments would use."""
        return self._prepare_chat(backend_or_role, messages, temperature, max_tokens, json_schema, sample)[3]

    def embed_is_cached(self, backend_or_role: str, texts: list[str]) -> bool:
        """Whether every batch of ``embed(texts)`` would be a cache hit."""
        be = self.backend(backend_or_role)
        texts = check_texts(texts)
        return all(
            self._is_stored(request_hash(embed_key(be.model, texts[i:i + be.batch_size], dimensions=be.dimensions)))
            for i in range(0, len(texts), be.batch_size)
        )

    @staticmethod
    def estimate_tokens(messages: list[dict], max_tokens: int) -> tuple[int, int]:
        """(prompt tokens by cl100k_base, completion budget) of a chat request, offline."""
        return message_tokens(messages), int(max_tokens)

    def stats(self) -> dict:
        """Counters of this gateway: calls, embed_calls, cache_hits, http_requests (attempts),
        encoder_requests, retries, rate_limited (429s seen by a rate-limited backend), claim_hits
        (replies another worker sent while this one waited on its claim), failures (recorded), errors (GatewayError raised),
        billed_prompt_tokens, billed_completion_tokens, billed_tokens (their sum), rows_written."""
        with self._stats_lock:
            out = {k: 0 for k in ("calls", "embed_calls", "cache_hits", "http_requests", "encoder_requests",
                                  "retries", "rate_limited", "failures", "errors", "billed_prompt_tokens",
                                  "billed_completion_tokens")}
            out.update(self._stats)
        out["billed_tokens"] = out["billed_prompt_tokens"] + out["billed_completion_tokens"]
        out["rows_written"] = self._writer.written
        return out

    def flush(self, timeout: float | None = None) -> None:
        """Block until every ledger row queued so far is committed. Raises GatewayError
        ('ledger_write_failed') if a write failed since the last flush, or on timeout."""
        if not self._writer.flush(timeout):
            raise GatewayError("ledger_write_failed", f"ledger rows not committed within {timeout} s")
        with self._writer.cond:
            errors, self._writer.errors = self._writer.errors, []
            gone, self._writer.gone = self._writer.gone, None
        if gone is not None:  # the store stayed away: the worker's one line (db/outage.py)
            raise gone
        if errors:
            raise GatewayError("ledger_write_failed", f"{len(errors)} ledger write(s) failed; first: {errors[0]}")

    def commit_with(self, fn):
        """Queued ledger rows and ``fn(conn)``'s, which link to them, in one transaction (ledger_writer)."""
        return self._writer.commit_with(fn)

    def close(self) -> None:
        """Flush the ledger, stop the writer and close the HTTP clients (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._writer.closing = True  # a store that is away now is not waited for: its rows are spooled
        try:
            self._writer.flush()
        finally:
            self._finalizer()  # stops the writer, releases our DuckDB connection
            with self._backend_lock:
                for be in self._backends.values():
                    be.close()
            if self._claims is not None:
                self._claims.close()
            _LIVE.discard(self)

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ preparation
    def _prepare_chat(self, backend_or_role, messages, temperature, max_tokens, json_schema, sample, stop=None,
                      seed=None):
        """(backend, messages as sent, cache key, request hash, response_format): llm/prepare.py."""
        be = self.backend(backend_or_role)
        return (be, *prepare_chat(be, messages, temperature, max_tokens, json_schema, sample, stop, seed))

    # ------------------------------------------------------------------ cache machinery
    def _get_or_run(self, h: str, produce: Callable[[], _Record]) -> tuple[_Record, bool]:
        """The record for hash ``h``: from memory, another thread's identical call in flight,
        the ledger, or ``produce()`` (this thread pays). Returns (record, cached)."""
        with self._state_lock:
            rec = self._pending.get(h)
            if rec is not None:
                return rec, True
            fut = self._inflight.get(h)
            owner = fut is None
            if owner:
                fut = self._inflight[h] = Future()
        if not owner:
            try:
                return fut.result(), True
            except GatewayError as exc:
                raise GatewayError(exc.reason, str(exc), backend=exc.backend, attempts=exc.attempts,
                                   request_hash=h) from None
        try:
            rec = self._lookup(h)
            cached = rec is not None
            if rec is None and self._claims is not None:
                rec, cached = self._claims.run_once(
                    h, lambda: self._lookup(h), produce,
                    keep=self._keep_claim if self.ledger_commit == "async" else None)
                if cached:
                    self._bump("claim_hits")
            elif rec is None:
                rec = produce()
            fut.set_result(rec)
            return rec, cached
        except GatewayError as exc:
            fut.set_exception(exc)
            raise
        except BaseException as exc:
            fut.set_exception(GatewayError("client_error", f"{exc.__class__.__name__}: {exc}", request_hash=h))
            raise
        finally:
            with self._state_lock:
                self._inflight.pop(h, None)

    def _is_stored(self, h: str) -> bool:
        with self._state_lock:
            if h in self._pending:
                return True
        return self._lookup(h) is not None

    def _lookup(self, h: str) -> _Record | None:
        return lookup(self._db, self._db_lock, self._index, h, self.outage_s)

    # ------------------------------------------------------------------ making calls
    def _attempts(self, be: Backend, h: str, stage: str, phase: str, fn: Callable[[float], Any],
                  timeout: float, estimate: Callable[[], int] | None = None):
        """Run ``fn(timeout)`` with retries (llm/retries.py); returns (reply, attempts, latency of
        the good one), or records the failure and raises GatewayError."""
        reply, attempts, latency, last = attempt_with_retries(
            be, fn, timeout, slot=self._sems[be.name], bump=self._bump, backoff=self._backoff, sleep=self._sleep,
            estimate=estimate)
        if last is not None:
            self._fail(be, h, stage, phase, last.reason, last.detail, attempts, **last.billed())
        return reply, attempts, latency

    def _backoff(self, i: int, retry_after: float | None) -> float:
        return backoff_delay(i, retry_after, base_s=self.backoff_base_s, cap_s=self.backoff_cap_s, rng=self._rng)

    def _fail(self, be: Backend, h: str, stage: str, phase: str, reason: str, detail: str, attempts: int, *,
              response: str | None = None, prompt_tokens: int | None = None,
              completion_tokens: int | None = None, reasoning_tokens: int | None = None):
        """Record a failure row and raise GatewayError (never returns)."""
        secrets = be.secrets()
        detail = redact(detail, secrets) or ""
        row = {
            "request_hash": h, "backend": be.name, "model": be.model, "stage": stage, "phase": phase,
            "error": f"{reason}: {detail}", "attempts": attempts, "response": redact(response, secrets),
            "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "reasoning_tokens": reasoning_tokens, "worker_run_id": self.worker_run_id,
        }
        self._bump("failures")
        if prompt_tokens:
            self._bump("billed_prompt_tokens", prompt_tokens)
        if completion_tokens:
            self._bump("billed_completion_tokens", completion_tokens)
        log.warning("backend %s: %s/%s call failed after %d attempt(s): %s: %s", be.name, stage, phase, attempts,
                    reason, detail)
        self._writer.put(_Job("failure", row, h))
        raise GatewayError(reason, f"backend '{be.name}' ({be.model}): {reason}: {detail}", backend=be.name,
                           attempts=attempts, request_hash=h)

    def _produce_chat(self, be: Backend, h: str, sent: list[dict], response_format: dict | None,
                      json_schema: dict | None, key: dict, temperature: float, max_tokens: int, timeout: float,
                      stage: str, phase: str, sampling: dict | None = None) -> _Record:
        def attempt(t: float) -> ChatReply:
            return be.chat_once(sent, temperature=temperature, max_tokens=max_tokens,
                                response_format=response_format, timeout_s=t, **(sampling or {}))

        reply, attempts, latency = self._attempts(be, h, stage, phase, attempt, timeout,
                                                  estimate=lambda: message_tokens(sent) + int(max_tokens))
        try:
            rec, row = chat_record(reply, sent, json_schema, key, temperature, max_tokens, sampling, latency, attempts)
        except Rejected as bad:
            self._fail(be, h, stage, phase, bad.reason, bad.detail, attempts, **bad.billed)
        self._store(be, h, stage, phase, rec, row)
        return rec

    def _produce_embed(self, be: Backend, h: str, batch: list[str], timeout: float, stage: str,
                       phase: str) -> _Record:
        reply, attempts, latency = self._attempts(be, h, stage, phase,
                                                  lambda t: be.embed_once(batch, timeout_s=t), timeout,
                                                  estimate=lambda: sum(tokens.count(t) for t in batch))
        try:
            rec, row = embed_record(reply, batch, be.http, be.dimensions, latency, attempts)
        except Rejected as bad:
            self._fail(be, h, stage, phase, bad.reason, bad.detail, attempts, **bad.billed)
        self._store(be, h, stage, phase, rec, row)
        return rec

    # ------------------------------------------------------------------ ledger
    def _store(self, be: Backend, h: str, stage: str, phase: str, rec: _Record, extra: dict) -> None:
        """Queue the ledger row of a successful call (and wait for it in sync mode)."""
        self._bump("billed_prompt_tokens", rec.prompt_tokens)
        self._bump("billed_completion_tokens", rec.completion_tokens)
        row = {
            "request_hash": h, "backend": be.name, "model": be.model, "stage": stage, "phase": phase,
            "prompt_tokens": rec.prompt_tokens, "completion_tokens": rec.completion_tokens,
            "token_source": rec.token_source, "latency_s": float(rec.latency_s), "attempts": rec.attempts,
            "worker_run_id": self.worker_run_id, **extra,
        }
        if self.ledger_commit == "async":
            rec.id = row["id"] = self._ids.next()
            with self._state_lock:
                self._pending[h] = rec
            self._writer.put(_Job("call", row, h))
            return
        job = self._writer.put(_Job("call", row, h))
        job.done.wait()
        if job.error or job.final_id is None:
            raise GatewayError("ledger_write_failed", f"backend '{be.name}': the reply could not be stored: "
                               f"{job.error or 'no id returned'}", backend=be.name, request_hash=h)
        rec.id = job.final_id

    def _keep_claim(self, h: str) -> bool:
        """Async mode: hold the claim on ``h`` while its row is queued (_after_write releases it)."""
        with self._state_lock:
            return h in self._pending and self._claims.hold(h)

    def _after_write(self, batch: list[_Job]) -> None:
        """Writer callback: committed hashes join the index and leave the memory map; claims
        held for them are released."""
        with self._state_lock:
            for job in batch:
                if job.table != "call":
                    continue
                if job.error is None and self._index is not None:
                    self._index.add(job.request_hash)
                self._pending.pop(job.request_hash, None)
        if self._claims is not None:
            self._claims.release_held([job.request_hash for job in batch if job.table == "call"])

    def _refill_ids_if_low(self) -> None:
        if self.ledger_commit == "async":
            self._ids.refill_if_low()

    # ------------------------------------------------------------------ misc
    def _bump(self, key: str, n: int = 1) -> None:
        with self._stats_lock:
            self._stats[key] += n

    def _secrets(self) -> list[str]:
        with self._backend_lock:
            return [s for be in self._backends.values() for s in be.secrets()]
