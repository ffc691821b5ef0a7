"""The embedded default's backend kinds: ``local`` (the llama.cpp server, through the OpenAI
code path of :class:`~ragrouter.llm.backends.OpenAIBackend`) and ``local-encoder`` (an
in-process sentence encoder). Registered by kind in :mod:`ragrouter.llm.kinds`.
"""

from __future__ import annotations

import threading

import numpy as np

from ragrouter.llm import encoder, speed, weights
from ragrouter.llm.backends import DUMMY_KEY, Backend, OpenAIBackend
from ragrouter.llm.encoder import get_encoder
from ragrouter.llm.errors import BackendError, EmbedReply, GatewayError
from ragrouter.llm.local_server import ensure_server


# --------------------------------------------------------------------------- local kind


class LocalBackend(OpenAIBackend):
    """The embedded llama.cpp server, reached through the same OpenAI client path.

    Context settings: ``n_ctx`` is the *total* context shared by ``n_parallel`` slots (as in
    ``configs/default.yaml``), so each request gets ``n_ctx // n_parallel`` tokens; set
    ``n_ctx_per_slot`` instead to give it directly. ``threads``, ``poll`` and ``n_predict`` are
    passed on; ``threads`` or ``poll`` absent (or null) is chosen from the CPU other work leaves
    free when the server starts and at each stage start (:mod:`ragrouter.llm.cpuload`).
    The server's own random API key is used (and redacted like any other key).

    ``timeout_s`` null (or absent) scales each call's timeout with the call's size and the
    model's speed on this machine (:meth:`call_timeout`); a number fixes it.
    """

    kind = "local"

    def __init__(self, name: str, spec: dict, *, source: str = "config"):
        spec = {"api_key_required": False, **spec}
        self.auto_timeout = spec.get("timeout_s") is None
        if self.auto_timeout:
            spec.pop("timeout_s", None)
        super().__init__(name, spec, source=source)
        if self.auto_timeout:
            self.timeout_s = 600.0  # the client's default; every chat call passes call_timeout's
        self.priors: dict[str, dict] = {}  # dry_run.timing.priors (the gateway sets them)
        self._figures: dict | None = None
        self.n_parallel = self._int("n_parallel", 1, minimum=1)
        if "n_ctx_per_slot" in spec:
            self.n_ctx_per_slot = self._int("n_ctx_per_slot", 4096, minimum=64)
        else:
            total = self._int("n_ctx", 4096 * self.n_parallel, minimum=64)
            self.n_ctx_per_slot = total // self.n_parallel
            if self.n_ctx_per_slot < 64:
                raise GatewayError("config", f"{self.where}.n_ctx={total} leaves fewer than 64 tokens per slot "
                                   f"for n_parallel={self.n_parallel}", backend=name)
        self.threads = self._setting("threads", 1, 4096)
        self.poll = self._setting("poll", 0, 100)
        self.n_predict = spec.get("n_predict")
        self._server = None
        self._server_lock = threading.Lock()

    def _setting(self, key: str, low: int, high: int) -> int | None:
        """An int setting of the server in [low, high], or None (absent, null or ``auto``: chosen)."""
        value = self.spec.get(key)
        if value is None or value == "auto":
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise GatewayError("config", f"{self.where}.{key}={value!r} must be an int from {low} to {high}, or "
                               "null (chosen from the free CPU)", backend=self.name)
        return value

    def api_key(self) -> str:
        return str(getattr(self.server(), "api_key", None) or DUMMY_KEY)

    def chat_once(self, messages, **kwargs):
        """One call, counted in flight on its server (a server is not restarted under it)."""
        with self.server().in_use():
            return super().chat_once(messages, **kwargs)

    def call_timeout(self, prompt_tokens: int, max_tokens: int) -> float:
        """The timeout of one call of this size: the fixed ``timeout_s`` when the config sets
        one, else :func:`ragrouter.llm.speed.call_timeout` at this machine's probed speed of the
        model (its prior when never probed)."""
        if not self.auto_timeout:
            return self.timeout_s
        if self._figures is None:
            self._figures = speed.figures_for(self.model, self.priors)[0]
        return speed.call_timeout(self._figures, prompt_tokens, max_tokens)

    def secrets(self) -> list[str]:
        key = getattr(self._server, "api_key", None) if self._server is not None else None
        return [key] if key else []

    def preflight(self) -> None:
        try:
            weights.spec(self.model)
        except Exception as exc:  # noqa: BLE001
            raise GatewayError("config", f"{self.where}.model: {exc}", backend=self.name) from None

    def server(self):
        with self._server_lock:
            if self._server is None or not self._server.running:  # stopped to free the cores: restart it
                try:
                    kwargs = {"n_ctx": self.n_ctx_per_slot, "n_parallel": self.n_parallel, "threads": self.threads,
                              "poll": self.poll}
                    if self.n_predict is not None:
                        kwargs["n_predict"] = self.n_predict
                    self._server = ensure_server(self.model, **kwargs)
                except GatewayError:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported as one clear error
                    raise GatewayError(
                        "backend_unavailable",
                        f"backend '{self.name}': cannot start the local server for model '{self.model}': "
                        f"{exc.__class__.__name__}: {exc}",
                        backend=self.name,
                    ) from None
            return self._server

    def endpoint(self) -> tuple[str, str]:
        server = self.server()
        return str(server.base_url), str(getattr(server, "model", None) or self.model)


# --------------------------------------------------------------------------- local-encoder kind


class LocalEncoderBackend(Backend):
    """An in-process sentence encoder: embeddings only, no HTTP."""

    kind = "local-encoder"
    supports_chat = False
    http = False
    default_batch_size = 32

    def __init__(self, name: str, spec: dict, *, source: str = "config"):
        spec = {"concurrency": 1, **spec}
        super().__init__(name, spec, source=source)
        self._encoder = None
        self._lock = threading.Lock()

    def encoder(self):
        with self._lock:
            if self._encoder is None:
                try:
                    self._encoder = get_encoder(self.model)
                except Exception as exc:  # noqa: BLE001
                    raise GatewayError("backend_unavailable",
                                       f"backend '{self.name}': cannot load encoder '{self.model}': {exc}",
                                       backend=self.name) from None
            return self._encoder

    def preflight(self) -> None:
        if self.model not in encoder.ENCODERS:
            raise GatewayError("config", f"{self.where}.model: unknown encoder {self.model!r} "
                               f"(known: {', '.join(sorted(encoder.ENCODERS))})", backend=self.name)

    def embed_once(self, texts, *, timeout_s) -> EmbedReply:
        enc = self.encoder()
        try:
            vectors = enc.encode(list(texts), batch_size=self.batch_size)
            n_tokens = sum(enc.count_tokens(list(texts)))
        except Exception as exc:  # noqa: BLE001
            raise BackendError("client_error", f"encoder '{self.model}' failed: {exc.__class__.__name__}: {exc}",
                               retryable=False) from None
        return EmbedReply(vectors=np.asarray(vectors, dtype=np.float32), prompt_tokens=int(n_tokens))
