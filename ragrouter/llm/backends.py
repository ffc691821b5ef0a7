"""Model backends behind the gateway: one class per config ``kind``, in a dict registry.

A backend makes exactly one attempt at a request and reports the outcome; retries, caching,
concurrency limits and the ledger are the gateway's job (``ragrouter/llm/gateway.py``).

Kinds (``BACKENDS``):

``openai``
    Any OpenAI-compatible endpoint (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp) through the
    ``openai`` package with ``max_retries=0``. The API key is read from
    ``os.environ[api_key_env]`` at call time and never stored. An unset variable is an error
    naming the variable and the backend, except for keyless endpoints: a backend without
    ``api_key_env``, or whose ``base_url`` is on a loopback/private address (a local vLLM), or
    with ``api_key_required: false``, uses the dummy key ``EMPTY``.
``local``
    The embedded llama.cpp server: ``local_server.ensure_server(model, n_ctx, n_parallel,
    threads)`` is started on first use, then requests take exactly the ``openai`` code path,
    authenticated with the server's own random key.
``local-encoder``
    An in-process sentence encoder (``encoder.get_encoder(model)``); embeddings only, tokens
    from the encoder's own tokenizer.

Each HTTP attempt uses a client from a per-backend free-list (one per concurrent attempt, so
threads never queue on one connection pool's lock, all sharing one TLS context): by default
(``gateway.http_client: lean``) a plain JSON POST on a kept-alive ``http.client`` connection
(``ragrouter/llm/http.py``; through ``httpx2`` when the environment names a proxy), with
``sdk`` the ``openai`` client's generic ``post`` method; both map failures alike.

Backend settings read from the config (all optional except kind/model/base_url):
``concurrency`` (default 15), ``timeout_s`` (60), ``retries`` (3), ``batch_size`` (30 for
remote embeddings, 32 for encoders), ``structured_output`` (``json_schema`` | ``json_object``
| ``none``; default ``json_schema``), ``strict_schema`` (false), ``max_tokens_param``
(``max_tokens`` | ``max_completion_tokens``), ``dimensions`` (embeddings),
``encoding_format`` (``float`` | ``base64``), ``api_key_required`` (true/false), and for
``local``: ``n_ctx`` (total, shared by the slots) or ``n_ctx_per_slot``, ``n_parallel``,
``threads``, ``n_predict``.

Provider presets (``preset``): :mod:`ragrouter.llm.presets`.

Request settings of every HTTP backend: ``extra_body`` (a mapping merged into every chat
request body, e.g. vLLM's ``top_k`` or OpenAI's ``reasoning_effort``), ``headers`` (extra
HTTP headers; a value ``$NAME`` is read from the environment variable NAME at call time and
redacted like a key), ``seed``, ``top_p``. ``seed``, ``top_p`` and ``extra_body`` are part of
the cache key when set.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import threading
from typing import Any, Callable
from urllib.parse import urlsplit

import numpy as np

from ragrouter.llm import ollama, streaming
from ragrouter.llm.errors import (  # noqa: F401 - re-exported: the model layer's one vocabulary
    DUMMY_KEY,
    BackendError,
    ChatReply,
    EmbedReply,
    GatewayError,
    redact,
    retry_after,
    ssl_context,
)
from ragrouter.llm.http import LeanPoster
from ragrouter.llm.ollama import DEFAULT_NUM_CTX
from ragrouter.llm.presets import REASONING_ALLOWANCE, apply_preset, deep_merge
from ragrouter.llm.ratelimit import limiter_for
from ragrouter.llm.tokens import message_tokens

_retry_after = retry_after  # the old private name
STRUCTURED_MODES = ("json_schema", "json_object", "none")
CHAT_APIS = ("openai", "ollama")  # the chat wire format: OpenAI's /chat/completions, or Ollama's native /api/chat
# a reply whose server-counted prompt is below this share of the prompt sent was cut (tokenizers
# differ from cl100k by well under this on English: llama.cpp's counts run 1.02-1.35x ours on the
# demo; a model whose tokenizer is far denser than cl100k on the corpus' script may need a lower
# backends.<name>.cut_prompt_share, 0 to turn the check off)
CUT_PROMPT_SHARE = 0.5
CUT_PROMPT_MIN_TOKENS = 256

HTTP_CLIENTS = ("lean", "sdk")  # gateway.http_client: llm/http.py's direct POST, or the openai SDK
DEFAULTS = {"concurrency": 15, "timeout_s": 60.0, "retries": 3}


# --------------------------------------------------------------------------- secrets

def _is_local_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").strip("[]")
    if host in ("localhost", ""):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return host.endswith(".local") or host.endswith(".internal")
    return addr.is_loopback or addr.is_private or addr.is_link_local


# --------------------------------------------------------------------------- base class


class Backend:
    """Common settings of every kind. Subclasses implement ``chat_once`` and/or ``embed_once``."""

    kind = "abstract"
    supports_chat = True
    supports_embeddings = True
    http = True  # whether an attempt is an HTTP request
    default_batch_size = 30

    def __init__(self, name: str, spec: dict, *, source: str = "config"):
        self.name = name
        spec = apply_preset(name, spec, source=source)
        self.spec = dict(spec)
        self.where = f"{source}: backends.{name}"
        self.model = str(spec.get("model") or "")
        if not self.model:
            raise GatewayError("config", f"{self.where}.model is missing", backend=name)
        self.concurrency = self._int("concurrency", DEFAULTS["concurrency"], minimum=1)
        self.retries = self._int("retries", DEFAULTS["retries"], minimum=0)
        self.batch_size = self._int("batch_size", self.default_batch_size, minimum=1)
        self.timeout_s = self._float("timeout_s", DEFAULTS["timeout_s"])
        mode = spec.get("structured_output", "json_schema")
        if mode is None or mode is False:
            mode = "none"
        if mode not in STRUCTURED_MODES:
            raise GatewayError("config", f"{self.where}.structured_output must be one of "
                               f"{', '.join(STRUCTURED_MODES)} (got {mode!r})", backend=name)
        self.structured_output = mode
        self.dimensions = spec.get("dimensions")
        if self.dimensions is not None and (not isinstance(self.dimensions, int) or self.dimensions < 1):
            raise GatewayError("config", f"{self.where}.dimensions must be a positive integer", backend=name)
        self.reasoning = spec.get("reasoning", False)
        if not isinstance(self.reasoning, bool):
            raise GatewayError("config", f"{self.where}.reasoning must be true or false", backend=name)
        self.extra_body = spec.get("extra_body") or {}
        if not isinstance(self.extra_body, dict):
            raise GatewayError("config", f"{self.where}.extra_body must be a mapping", backend=name)
        clash = sorted(set(self.extra_body) & {"model", "messages", "stream", "input"})
        if clash:
            raise GatewayError("config", f"{self.where}.extra_body must not set {', '.join(clash)}", backend=name)
        self.headers = spec.get("headers") or {}
        if not isinstance(self.headers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                          for k, v in self.headers.items()):
            raise GatewayError("config", f"{self.where}.headers must map header names to strings", backend=name)
        self.seed = spec.get("seed")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise GatewayError("config", f"{self.where}.seed must be an integer", backend=name)
        self.top_p = spec.get("top_p")
        if self.top_p is not None and (isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float))
                                       or not 0 < self.top_p <= 1):
            raise GatewayError("config", f"{self.where}.top_p must be a number in (0, 1]", backend=name)
        if self.reasoning and self.top_p is not None:
            raise GatewayError("config", f"{self.where}: reasoning models reject top_p; remove it", backend=name)
        self.requests_per_minute = self._optional_int("requests_per_minute")
        self.tokens_per_minute = self._optional_int("tokens_per_minute")

    def _optional_int(self, key: str) -> int | None:
        value = self.spec.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise GatewayError("config", f"{self.where}.{key} must be a positive integer or null (got {value!r})",
                               backend=self.name)
        return value

    def limiter(self):
        """This backend's process-wide rate limiter (inactive when no limit is set)."""
        return limiter_for(self.name, getattr(self, "base_url", None), self.model, self.requests_per_minute,
                           self.tokens_per_minute)

    def request_settings(self) -> dict:
        """The request settings that change a reply (part of the cache key when set)."""
        out: dict = {}
        if self.seed is not None:
            out["seed"] = self.seed
        if self.top_p is not None:
            out["top_p"] = float(self.top_p)
        if self.extra_body:
            out["extra_body"] = self.extra_body
        return out

    def _int(self, key: str, default: int, minimum: int) -> int:
        value = self.spec.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise GatewayError("config", f"{self.where}.{key} must be an integer >= {minimum} (got {value!r})",
                               backend=self.name)
        return value

    def _float(self, key: str, default: float) -> float:
        value = self.spec.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise GatewayError("config", f"{self.where}.{key} must be a positive number (got {value!r})",
                               backend=self.name)
        return float(value)

    def secrets(self) -> list[str]:
        """Secret values this backend may hold right now (for redaction)."""
        return []

    def preflight(self) -> None:
        """Check what can be checked without a request (keys present); raise GatewayError."""

    def chat_once(self, messages: list[dict], *, temperature: float, max_tokens: int,
                  response_format: dict | None, timeout_s: float, stop: list[str] | None = None,
                  seed: int | None = None) -> ChatReply:
        raise GatewayError("config", f"backend '{self.name}' ({self.kind}) does not serve chat", backend=self.name)

    def embed_once(self, texts: list[str], *, timeout_s: float) -> EmbedReply:
        raise GatewayError("config", f"backend '{self.name}' ({self.kind}) does not serve embeddings",
                           backend=self.name)

    def close(self) -> None:
        """Release clients (process-wide servers are left running)."""


# --------------------------------------------------------------------------- openai kind


class OpenAIBackend(Backend):
    """Any OpenAI-compatible HTTP endpoint, through the ``openai`` package."""

    kind = "openai"

    def __init__(self, name: str, spec: dict, *, source: str = "config"):
        super().__init__(name, spec, source=source)
        self.base_url = spec.get("base_url")
        self.api_key_env = spec.get("api_key_env")
        if self.kind == "openai" and not self.base_url:
            raise GatewayError("config", f"{self.where}.base_url is missing", backend=name)
        if self.base_url is not None:
            parts = urlsplit(str(self.base_url))
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise GatewayError("config", f"{self.where}.base_url must be an http:// or https:// URL "
                                   f"(got {self.base_url!r})", backend=name)
        required = spec.get("api_key_required")
        if required is None:
            required = bool(self.api_key_env) and not _is_local_url(str(self.base_url or ""))
        self.key_required = bool(required)
        self.max_tokens_param = spec.get("max_tokens_param",
                                         "max_completion_tokens" if self.reasoning else "max_tokens")
        if self.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise GatewayError("config", f"{self.where}.max_tokens_param must be max_tokens or "
                               "max_completion_tokens", backend=name)
        self.chat_api = self.spec.get("chat_api", "openai")  # self.spec: with the preset filled in
        if self.chat_api not in CHAT_APIS:
            raise GatewayError("config", f"{self.where}.chat_api must be one of {', '.join(CHAT_APIS)}", backend=name)

        self.num_ctx = self._int("num_ctx", DEFAULT_NUM_CTX, minimum=64) if self.chat_api == "ollama" else None
        share = self.spec.get("cut_prompt_share", CUT_PROMPT_SHARE)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
            raise GatewayError("config", f"{self.where}.cut_prompt_share must be a number in [0, 1) (got {share!r})",
                               backend=name)
        self.cut_prompt_share = float(share)  # 0 turns the cut-prompt check off
        default_allowance = REASONING_ALLOWANCE if self.reasoning else 0
        self.reasoning_allowance = self._int("reasoning_allowance", default_allowance, minimum=0)
        self.encoding_format = spec.get("encoding_format", "float")
        if self.encoding_format not in ("float", "base64"):
            raise GatewayError("config", f"{self.where}.encoding_format must be float or base64", backend=name)
        self._idle_clients: list = []
        self._all_clients: list = []
        self._client_lock = threading.Lock()
        self._leans: dict = {}  # base URL -> llm/http.py's poster (http_client == "lean"; a native API's root)
        self.http_client = "lean"  # set by the gateway from gateway.http_client

    # -- key and client ---------------------------------------------------------------
    def api_key(self) -> str:
        """The key from the environment, now (a clear error when a required one is unset)."""
        if not self.api_key_env:
            return DUMMY_KEY
        value = os.environ.get(self.api_key_env)
        if value:
            return value
        if self.key_required:
            raise GatewayError(
                "missing_api_key",
                f"backend '{self.name}': environment variable {self.api_key_env} is not set "
                f"(it must hold the API key for {self.base_url})",
                backend=self.name,
            )
        return DUMMY_KEY

    def secrets(self) -> list[str]:
        value = os.environ.get(self.api_key_env) if self.api_key_env else None
        out = [value] if value else []
        for raw in self.headers.values():
            if raw.startswith("$") and os.environ.get(raw[1:]):
                out.append(os.environ[raw[1:]])
        return out

    def preflight(self) -> None:
        self.api_key()
        self.header_values()

    def header_values(self) -> dict[str, str]:
        """The extra headers with ``$NAME`` values read from the environment now."""
        out = {}
        for key, raw in self.headers.items():
            if raw.startswith("$"):
                value = os.environ.get(raw[1:])
                if not value:
                    raise GatewayError("missing_api_key", f"backend '{self.name}': environment variable {raw[1:]} "
                                       f"(header {key}) is not set", backend=self.name)
                out[key] = value
            else:
                out[key] = raw
        return out

    def endpoint(self) -> tuple[str, str]:
        """(base_url, model name to send)."""
        return str(self.base_url), self.model

    @contextlib.contextmanager
    def client(self):
        """An ``openai.OpenAI`` client for one attempt, taken from a free-list.

        One client (hence one small connection pool) per concurrent attempt: a single client
        shared by many threads serialises them on its connection pool's lock, which polls every
        idle connection on each request (measured: ~30 % of throughput lost at 16 threads).
        At most ``concurrency`` clients exist, because the gateway's semaphore bounds attempts.
        """
        base_url, _ = self.endpoint()  # a local server restarted after a stop listens on a new port
        with self._client_lock:
            stale = [c for c in self._idle_clients if str(c.base_url).rstrip("/") != base_url.rstrip("/")]
            for c in stale:  # clients of a stopped server's old port
                self._idle_clients.remove(c)
                self._all_clients.remove(c)
            client = self._idle_clients.pop() if self._idle_clients else None
        for c in stale:
            c.close()
        if client is None:
            import openai

            # The key is a provider called per request: it is read from the environment at
            # call time and never kept in the client's options.
            client = openai.OpenAI(base_url=base_url, api_key=self._key_provider, max_retries=0,
                                   timeout=self.timeout_s,
                                   http_client=openai.DefaultHttpxClient(verify=ssl_context(), timeout=self.timeout_s))
            with self._client_lock:
                self._all_clients.append(client)
        try:
            yield client
        finally:
            with self._client_lock:
                self._idle_clients.append(client)

    def _key_provider(self) -> str:
        try:
            return self.api_key()
        except GatewayError:
            return DUMMY_KEY

    # -- one attempt -------------------------------------------------------------------
    def _post(self, path: str, body: dict, timeout_s: float, root: str | None = None, sse=None) -> dict:
        """POST ``body`` to ``path`` with a pooled client; the parsed JSON reply body.

        Uses the client's documented generic ``post(..., cast_to=httpx2.Response)`` rather than
        ``chat.completions.create``: same auth, headers, timeout and error mapping, without the
        typed-parameter transform and response models (≈0.5 ms of GIL time per call).
        """
        if self.http_client == "lean" or root is not None:  # a native API (root) always takes the lean path
            base_url = root if root is not None else self.endpoint()[0]
            with self._client_lock:
                poster = self._leans.get(base_url.rstrip("/"))
                if poster is None:
                    poster = self._leans[base_url.rstrip("/")] = LeanPoster(base_url, self.timeout_s)
            return poster.post(path, body, api_key=self._key_provider(),
                               headers=self.header_values() if self.headers else {}, timeout_s=timeout_s, sse=sse)
        import httpx2

        options: dict[str, Any] = {"timeout": timeout_s, "security": {"bearer_auth": True}}
        if self.headers:
            options["headers"] = self.header_values()
        with self.client() as client:
            return self._call(lambda: client.post(path, cast_to=httpx2.Response, body=body, options=options))

    def _call(self, fn: Callable[[], Any]):
        """Run one SDK call, mapping every failure to BackendError."""
        import openai

        try:
            raw = fn()
        except openai.APITimeoutError as exc:
            raise BackendError("timeout", f"no reply within {timeout_s:.4g} s ({exc.__class__.__name__})",
                               retryable=True) from None
        except openai.APIConnectionError as exc:
            raise BackendError("connection_error", str(exc) or exc.__class__.__name__, retryable=True) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            detail = f"HTTP {status}: {_error_message(exc)}"
            if status == 429:
                raise BackendError("rate_limited", detail, retryable=True, status=status,
                                   retry_after_s=_retry_after(exc.response.headers)) from None
            if status >= 500:
                raise BackendError("server_error", detail, retryable=True, status=status,
                                   retry_after_s=_retry_after(exc.response.headers)) from None
            raise BackendError(f"http_{status}", detail, retryable=False, status=status) from None
        except openai.OpenAIError as exc:
            raise BackendError("bad_response", f"{exc.__class__.__name__}: {exc}", retryable=True) from None
        except GatewayError:
            raise
        except Exception as exc:  # noqa: BLE001 - nothing but GatewayError may leave the gateway
            raise BackendError("client_error", f"{exc.__class__.__name__}: {exc}", retryable=False) from None
        http = raw
        try:
            body = json.loads(http.content)
        except (ValueError, UnicodeDecodeError):
            raise BackendError("bad_response", f"HTTP {http.status_code} with a body that is not JSON",
                               retryable=True, status=http.status_code) from None
        if not isinstance(body, dict):
            raise BackendError("bad_response", "reply body is not a JSON object", retryable=True)
        return body

    def chat_once(self, messages, *, temperature, max_tokens, response_format, timeout_s, stop=None,
                  seed=None) -> ChatReply:
        _, model = self.endpoint()

        sent = message_tokens(messages)  # what the server should report back (a cut prompt is less)
        if self.chat_api == "ollama":
            return self._ollama_chat(model, messages, sent, temperature=temperature, max_tokens=max_tokens,
                                     response_format=response_format, timeout_s=timeout_s, stop=stop, seed=seed)

        sink = streaming.active() if (response_format is None and self.http_client == "lean") else None
        body = self._post("/chat/completions", self.chat_request(model, messages, temperature=temperature,
                                                                  max_tokens=max_tokens,
                                                                  response_format=response_format, stop=stop,
                                                                  seed=seed), timeout_s,
                          sse=sink)
        reply = self._parse_chat(body)
        self._check_reply(reply, sent)
        return reply

    def _check_reply(self, reply: ChatReply, sent: int) -> None:
        """A cut prompt, or a reasoning model that spent its allowance, is a failed call with
        its reason (not retried: the same request would fail the same way, and be paid again)."""
        if (reply.prompt_tokens is not None and sent >= CUT_PROMPT_MIN_TOKENS
                and reply.prompt_tokens < self.cut_prompt_share * sent):
            raise BackendError("prompt_truncated", f"the server counted {reply.prompt_tokens} prompt tokens for a "
                               f"prompt of about {sent}: it cut the prompt to its context window (raise the "
                               "server's context, e.g. vLLM's --max-model-len, Ollama's OLLAMA_CONTEXT_LENGTH or "
                               "the ollama preset's native num_ctx)", retryable=False, reply=reply)
        if self.reasoning and not (reply.text or "").strip() and reply.finish_reason == "length":
            used = reply.reasoning_tokens if reply.reasoning_tokens is not None else reply.completion_tokens
            raise BackendError("reasoning_exhausted", f"finish_reason length with an empty reply: reasoning used "
                               f"{used} of the {self.reasoning_allowance} reasoning tokens allowed on top of the "
                               "reply's cap (raise reasoning_allowance, or lower reasoning_effort in extra_body)",
                               retryable=False, reply=reply)

    def _ollama_chat(self, model, messages, sent: int, *, temperature, max_tokens, response_format,
                     timeout_s, stop=None, seed=None) -> ChatReply:
        if sent + int(max_tokens) > int(self.num_ctx):
            raise BackendError("prompt_too_long", f"the prompt (~{sent} tokens) and the reply's cap ({max_tokens}) "
                               f"exceed num_ctx {self.num_ctx}: Ollama would cut the prompt (raise num_ctx)",
                               retryable=False)
        body = ollama.chat_body(model, messages, temperature=temperature, max_tokens=max_tokens,
                                response_format=response_format, num_ctx=int(self.num_ctx),
                                seed=self.seed if seed is None else seed, top_p=self.top_p, extra=self.extra_body,
                                stop=stop)
        return ollama.parse_reply(self._post("/api/chat", body, timeout_s, root=ollama.root_url(str(self.base_url))))

    @staticmethod
    def _parse_chat(body: dict) -> ChatReply:
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise BackendError("bad_response", "reply has no choices", retryable=True)
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if content is not None and not isinstance(content, str):
            content = str(content)
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        details = usage.get("completion_tokens_details") if isinstance(usage.get("completion_tokens_details"), dict) \
            else {}
        return ChatReply(
            text=content,
            prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
            completion_tokens=_int_or_none(usage.get("completion_tokens")),
            finish_reason=choices[0].get("finish_reason"),
            refusal=message.get("refusal") if isinstance(message, dict) else None,
            cached_prompt_tokens=_cached_tokens(usage),
            reasoning_tokens=_int_or_none(details.get("reasoning_tokens")),
        )

    def chat_request(self, model: str, messages: list[dict], *, temperature: float, max_tokens: int,
                     response_format: dict | None, stop: list[str] | None = None, seed: int | None = None) -> dict:
        """The JSON body of one chat request as this backend's provider accepts it."""
        request: dict[str, Any] = {"model": model, "messages": messages}
        if not self.reasoning:  # reasoning models accept only the default temperature
            request["temperature"] = temperature
        # a reasoning model's hidden reasoning counts against max_completion_tokens: the allowance
        # comes on top of the visible reply's cap
        request[self.max_tokens_param] = int(max_tokens) + (self.reasoning_allowance if self.reasoning else 0)
        if self.top_p is not None:
            request["top_p"] = float(self.top_p)
        if seed is not None or self.seed is not None:  # the call's seed wins over the backend's
            request["seed"] = seed if seed is not None else self.seed
        if stop:
            request["stop"] = list(stop)
        if response_format is not None:
            request["response_format"] = response_format
        return deep_merge(request, self.extra_body) if self.extra_body else request

    def embed_once(self, texts, *, timeout_s) -> EmbedReply:
        _, model = self.endpoint()
        request: dict[str, Any] = {"model": model, "input": list(texts), "encoding_format": self.encoding_format}
        if self.dimensions:
            request["dimensions"] = self.dimensions
        body = self._post("/embeddings", request, timeout_s)
        data = body.get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            got = len(data) if isinstance(data, list) else 0
            raise BackendError("bad_response", f"embeddings reply has {got} vectors for {len(texts)} inputs",
                               retryable=True)
        try:
            ordered = sorted(data, key=lambda d: int(d.get("index", 0)))
            rows = []
            for item in ordered:
                emb = item["embedding"]
                if isinstance(emb, str):
                    rows.append(np.frombuffer(base64.b64decode(emb), dtype="<f4"))
                else:
                    rows.append(np.asarray(emb, dtype=np.float32))
            vectors = np.vstack(rows).astype(np.float32, copy=False)
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError("bad_response", f"embeddings reply is malformed ({exc})", retryable=True) from None
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        return EmbedReply(vectors=vectors, prompt_tokens=_int_or_none(usage.get("prompt_tokens")))

    def close(self) -> None:
        with self._client_lock:
            clients, self._all_clients, self._idle_clients = self._all_clients, [], []
            leans, self._leans = list(self._leans.values()), {}
        for lean in leans:
            lean.close()
        for client in clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass


def _cached_tokens(usage: dict) -> int | None:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and _int_or_none(details.get("cached_tokens")) is not None:
        return _int_or_none(details.get("cached_tokens"))
    return _int_or_none(usage.get("prompt_cache_hit_tokens"))


def _int_or_none(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _error_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(getattr(exc, "message", "") or exc)[:300]
