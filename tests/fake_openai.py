"""A scripted fake OpenAI-compatible HTTP server for tests and benchmarks.

Usage::

    with FakeOpenAI(responder=lambda req: "Paris", latency_s=0.05, fault_rate=0.3, seed=1) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0)
        ...
        srv.stats()   # {'total': .., 'by_path': {..}, 'by_fault': {..}, ...}

It binds to 127.0.0.1 on a free port and serves from a background thread, one thread per
connection (stdlib ``ThreadingHTTPServer``), so concurrent requests overlap their latency.

Endpoints:
    ``POST /v1/chat/completions`` — the assistant content comes from ``responder(request_json)``:
        a ``str`` is sent as is, a ``dict``/``list`` as its JSON text. The default,
        :func:`default_responder`, echoes the last user message (as ``{"echo": ...}`` in
        ``json_object`` mode, or a schema-shaped object in ``json_schema`` mode).
        ``stop`` (a string or a list) ends the reply before the first stop sequence it holds
        (not returned; ``finish_reason="stop"``); ``max_tokens``/``max_completion_tokens`` cut
        the reply (``finish_reason="length"``).
        ``stream=true`` answers as server-sent events, as OpenAI documents them: ``data: {chunk}``
        lines (``chat.completion.chunk``: the role, then the content a word at a time — one
        chunk every ``stream_chunk_delay_s`` seconds after the first, which comes after
        ``latency_s`` —, then an empty delta with the ``finish_reason``; with
        ``stream_options.include_usage`` a last chunk with no choices and the ``usage``), then
        ``data: [DONE]``; ``stream_log`` keeps (monotonic time, text) of every content chunk sent.
    ``POST /v1/embeddings`` — deterministic unit vectors seeded by the sha256 of each input
        (``embedding_dim`` wide, or the request's ``dimensions``), as floats or base64.
    ``GET /v1/models`` — the configured model ids.

Usage accounting (unless ``omit_usage=True``), with ``ragrouter.llm.tokens.count`` (cl100k):
    chat: ``prompt_tokens`` = sum of ``count(text)`` over all messages' text (string content,
    or the ``text`` parts of list content), ``completion_tokens`` = ``count(content)``;
    embeddings: ``prompt_tokens`` = ``total_tokens`` = sum of ``count(input)``.

Faults (``FAULTS``), injected on POST requests:
    ``rate_limit``     HTTP 429 with ``Retry-After`` (seconds, rounded up) and ``retry-after-ms``;
    ``server_error``   HTTP 500;
    ``timeout``        the reply is delayed by ``timeout_fault_s`` (set the client's timeout lower);
    ``malformed_json`` a json-mode chat reply whose content is not valid JSON;
    ``empty_content``  a chat reply with ``content == ""``.
A request gets a fault either from ``fault_plan`` (a sequence of fault names or ``None``,
consumed one per POST request, in arrival order) or, once the plan is used up, with probability
``fault_rate`` from a ``random.Random(seed)``: each POST draws two numbers (fault or not; which
one among the enabled ``faults`` that apply to this request — ``malformed_json`` only to json-mode
chat, ``empty_content`` only to chat). The sequence of draws is deterministic; with concurrent
requests, which request gets which draw follows arrival order.

Providers (``provider=``): what the real API accepts, so a request it would reject gets the
same 400 here. ``None`` (default) accepts any well-formed request.
    ``openai``    unknown top-level arguments are rejected ("Unrecognized request argument");
                  reasoning models (``o1``/``o3``/``o4``/``gpt-5`` ids) reject ``max_tokens``,
                  ``top_p`` and any ``temperature`` but 1; ``json_object`` needs "json" in a
                  message. A reasoning model first spends ``reasoning_tokens`` hidden tokens out of
                  ``max_completion_tokens`` (OpenAI's reasoning guide): when they use it all the
                  reply is empty with ``finish_reason: length``; ``usage.completion_tokens``
                  includes them and ``completion_tokens_details.reasoning_tokens`` names them.
    ``deepseek``  ``response_format`` ``json_schema`` is rejected (only ``json_object``, which
                  needs "json" in a message).
    ``ollama``    as Ollama's documentation and issues (#2677, #5356, #16814) describe it: the
                  OpenAI-compatible ``/v1/chat/completions`` accepts ``options`` but ignores it and
                  serves the server's context (``ollama_default_ctx``, 2048): a longer prompt is cut
                  from the front *silently*, the usage reports the cut prompt and the responder sees
                  the cut messages. The native ``POST /api/chat`` honours ``options.num_ctx`` and
                  ``options.num_predict`` and ``format``, and answers in the native shape
                  (``message``, ``done_reason``, ``prompt_eval_count``, ``eval_count``).
    ``vllm``      accepts vLLM's extra sampling arguments (``top_k``, ``min_p``,
                  ``repetition_penalty``, ``guided_json`` …); prompt + ``max_tokens`` above
                  ``vllm_max_model_len`` is a 400, as in vLLM.
Every POST records its headers (``requests[i]["headers"]``, lower-case names).

Rate limits (``requests_per_minute`` / ``tokens_per_minute``, over a sliding ``rate_window_s``,
default 60 s): a request that would exceed either (its tokens = prompt + completion of the
reply it would get) is answered 429 with ``Retry-After`` until enough of the window expires,
and is not counted; ``stats()["rate_limited"]`` counts them and ``admitted_log`` keeps
(time, tokens) of every admitted request.

Counters: ``total`` requests, ``by_path``, ``by_fault``, ``responder_errors``,
``peak_in_flight`` (most POST requests handled at once); ``requests`` keeps each request
(method, path, JSON body, fault) for assertions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from ragrouter.llm import tokens

PROVIDERS = (None, "openai", "deepseek", "ollama", "vllm")
OPENAI_CHAT_ARGS = frozenset({
    "model", "messages", "temperature", "top_p", "n", "stream", "stream_options", "stop", "max_tokens",
    "max_completion_tokens", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "user", "seed", "response_format", "tools", "tool_choice", "parallel_tool_calls", "reasoning_effort",
    "service_tier", "store", "metadata", "modalities", "prediction", "audio", "verbosity", "web_search_options",
    "prompt_cache_key", "safety_identifier",
})
VLLM_EXTRA_ARGS = frozenset({
    "top_k", "min_p", "repetition_penalty", "length_penalty", "min_tokens", "ignore_eos", "skip_special_tokens",
    "guided_json", "guided_regex", "guided_choice", "guided_grammar", "chat_template_kwargs", "use_beam_search",
    "best_of", "stop_token_ids", "include_stop_str_in_output", "spaces_between_special_tokens",
})


def is_reasoning_model(model: str) -> bool:
    """OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 …)."""
    m = str(model).lower()
    return m.startswith(("o1", "o3", "o4", "gpt-5"))


FAULTS = ("rate_limit", "server_error", "timeout", "malformed_json", "empty_content")
CHAT_ONLY_FAULTS = frozenset({"malformed_json", "empty_content"})

Responder = Callable[[dict], "str | dict | list"]


# --------------------------------------------------------------------------- request helpers


def message_text(message: dict) -> str:
    """The text of one chat message (string content, or the ``text`` parts of list content)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    return str(content)


def last_user_text(request: dict) -> str:
    """Text of the last ``user`` message of a chat request ("" when there is none)."""
    for message in reversed(request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message)
    return ""


def json_mode(request: dict) -> str | None:
    """``"json_object"``, ``"json_schema"`` or ``None`` from the request's ``response_format``."""
    fmt = request.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        return fmt["type"]
    return None


def instance_from_schema(schema: dict, text: str) -> Any:
    """A small value that satisfies a (simple) JSON schema; strings are filled with ``text``."""
    if not isinstance(schema, dict):
        return text
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return instance_from_schema(schema[key][0], text)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        return {name: instance_from_schema(sub, text) for name, sub in props.items()}
    if kind == "array":
        n = int(schema.get("minItems", 0))
        return [instance_from_schema(schema.get("items") or {}, text) for _ in range(n)]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return text


def default_responder(request: dict) -> str | dict:
    """Deterministic echo of the last user message.

    Plain mode: ``"echo: <text>"``; ``json_object``: ``{"echo": "<text>"}``; ``json_schema``:
    an instance of the schema with every string set to the text.
    """
    text = last_user_text(request)
    mode = json_mode(request)
    if mode == "json_object":
        return {"echo": text}
    if mode == "json_schema":
        schema = (request["response_format"].get("json_schema") or {}).get("schema") or {}
        return instance_from_schema(schema, text)
    return f"echo: {text}"


def fake_embedding(text: str, dim: int) -> np.ndarray:
    """Unit float32 vector seeded by sha256(text): same text → same vector."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vec / np.linalg.norm(vec)


def _malformed(content: str) -> str:
    """``content`` made into text that ``json.loads`` rejects (a truncated object)."""
    stripped = content.rstrip()
    bad = stripped[:-1] if stripped.endswith(("}", "]")) and len(stripped) > 1 else "{" + stripped
    try:
        json.loads(bad)
    except ValueError:
        return bad
    return '{"malformed": '


def _error_body(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, addr, handler, fake: FakeOpenAI):
        self.fake = fake
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(addr, handler)

    def get_request(self):
        sock, addr = super().get_request()
        with self.sockets_lock:
            self.open_sockets.add(sock)
        return sock, addr

    def shutdown_request(self, request):
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):  # quiet: clients that gave up are expected
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in two send() calls: with Nagle's algorithm on, the body would
    # wait ~40 ms for the client's delayed ACK
    disable_nagle_algorithm = True
    server_version = "FakeOpenAI/1.0"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid a 40 ms stall

    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def do_GET(self):  # noqa: N802 - stdlib name
        status, body, headers = self.server.fake._handle_get(self.path)
        self._send(status, body, headers)

    def do_POST(self):  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, body, headers = self.server.fake._handle_post(self.path, raw,
                                                              {k.lower(): v for k, v in self.headers.items()})
        request = _json_or_none(raw)
        if status == 200 and isinstance(request, dict) and request.get("stream") is True and \
                isinstance(body, dict) and body.get("object") == "chat.completion":
            opts = request.get("stream_options") if isinstance(request.get("stream_options"), dict) else {}
            self._send_events(self.server.fake.stream_chunks(body, bool(opts.get("include_usage"))))
            return
        self._send(status, body, headers)

    def _send_events(self, chunks) -> None:
        """Server-sent events, one ``data:`` line per chunk, chunked transfer encoding."""
        fake = self.server.fake
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i, chunk in enumerate(chunks):
                text = _delta_text(chunk)
                if text and i > 1 and fake.stream_chunk_delay_s:
                    fake._stop.wait(fake.stream_chunk_delay_s)
                data = (b"data: " + (chunk if isinstance(chunk, bytes) else json.dumps(chunk).encode("utf-8"))
                        + b"\n\n")
                self.wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
                self.wfile.flush()
                if text:
                    with fake._lock:
                        fake.stream_log.append((time.monotonic(), text))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True


def _json_or_none(raw: bytes):
    try:
        return json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, ValueError):
        return None


def _delta_text(chunk) -> str:
    if not isinstance(chunk, dict):
        return ""
    for choice in chunk.get("choices") or []:
        piece = (choice.get("delta") or {}).get("content")
        if piece:
            return piece
    return ""


class FakeOpenAI:
    """Scripted OpenAI-compatible server (see the module docstring).

    Args:
        responder: ``request_json -> str | dict`` giving the assistant content.
        latency_s: fixed delay before every POST reply.
        fault_rate: probability that a POST request gets a fault (after ``fault_plan``).
        faults: the enabled fault kinds (subset of :data:`FAULTS`).
        seed: seed of the fault RNG.
        fault_plan: faults (or ``None``) for the first POST requests, in order.
        timeout_fault_s: how long a ``timeout`` fault holds the reply.
        retry_after_s: the delay a ``rate_limit`` fault asks for.
        embedding_dim: width of the fake embeddings (a request's ``dimensions`` overrides it).
        omit_usage: leave ``usage`` out of replies (clients must count tokens themselves).
        models: ids listed by ``GET /v1/models``.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency_s: float = 0.0,
        fault_rate: float = 0.0,
        faults: Iterable[str] = FAULTS,
        seed: int = 0,
        fault_plan: Sequence[str | None] | None = None,
        timeout_fault_s: float = 5.0,
        retry_after_s: float = 0.05,
        embedding_dim: int = 64,
        omit_usage: bool = False,
        models: Sequence[str] = ("fake-model",),
        provider: str | None = None,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        rate_window_s: float = 60.0,
        ollama_default_ctx: int = 2048,
        vllm_max_model_len: int = 32768,
        cached_prompt_tokens: int = 0,
        reasoning_tokens: int = 0,
        stream_chunk_delay_s: float = 0.0,
    ):
        self.faults = tuple(faults)
        for name in list(self.faults) + [f for f in (fault_plan or []) if f is not None]:
            if name not in FAULTS:
                raise ValueError(f"FakeOpenAI: unknown fault {name!r} (known: {', '.join(FAULTS)})")
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"FakeOpenAI: fault_rate must be in [0, 1], got {fault_rate}")
        if latency_s < 0 or timeout_fault_s < 0 or retry_after_s < 0:
            raise ValueError("FakeOpenAI: latency_s, timeout_fault_s and retry_after_s must be >= 0")
        if embedding_dim < 1:
            raise ValueError(f"FakeOpenAI: embedding_dim must be >= 1, got {embedding_dim}")
        self.responder = responder or default_responder
        self.latency_s = float(latency_s)
        self.fault_rate = float(fault_rate)
        self.seed = seed
        self.timeout_fault_s = float(timeout_fault_s)
        self.retry_after_s = float(retry_after_s)
        self.embedding_dim = int(embedding_dim)
        self.omit_usage = bool(omit_usage)
        self.models = tuple(models)
        if provider not in PROVIDERS:
            raise ValueError(f"FakeOpenAI: unknown provider {provider!r} (known: {', '.join(map(str, PROVIDERS))})")
        self.provider = provider
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.rate_window_s = float(rate_window_s)
        self.ollama_default_ctx = int(ollama_default_ctx)
        self.vllm_max_model_len = int(vllm_max_model_len)
        self.cached_prompt_tokens = int(cached_prompt_tokens)
        self.reasoning_tokens = int(reasoning_tokens)
        self.stream_chunk_delay_s = float(stream_chunk_delay_s)
        self.stream_log: list[tuple[float, str]] = []
        self._window: list[tuple[float, int]] = []
        self.admitted_log: list[tuple[float, int]] = []
        self.rate_limited = 0
        self._plan = list(fault_plan or [])
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0
        self.total = 0
        self.by_path: Counter[str] = Counter()
        self.by_fault: Counter[str] = Counter()
        self.responder_errors = 0
        self.in_flight = 0  # POST requests being handled right now
        self.peak_in_flight = 0  # the most POST requests handled at once
        self.requests: list[dict] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeOpenAI:
        if self._httpd is not None:
            return self
        tokens.count("warm up")  # load the tokenizer once, before request threads race for it
        self._stop.clear()
        self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="FakeOpenAI", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stop.set()  # wakes handlers sleeping in latency / timeout faults
        httpd.shutdown()
        with httpd.sockets_lock:
            socks = list(httpd.open_sockets)
        for sock in socks:  # unblock keep-alive connections waiting for a next request
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAI is not running (use start() or a with block)")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` — pass to ``openai.OpenAI(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------------ counters

    def stats(self) -> dict:
        """A snapshot of the counters."""
        with self._lock:
            return {
                "total": self.total,
                "by_path": dict(self.by_path),
                "by_fault": dict(self.by_fault),
                "responder_errors": self.responder_errors,
                "peak_in_flight": self.peak_in_flight,
                "rate_limited": self.rate_limited,
            }

    def reset(self) -> None:
        """Zero the counters and forget recorded requests (the RNG and plan are untouched)."""
        with self._lock:
            self.total = 0
            self.by_path.clear()
            self.by_fault.clear()
            self.responder_errors = 0
            self.peak_in_flight = self.in_flight
            self.requests.clear()
            self.rate_limited = 0
            self.admitted_log.clear()

    def _record(self, method: str, path: str, body: Any) -> dict:
        entry = {"method": method, "path": path, "body": body, "fault": None, "t": time.monotonic()}
        with self._lock:
            self.total += 1
            self.by_path[path] += 1
            self.requests.append(entry)
        return entry

    def _pick_fault(self, applicable: Sequence[str]) -> str | None:
        with self._lock:
            if self._plan:
                fault = self._plan.pop(0)
            else:
                draw, which = self._rng.random(), self._rng.random()
                enabled = [f for f in self.faults if f in applicable]
                fault = enabled[int(which * len(enabled))] if draw < self.fault_rate and enabled else None
            if fault is not None and fault not in applicable:
                fault = None  # e.g. a chat-only fault planned for an embeddings request
            if fault is not None:
                self.by_fault[fault] += 1
            return fault

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    # ------------------------------------------------------------------ handlers

    def _handle_get(self, path: str):
        path = path.split("?", 1)[0].rstrip("/")
        self._record("GET", path, None)
        if path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
            return 200, {"object": "list", "data": data}, {}
        return 404, _error_body(f"no route GET {path}", "invalid_request_error", "not_found"), {}

    def _handle_post(self, path: str, raw: bytes, headers: dict | None = None):
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return self._handle_post_inner(path, raw, headers or {})
        finally:
            with self._lock:
                self.in_flight -= 1

    def _handle_post_inner(self, path: str, raw: bytes, headers: dict):
        path = path.split("?", 1)[0].rstrip("/")
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, ValueError):
            body = None
        entry = self._record("POST", path, body)
        entry["headers"] = headers
        if path == "/api/chat" and self.provider == "ollama":
            return self._ollama_native(body)
        if path not in ("/v1/chat/completions", "/v1/embeddings"):
            return 404, _error_body(f"no route POST {path}", "invalid_request_error", "not_found"), {}
        if not isinstance(body, dict):
            return 400, _error_body("request body is not a JSON object", "invalid_request_error"), {}
        chat = path == "/v1/chat/completions"
        problem = self._validate_chat(body) if chat else self._validate_embeddings(body)
        if problem is None and chat:
            problem = self._validate_provider(body)
        if problem:
            return 400, _error_body(problem, "invalid_request_error"), {}
        if chat and self.provider == "ollama":
            body = self._ollama_truncate(body)
        if self.requests_per_minute or self.tokens_per_minute:
            wait = self._admit(self._charge(body, chat))
            if wait is not None:
                headers = {"Retry-After": str(max(1, math.ceil(wait))), "retry-after-ms": str(int(wait * 1000) + 1)}
                return 429, _error_body("Rate limit reached (fake limits)", "requests", "rate_limit_exceeded"), headers
        applicable = [f for f in FAULTS if chat or f not in CHAT_ONLY_FAULTS]
        if chat and json_mode(body) is None:
            applicable.remove("malformed_json")
        fault = self._pick_fault(applicable)
        entry["fault"] = fault
        if self.latency_s:
            self._stop.wait(self.latency_s)
        if fault == "rate_limit":
            headers = {
                "Retry-After": str(max(1, math.ceil(self.retry_after_s))) if self.retry_after_s else "0",
                "retry-after-ms": str(int(round(self.retry_after_s * 1000))),
            }
            return 429, _error_body("Rate limit reached (fake)", "requests", "rate_limit_exceeded"), headers
        if fault == "server_error":
            return 500, _error_body("The server had an error (fake)", "server_error"), {}
        if fault == "timeout":
            self._stop.wait(self.timeout_fault_s)
        if chat:
            return self._chat(body, fault)
        return self._embeddings(body)

    @staticmethod
    def _validate_chat(body: dict) -> str | None:
        if not body.get("model"):
            return "chat request without 'model'"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "chat request without a non-empty 'messages' list"
        if body.get("stream") not in (None, False, True):
            return "'stream' must be a boolean"
        return None

    def _validate_provider(self, body: dict) -> str | None:
        """The 400 message the real provider gives this chat request (None: it accepts it)."""
        prov, mode = self.provider, json_mode(body)
        if prov is None:
            return None
        text = " ".join(message_text(m) for m in body["messages"] if isinstance(m, dict)).lower()
        if prov in ("openai", "deepseek") and mode == "json_object" and "json" not in text:
            return ("'messages' must contain the word 'json' in some form, to use 'response_format' of type "
                    "'json_object'.")
        if prov == "deepseek" and mode == "json_schema":
            return "This response_format type is unavailable now"
        if prov == "openai":
            unknown = sorted(set(body) - OPENAI_CHAT_ARGS)
            if unknown:
                return f"Unrecognized request argument supplied: {unknown[0]}"
            if is_reasoning_model(body["model"]):
                if "max_tokens" in body:
                    return ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                            "Use 'max_completion_tokens' instead.")
                if "temperature" in body and body["temperature"] != 1:
                    return (f"Unsupported value: 'temperature' does not support {body['temperature']} with this "
                            "model. Only the default (1) value is supported.")
                if "top_p" in body:
                    return "Unsupported parameter: 'top_p' is not supported with this model."
        if prov == "vllm":
            unknown = sorted(set(body) - OPENAI_CHAT_ARGS - VLLM_EXTRA_ARGS)
            if unknown:
                return f"Unrecognized request argument supplied: {unknown[0]}"
            prompt = sum(tokens.count(message_text(m)) for m in body["messages"] if isinstance(m, dict))
            limit = body.get("max_completion_tokens") or body.get("max_tokens") or 0
            if prompt + limit > self.vllm_max_model_len:
                return (f"This model's maximum context length is {self.vllm_max_model_len} tokens. However, you "
                        f"requested {prompt + limit} tokens ({prompt} in the messages, {limit} in the completion).")
        return None

    def _ollama_native(self, body):
        """Ollama's native chat: options.num_ctx / num_predict / format take effect."""
        if not isinstance(body, dict) or not body.get("model") or not isinstance(body.get("messages"), list):
            return 400, {"error": "invalid request: model and messages are required"}, {}
        if body.get("stream", True) is not False:
            return 400, {"error": "FakeOpenAI serves only stream=false on /api/chat"}, {}
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        cut = self._ollama_truncate(body, int(options.get("num_ctx") or self.ollama_default_ctx))
        if self.latency_s:
            self._stop.wait(self.latency_s)
        reply = self.responder(cut)
        content = reply if isinstance(reply, str) else json.dumps(reply)
        done = "stop"
        limit = options.get("num_predict")
        ids = tokens.encoding().encode(content, disallowed_special=())
        if isinstance(limit, int) and 0 < limit < len(ids):
            content, done = tokens.encoding().decode(ids[:limit]), "length"
        prompt = sum(tokens.count(message_text(m)) for m in cut["messages"] if isinstance(m, dict))
        return 200, {"model": body["model"], "created_at": "2026-01-01T00:00:00Z",
                     "message": {"role": "assistant", "content": content}, "done": True, "done_reason": done,
                     "prompt_eval_count": prompt, "eval_count": tokens.count(content)}, {}

    def _ollama_truncate(self, body: dict, ctx: int | None = None) -> dict:
        """What Ollama does with a prompt longer than its context: drops the front, silently.
        On the OpenAI endpoint the context is the server's (``options`` is ignored)."""
        ctx = int(ctx or self.ollama_default_ctx)
        enc = tokens.encoding()
        ids = [enc.encode(message_text(m), disallowed_special=()) for m in body["messages"]]
        if sum(map(len, ids)) <= ctx:
            return body
        left, kept = ctx, []
        for message, toks in zip(reversed(body["messages"]), reversed(ids)):
            if left <= 0:
                break
            part = toks[-left:]
            left -= len(part)
            kept.append({**message, "content": enc.decode(part)})
        return {**body, "messages": list(reversed(kept)), "_truncated_to": ctx}

    def _charge(self, body: dict, chat: bool) -> int:
        """Tokens a request counts against the fake's tokens-per-minute: what its reply reports."""
        if not chat:
            raw = body["input"]
            return sum(tokens.count(x) for x in ([raw] if isinstance(raw, str) else raw) if isinstance(x, str))
        prompt = sum(tokens.count(message_text(m)) for m in body["messages"] if isinstance(m, dict))
        try:
            reply = self.responder(body)
        except Exception:  # noqa: BLE001 - the real call reports it
            return prompt
        content = reply if isinstance(reply, str) else json.dumps(reply)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        out = tokens.count(content)
        return prompt + (min(out, limit) if isinstance(limit, int) and limit > 0 else out)

    def _admit(self, charge: int) -> float | None:
        """Count a request in the sliding window, or return how long it must wait (429)."""
        with self._lock:
            now = time.monotonic()
            self._window = [(t, k) for t, k in self._window if t > now - self.rate_window_s]
            wait = 0.0
            if self.requests_per_minute and len(self._window) + 1 > self.requests_per_minute:
                wait = self._window[len(self._window) - self.requests_per_minute][0] + self.rate_window_s - now
            used = sum(k for _, k in self._window)
            if self.tokens_per_minute and self._window and used + charge > self.tokens_per_minute:
                freed, excess = 0, used + charge - self.tokens_per_minute
                for t, k in self._window:
                    freed += k
                    if freed >= excess:
                        wait = max(wait, t + self.rate_window_s - now)
                        break
            if wait > 0:
                self.rate_limited += 1
                return wait
            self._window.append((now, charge))
            self.admitted_log.append((now, charge))
            return None

    @staticmethod
    def _validate_embeddings(body: dict) -> str | None:
        if not body.get("model"):
            return "embeddings request without 'model'"
        if body.get("input") in (None, "", []):
            return "embeddings request without 'input'"
        dims = body.get("dimensions")
        if dims is not None and (not isinstance(dims, int) or dims < 1):
            return f"embeddings request with invalid 'dimensions': {dims!r}"
        return None

    def _chat(self, body: dict, fault: str | None):
        try:
            reply = self.responder(body)
        except Exception as exc:  # noqa: BLE001 - a broken responder must be visible to the test
            with self._lock:
                self.responder_errors += 1
            return 500, _error_body(f"responder raised {type(exc).__name__}: {exc}", "server_error"), {}
        content = reply if isinstance(reply, str) else json.dumps(reply)
        finish = "stop"
        stops = body.get("stop")
        stops = [stops] if isinstance(stops, str) else [x for x in (stops or []) if isinstance(x, str) and x]
        cuts = [content.find(x) for x in stops if x in content]
        if cuts:  # OpenAI: generation ends before the first stop sequence, which is not returned
            content = content[:min(cuts)]
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        reasoning = self.reasoning_tokens if (self.provider == "openai" and is_reasoning_model(body["model"])) else 0
        if isinstance(limit, int) and limit > 0:
            reasoning = min(reasoning, limit)  # hidden reasoning comes out of the same cap
            ids = tokens.encoding().encode(content, disallowed_special=())
            if len(ids) > limit - reasoning:
                content, finish = tokens.encoding().decode(ids[:max(0, limit - reasoning)]), "length"
        if fault == "malformed_json":
            content = _malformed(content)
        elif fault == "empty_content":
            content = ""
        out = {
            "id": f"chatcmpl-fake-{self._next_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": "fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
        }
        if not self.omit_usage:
            prompt = sum(tokens.count(message_text(m)) for m in body["messages"] if isinstance(m, dict))
            completion = tokens.count(content) + reasoning
            out["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            if reasoning:
                out["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning}
            if self.cached_prompt_tokens:
                out["usage"]["prompt_tokens_details"] = {"cached_tokens": min(prompt, self.cached_prompt_tokens)}
        return 200, out, {}

    @staticmethod
    def stream_chunks(reply: dict, include_usage: bool) -> list:
        """The ``chat.completion.chunk`` events of a whole ``reply``, then ``[DONE]``."""
        import re

        base = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"],
                "model": reply["model"], "system_fingerprint": reply.get("system_fingerprint")}
        choice = reply["choices"][0]
        content = choice["message"]["content"] or ""
        out: list = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                            "finish_reason": None, "logprobs": None}]}]
        for piece in re.findall(r"\s*\S+\s*", content) or ([content] if content else []):
            out.append({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None,
                                             "logprobs": None}]})
        out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"],
                                         "logprobs": None}]})
        if include_usage and "usage" in reply:
            out.append({**base, "choices": [], "usage": reply["usage"]})
        out.append(b"[DONE]")
        return out

    def _embeddings(self, body: dict):
        raw = body["input"]
        if isinstance(raw, str):
            texts = [raw]
        elif raw and all(isinstance(x, int) for x in raw):  # one pre-tokenised input
            texts = [" ".join(map(str, raw))]
        else:
            texts = [x if isinstance(x, str) else " ".join(map(str, x)) for x in raw]
        dim = body.get("dimensions") or self.embedding_dim
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            vec = fake_embedding(text, dim)
            emb = base64.b64encode(vec.astype("<f4").tobytes()).decode("ascii") if b64 else vec.tolist()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        out = {"object": "list", "data": data, "model": body["model"]}
        if not self.omit_usage:
            n = sum(tokens.count(t) for t in texts)
            out["usage"] = {"prompt_tokens": n, "total_tokens": n}
        return 200, out, {}
