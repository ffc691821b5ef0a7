"""The lean HTTP path of OpenAI-compatible backends: one JSON POST on a pooled ``httpx2`` client.

The ``openai`` SDK's ``post`` spends ~1.5 ms of GIL time per call building its request
options and response wrappers before and after what ``httpx2`` itself does (cProfile,
``benchmarks/README.md``, gateway section); at 64 requests in flight on 2 shared cores that is
a measurable share of the client's CPU. This path sends the same request — ``Authorization:
Bearer <key>``, ``Content-Type: application/json``, the backend's extra headers, the body as
compact JSON — with ``httpx2`` directly, and maps every outcome to the same
:class:`~ragrouter.llm.backends.BackendError` reasons as the SDK path: timeouts, connection
errors, 429 / 5xx with ``Retry-After``, other 4xx, bodies that are not JSON objects.

Clients come from a per-backend free-list, one per concurrent attempt (a client shared by many
threads serialises them on its pool's lock), each keeping one keep-alive connection.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

USER_AGENT = "ragrouter"


class LeanPoster:
    """POSTs JSON to ``base_url`` + path; a client per concurrent attempt (at most the
    backend's concurrency exist, because the gateway's slots bound the attempts)."""

    def __init__(self, base_url: str, timeout_s: float):
        self.base_url = str(base_url).rstrip("/")
        self.timeout_s = float(timeout_s)
        self._idle: list = []
        self._all: list = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _client(self):
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            import httpx2

            from ragrouter.llm.backends import ssl_context

            client = httpx2.Client(timeout=self.timeout_s, follow_redirects=False, verify=ssl_context(),
                                   limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1))
            with self._lock:
                self._all.append(client)
        try:
            yield client
        finally:
            with self._lock:
                self._idle.append(client)

    def post(self, path: str, body: dict, *, api_key: str, headers: dict[str, str], timeout_s: float) -> dict:
        """The parsed JSON object of the reply; BackendError for every failure."""
        import httpx2

        from ragrouter.llm.backends import BackendError, _retry_after

        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        head = {"authorization": f"Bearer {api_key}", "content-type": "application/json",
                "accept": "application/json", "user-agent": USER_AGENT, **headers}
        url = self.base_url + path
        try:
            with self._client() as client:
                resp = client.post(url, content=data, headers=head, timeout=timeout_s)
        except httpx2.TimeoutException as exc:
            raise BackendError("timeout", f"no reply within the timeout ({exc.__class__.__name__})",
                               retryable=True) from None
        except httpx2.TransportError as exc:
            raise BackendError("connection_error", str(exc) or exc.__class__.__name__, retryable=True) from None
        except Exception as exc:  # noqa: BLE001 - nothing but BackendError may leave an attempt
            raise BackendError("client_error", f"{exc.__class__.__name__}: {exc}", retryable=False) from None
        status = resp.status_code
        if status >= 400:
            detail = f"HTTP {status}: {_error_text(resp)}"
            if status == 429:
                raise BackendError("rate_limited", detail, retryable=True, status=status,
                                   retry_after_s=_retry_after(resp.headers))
            if status >= 500:
                raise BackendError("server_error", detail, retryable=True, status=status,
                                   retry_after_s=_retry_after(resp.headers))
            raise BackendError(f"http_{status}", detail, retryable=False, status=status)
        try:
            out = json.loads(resp.content)
        except (ValueError, UnicodeDecodeError):
            raise BackendError("bad_response", f"HTTP {status} with a body that is not JSON", retryable=True,
                               status=status) from None
        if not isinstance(out, dict):
            raise BackendError("bad_response", "reply body is not a JSON object", retryable=True)
        return out

    def close(self) -> None:
        with self._lock:
            clients, self._all, self._idle = self._all, [], []
        for client in clients:
            with contextlib.suppress(Exception):
                client.close()


def _error_text(resp) -> str:
    """The provider's error message (``{"error": {"message": …}}``), else the body's start."""
    try:
        body: Any = json.loads(resp.content)
    except (ValueError, UnicodeDecodeError):
        return (resp.text or "")[:300]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(body)[:300]
