"""The OpenAI-compatible application of ``ragrouter serve`` (FastAPI, run by uvicorn).

Endpoints (base ``http://127.0.0.1:PORT/v1``):

* ``GET /v1/models`` — one model per served corpus, ``ragrouter/<corpus>``, with the router
  that routes it (``ragrouter`` field: router, features, encoder, MLflow run, cost share).
* ``POST /v1/chat/completions`` — the last user message is the question. The corpus is the
  model's (``ragrouter/<corpus>``, or the corpus name alone). The router picks the paradigm
  (:func:`ragrouter.answering.ask.route`), within ``--max-tokens-budget`` and the calibrated
  ``--cost-share`` threshold (:mod:`ragrouter.serve.calibration`); the paradigm runs through
  the gateway like every stage (ledger, cache, rate limits), and the question and its run are
  stored with ``origin = 'serve'`` (status 'asked', so they stay out of the benchmark's
  tables until someone imports and judges them). The reply is a ``chat.completion`` whose
  ``usage`` is the run's tokens (retrieval + generation), with the routing decision in the
  extra field ``ragrouter`` (paradigm, probabilities, query type, router, MLflow run, why,
  tokens, stored run id, ``routing_ms``: the time the routing decision took) and in the headers ``x-ragrouter-paradigm``, ``x-ragrouter-router``,
  ``x-ragrouter-run-id``. A client that knows the question's type may send it
  (``"query_type"`` in the body, e.g. the openai client's ``extra_body``); otherwise it is
  inferred with MiniLM, micro-batched across the requests in flight
  (:mod:`ragrouter.serve.pipeline`). ``stream: true`` answers as server-sent events in the
  OpenAI chunk format while the answer is generated: the role, then the generator's tokens as
  its endpoint streams them (the gateway still records the whole call in the ledger and the
  cache, :mod:`ragrouter.llm.streaming`), then a last chunk with ``finish_reason``, ``usage``
  and the ``ragrouter`` field (its run id: the stream's headers go out before the run is
  stored), then ``data: [DONE]``. A cached reply, the iterative paradigm (several rounds
  generate) and endpoints that do not stream send the answer in pieces once it is made.

Errors are OpenAI-shaped, ``{"error": {"message", "type", "param", "code"}}``: 400 for a bad
body or a question over ``--max-question-tokens`` (``context_length_exceeded``), 404 for an
unknown model or path, 503 when the corpus cannot be routed (no router, no
indicators), 500 otherwise (one line in the message, never a traceback); an error after a
stream has begun is its last event. Requests are served concurrently: the event loop only
parses and replies, the blocking work runs in worker threads (the gateway's slots bound the
model calls in flight); everything a request would do once (encoder, centroids, router,
corpus constants and index) is done at start, the question's embedding is requested while
the router decides (``--prefetch-embedding``, :meth:`ServeState.prefetch`), and the served runs
are written in batches (group commit, :mod:`ragrouter.serve.pipeline`) before each reply. uvicorn drains the
requests in flight on SIGTERM before it exits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragrouter import __version__
from ragrouter.answering import lookup
from ragrouter.answering import ask as ask_mod, routing
from ragrouter.db.engine import write_lock
from ragrouter.llm import streaming, tokens
from ragrouter.llm.encoder import get_encoder
from ragrouter.llm.errors import GatewayError
from ragrouter.paradigms.query_context import EMBEDDER, embed_query
from ragrouter.paradigms.settings import Settings
from ragrouter.serve import calibration, pipeline
from ragrouter.serve.calibration import Threshold
from ragrouter.serve.guard import DEFAULT_MAX_BODY, Guard
from ragrouter.serve.protocol import ChatRequest, ServeError, chat_request, error_body, parse_body

PREFIX = "ragrouter/"
log = logging.getLogger("ragrouter.serve")


@dataclass
class Served:
    """One corpus this server routes: its router and, with --cost-share, the threshold."""

    corpus: str
    chosen: ask_mod.TrainedRouter
    threshold: Threshold | None = None
    index: object = None  # the corpus' retrieval state, loaded once at start
    counts: dict[str, int] = field(default_factory=lambda: {"requests": 0, "expensive_allowed": 0})
    created: int = 0  # Unix seconds the router's MLflow run was made (/v1/models' "created")

    @property
    def model_id(self) -> str:
        return PREFIX + self.corpus


@dataclass
class ServeState:
    engine: object
    config: object
    services: object
    corpora: dict[str, Served]
    router: str | None = None
    run_id: str | None = None
    budget: int | None = None
    max_question_tokens: int = 4096
    lock: threading.Lock = field(default_factory=threading.Lock)
    router_batch: object = None  # pipeline.router_batcher
    writer: object = None  # pipeline.store_writer
    query_writer: object = None  # pipeline.query_writer
    query_types: tuple[str, ...] = ()
    limiter: object = None  # anyio.CapacityLimiter of the worker threads (made on the first request)
    max_concurrency: int = 32
    prefetcher: object = None  # ThreadPoolExecutor of --prefetch-embedding (None: off, or no embedder)
    settings: object = None  # the paradigms' Settings of the config (a client's sampling is applied to a copy)
    debug: bool = False  # a failed request logs its traceback too (--debug / RAGROUTER_SERVE_DEBUG)

    def answer_settings(self, req: ChatRequest):
        """The paradigms' settings for ``req``: the config's, or a copy with the client's
        max_tokens / temperature / stop / seed (None when it sent none: the configured run)."""
        sampling = req.sampling()
        if all(v is None for v in sampling.values()):
            return None
        if self.settings is None:
            self.settings = Settings.from_config(self.config)
        return self.settings.for_answer(**sampling)

    def close(self) -> None:
        """Finish the speculative embeddings and the batched writes; stop the batchers' threads."""
        if self.prefetcher is not None:
            self.prefetcher.shutdown(wait=True)
        for b in (self.query_writer, self.writer, self.router_batch):
            if b is not None:
                b.close()

    def prefetch(self, question: str) -> None:
        """Start the question's embedding now, in a thread, while the router decides
        (``--prefetch-embedding``): the dense retrieval's request then joins it in the gateway
        (:func:`ragrouter.paradigms.query_context.embed_query`). A paradigm that embeds no
        question (llm_only; iterative's direct round) leaves it paid and unused: a ledger row
        with no run. Its failure is the paradigm's to report, if it needs the vector."""
        if self.prefetcher is not None:
            self.prefetcher.submit(_prefetch, self.services.gateway, question)


def _prefetch(gateway, question: str) -> None:
    try:
        embed_query(gateway, question)
    except Exception:  # noqa: BLE001 - speculative: the paradigm's own call raises it again
        pass


def _served(state: ServeState, model) -> Served:
    if not isinstance(model, str) or not model:
        raise ServeError(400, "'model' is required: one of " + ", ".join(s.model_id for s in state.corpora.values()),
                         "invalid_request_error", param="model")
    name = model[len(PREFIX):] if model.startswith(PREFIX) else model
    if name not in state.corpora:
        raise ServeError(404, f"The model '{model}' does not exist (served: "
                         f"{', '.join(s.model_id for s in state.corpora.values())})", "invalid_request_error",
                         code="model_not_found", param="model")
    return state.corpora[name]


@dataclass
class Decision:
    """One routed question on its way through serve: ask's plan (the Answer its paradigm
    fills), the router's verdict it came from, the Future of its stored query's id (written by
    the query writer while the paradigm runs) and the time the decision took."""
    answer: ask_mod.Answer
    routed: object
    query_id: object  # concurrent.futures.Future[int]
    routing_ms: float | None = None
    settings: object = None  # the paradigms' Settings with the client's sampling (None: the config's)
    finish_reason: str = "stop"  # the answer's: 'length' when the client's or the config's max_tokens cut it


def decide(state: ServeState, served: Served, question: str, query_type: str | None = None) -> Decision:
    """Route one question and pick its paradigm (no upstream call with one-hot features). The
    query type is the client's, else the micro-batched MiniLM inference's
    (:mod:`ragrouter.serve.pipeline`)."""
    if query_type is None and not state.query_types:
        raise ServeError(503, "the store has no accepted questions to infer the query type from: send 'query_type' "
                         "with the request", "server_error", code="not_routable")
    try:
        routed = state.router_batch((served.corpus, served.chosen.run_id, question, query_type))
    except ask_mod.AskError as exc:
        raise ServeError(503, str(exc), "server_error", code="not_routable") from None
    allowed, why_not = None, ""
    if served.threshold is not None:
        expensive = served.threshold.allows_expensive(routed.probabilities)
        with state.lock:
            served.counts["requests"] += 1
            served.counts["expensive_allowed"] += int(expensive)
        if not expensive:
            allowed = set(served.threshold.cheap)
            why_not = served.threshold.why_cheap()
    out = ask_mod.plan(state.engine, routed, state.budget, allowed, why_not, memo=True)
    return Decision(out, routed, state.query_writer.submit((routed.corpus_id, out)))  # written while the paradigm runs


def execute(state: ServeState, d: Decision, served: Served, sink=None) -> ask_mod.Answer:
    """Run the chosen paradigm through the gateway (``sink``: its generation streams there as
    it is made) and store its run (origin 'serve') through the batched writer, once its
    question (written by :func:`decide`'s query writer meanwhile) is; returns once both are
    committed."""
    out, routed = d.answer, d.routed

    def store(result):
        return (d.query_id.result(), routed.generator, out, result, d.settings)

    try:
        if sink is not None:
            with streaming.streaming(sink):
                result = ask_mod.run_paradigm(state.config, out, served.index, state.services.gateway,
                                              routed.generator, d.settings)
        else:
            result = ask_mod.run_paradigm(state.config, out, served.index, state.services.gateway, routed.generator,
                                          d.settings)
    except BaseException:
        d.query_id.result()  # the question is kept even when its paradigm failed
        raise
    d.finish_reason = result.finish_reason if result.finish_reason in ("stop", "length", "content_filter") else "stop"
    state.writer(store(result))
    return out


def failure(state: ServeState, exc: BaseException, served: Served | None = None) -> ServeError:
    """The OpenAI-shaped error of a request that failed past its checks, logged in one line
    (its traceback too with --debug): a model call that failed is the upstream's (502; 504 on a
    timeout), anything else an internal error (500). Never the traceback to the client."""
    if isinstance(exc, ServeError):
        return exc
    first = (str(exc).strip().splitlines() or [""])[0]
    where = f"ragrouter/{served.corpus}" if served is not None else "request"
    if isinstance(exc, GatewayError):
        status = 504 if exc.reason == "timeout" else 502
        err = ServeError(status, f"the model call failed upstream: {first}", "server_error",
                         code=f"upstream_{exc.reason}")
    else:
        err = ServeError(500, f"internal error: {exc.__class__.__name__}: {first}", "server_error")
    log.error("serve: %s failed (%d %s): %s", where, err.status, err.code or "internal_error", first,
              exc_info=exc if state.debug else None)
    return err


def _count_tokens(text: str) -> int:
    return tokens.count(text)


def _decision(a: ask_mod.Answer, routing_ms: float | None) -> dict:
    return {"paradigm": a.paradigm, "probabilities": a.probabilities, "query_type": a.query_type,
            "router": a.router, "features": a.features, "encoder": a.encoder, "router_run_id": a.router_run_id,
            "why": a.why, "tokens": a.tokens, "run_id": a.run_id, "routing_ms": routing_ms}


def _headers(a: ask_mod.Answer, with_run: bool = True) -> dict:
    out = {"x-ragrouter-paradigm": a.paradigm, "x-ragrouter-router": f"{a.router}/{a.features}/{a.encoder}"}
    if with_run:  # a stream's headers go out before its run is stored: its last chunk carries the id
        out["x-ragrouter-run-id"] = str(a.run_id)
    return out


def _usage(a: ask_mod.Answer) -> dict:
    t = a.tokens
    prompt = int(t.get("retrieval_in", 0) + t.get("generation_in", 0))
    completion = int(t.get("retrieval_out", 0) + t.get("generation_out", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _pieces(text: str, size: int = 24) -> list[str]:
    words = text.split(" ")
    out, cur = [], ""
    for w in words:
        cur = f"{cur} {w}" if cur else w
        if len(cur) >= size:
            out.append(cur + " ")
            cur = ""
    if cur:
        out.append(cur)
    return out or [""]


def _chunk(base: dict, delta: dict, finish: str | None = None, **extra) -> str:
    return "data: " + json.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                                       "logprobs": None}], **extra}) + "\n\n"


async def _events(state: ServeState, served: Served, d: Decision, created: int, include_usage: bool = False):
    """The answer as server-sent events while it is generated: the role, then the generator's
    own tokens as the upstream endpoint streams them (:mod:`ragrouter.llm.streaming`), then
    whatever of the answer was not streamed (all of it for a cached reply or the iterative
    paradigm, whose rounds each generate), then the last chunk with ``finish_reason``,
    ``usage`` and the ``ragrouter`` decision (its stored run id included), then ``[DONE]``."""
    loop = asyncio.get_running_loop()
    pieces: asyncio.Queue = asyncio.Queue()
    end = object()
    sink = streaming.Sink(lambda piece: loop.call_soon_threadsafe(pieces.put_nowait, piece))
    live = sink if d.answer.paradigm != "iterative" else None
    base = {"id": f"chatcmpl-rr-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk", "created": created,
            "model": served.model_id, **({"usage": None} if include_usage else {})}  # OpenAI: null but in the last
    yield _chunk(base, {"role": "assistant"})
    task = asyncio.ensure_future(anyio.to_thread.run_sync(lambda: execute(state, d, served, live),
                                                          limiter=state.limiter))
    task.add_done_callback(lambda t: pieces.put_nowait(end))
    while (piece := await pieces.get()) is not end:
        yield _chunk(base, {"content": piece})
    try:
        a = task.result()
    except Exception as exc:  # noqa: BLE001 - the stream has begun: the error is its last event
        err = failure(state, exc, served)
        yield "data: " + json.dumps(error_body(err.message, err.type, err.code, err.param)) + "\n\n"
        return
    rest = a.answer[len(sink.text):] if a.answer.startswith(sink.text) else ""
    for piece in (_pieces(rest) if rest else []):
        yield _chunk(base, {"content": piece})
    yield _chunk(base, {}, d.finish_reason, ragrouter=_decision(a, d.routing_ms))
    if include_usage:  # OpenAI: a last chunk with no choices and the whole request's usage
        yield "data: " + json.dumps({**base, "choices": [], "usage": _usage(a)}) + "\n\n"
    yield "data: [DONE]\n\n"


def create_app(state: ServeState, *, max_body: int = DEFAULT_MAX_BODY, api_key: str | None = None):
    """The ASGI application: the FastAPI routes behind :class:`ragrouter.serve.guard.Guard`
    (the API key, the body-size limit)."""
    app = FastAPI(title="ragrouter serve", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(ServeError)
    async def _serve_error(request: Request, exc: ServeError):
        return JSONResponse(error_body(exc.message, exc.type, exc.code, exc.param), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        msg = f"Unknown path {request.url.path}" if exc.status_code == 404 else str(exc.detail)
        return JSONResponse(error_body(msg, kind, "not_found" if exc.status_code == 404 else None),
                            status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return JSONResponse(error_body("invalid request body", "invalid_request_error"), status_code=400)

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.get("/version")
    def version():
        return {"version": __version__, "name": "ragrouter", "api": "openai-chat-completions",
                "models": [s.model_id for s in state.corpora.values()]}

    @app.get("/v1/models")
    def models():
        data = []
        for s in state.corpora.values():
            info = {"router": s.chosen.router, "features": s.chosen.features, "encoder": s.chosen.encoder,
                    "router_run_id": s.chosen.run_id}
            if s.threshold is not None:
                info["cost_share"] = {"share": s.threshold.share, "threshold": s.threshold.json_tau,
                                      "calibrated_share": s.threshold.calibrated_share, **s.counts}
            data.append({"id": s.model_id, "object": "model", "created": s.created, "owned_by": "ragrouter",
                         "ragrouter": info})
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        served = None
        try:
            body = parse_body(await request.body())  # within --max-body-bytes: the guard read it
            served = _served(state, body.get("model"))
            req = chat_request(body, state.query_types)
            return await _answer(state, served, req)
        except Exception as exc:  # noqa: BLE001 - one OpenAI-shaped error, one log line (no traceback)
            err = failure(state, exc, served)
            return JSONResponse(error_body(err.message, err.type, err.code, err.param), status_code=err.status)

    return Guard(app, max_body=max_body, api_key=api_key)


async def _answer(state: ServeState, served: Served, req: ChatRequest):
    question = req.question

    def checked_decide():
        n_tokens = _count_tokens(question)
        if n_tokens > state.max_question_tokens:
            raise ServeError(400, f"This question is {n_tokens} tokens long; the server takes at most "
                             f"{state.max_question_tokens} (--max-question-tokens).", "invalid_request_error",
                             code="context_length_exceeded", param="messages")
        settings = state.answer_settings(req)
        state.prefetch(question)  # checked, not yet routed: its embedding overlaps the routing
        t0 = time.perf_counter()
        d = decide(state, served, question, req.query_type)
        d.routing_ms = round(1000 * (time.perf_counter() - t0), 2)
        d.settings = settings
        return d

    # blocking work (the router, the store, upstream calls) runs in worker threads, never on the loop
    if state.limiter is None:
        state.limiter = anyio.CapacityLimiter(max(64, 2 * state.max_concurrency))
    d = await anyio.to_thread.run_sync(checked_decide, limiter=state.limiter)
    created = int(time.time())
    if not req.stream:
        a = await anyio.to_thread.run_sync(lambda: execute(state, d, served), limiter=state.limiter)
        cid = f"chatcmpl-rr{a.run_id}-{uuid.uuid4().hex[:8]}"
        return JSONResponse({"id": cid, "object": "chat.completion", "created": created, "model": served.model_id,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": a.answer,
                                                                  "refusal": None},
                                          "finish_reason": d.finish_reason, "logprobs": None}],
                             "usage": _usage(a), "ragrouter": _decision(a, d.routing_ms)}, headers=_headers(a))
    return StreamingResponse(_events(state, served, d, created, req.include_usage), media_type="text/event-stream",
                             headers=_headers(d.answer, with_run=False))


def prepare(engine, config, services, corpora: list[str], router: str | None, run_id: str | None,
            budget: int | None, cost_share: float | None, cheap: tuple[str, ...],
            max_question_tokens: int = 4096, prefetch_embedding: bool = True) -> ServeState:
    """Check every corpus can be routed (its router exists and loads, its indicators exist)
    and calibrate the cost-share threshold; ServeError(503) names what is missing."""
    generator = config.generators()[0]
    served: dict[str, Served] = {}
    for corpus in corpora:
        try:
            lookup.corpus_id(engine, corpus)
        except Exception as exc:  # noqa: BLE001 - lookup raises its own error for an unknown corpus
            raise ServeError(404, f"corpus '{corpus}': {exc}", "invalid_request_error") from None
        if lookup.corpus_indicators(engine, corpus) is None:
            raise ServeError(503, f"corpus '{corpus}' has no indicators yet: run 'python cli.py run --stage metrics "
                             f"--corpus {corpus}'", "server_error")
        try:
            chosen = ask_mod.choose_router(engine, config, generator, router, run_id)
            ask_mod.load_router(config, chosen, routing.store_id(engine))
        except ask_mod.AskError as exc:
            raise ServeError(503, str(exc), "server_error") from None
        threshold = None
        if cost_share is not None:
            try:
                threshold = calibration.calibrate(lookup.router_cv_probabilities(engine, chosen.run_id), cost_share,
                                                   cheap)
            except ValueError as exc:
                raise ServeError(503, str(exc), "server_error") from None

        cid = lookup.corpus_id(engine, corpus)
        with write_lock(engine), engine.connect() as conn:
            index = lookup.corpus_index(conn, cid, corpus, config)
        served[corpus] = Served(corpus, chosen, threshold, index, created=ask_mod.router_created(config, chosen))
    state = ServeState(engine, config, services, served, router, run_id, budget, max_question_tokens)
    if prefetch_embedding and _embeds(services.gateway):
        from concurrent.futures import ThreadPoolExecutor

        state.prefetcher = ThreadPoolExecutor(2 * state.max_concurrency, thread_name_prefix="serve-prefetch")
    _warm(state)
    return state


def _embeds(gateway) -> bool:
    """Whether the config's embedder role is a backend that serves embeddings."""
    try:
        return bool(gateway.backend(EMBEDDER).supports_embeddings)
    except Exception:  # noqa: BLE001 - no embedder role: nothing to prefetch
        return False


def _warm(state: ServeState) -> None:
    """Everything a request would otherwise do once, done before the first: the MiniLM
    encoder loaded and run (micro-batched from here on), the type centroids encoded, each
    corpus' router loaded and its constants memoised; the store's batched writer started."""
    tokens.count("warm up")  # the tokenizer of --max-question-tokens
    encoder = get_encoder(str(state.config.get("scoring.encoder")))
    try:
        ask_mod.query_type_centroids(state.engine, encoder, memo=True)
    except ask_mod.AskError:  # no labelled questions: clients must send query_type
        encoder = None
    state.router_batch = pipeline.router_batcher(state.engine, state.config, encoder, state.services, state.router)
    state.query_types = state.router_batch.types
    state.query_writer = pipeline.query_writer(state.engine)
    state.writer = pipeline.store_writer(state.config, state.services.gateway)
    for s in state.corpora.values():
        if s.chosen.encoder not in ("onehot", "none"):
            continue  # routing it calls the gateway (an embedding): nothing to warm without paying
        try:
            routed = state.router_batch((s.corpus, s.chosen.run_id, "warm-up question",
                                         None if encoder is not None else "factual"))
        except ask_mod.AskError as exc:
            raise ServeError(503, str(exc), "server_error") from None
        ask_mod.plan(state.engine, routed, memo=True)
