"""The lean HTTP path of OpenAI-compatible backends: one JSON POST per attempt on a kept-alive
connection of the standard library's ``http.client``.

The ``openai`` SDK's ``post`` spends ~1.5 ms of GIL time per call building its request
options and response wrappers before and after what ``httpx2`` itself does, and ``httpx2``
(its pure-Python ``h11`` parser and request/response models) another ~1 ms over
``http.client`` for the same 30 kB POST (``benchmarks/README.md``, gateway and issue-17
sections); at 64 requests in flight on 2 shared cores that is a measurable share of the
client's CPU. This path sends the same request — ``Authorization: Bearer <key>``,
``Content-Type: application/json``, the backend's extra headers, the body as compact JSON —
and maps every outcome to the same :class:`~ragrouter.llm.errors.BackendError` reasons as
the SDK path: timeouts, connection errors, 429 / 5xx with ``Retry-After``, other 4xx, bodies
that are not JSON objects.

Connections come from a per-backend free-list, one per concurrent attempt (at most the
backend's concurrency exist, because the gateway's slots bound the attempts). A kept-alive
connection that the server closed while idle fails on its next request before any reply;
that request is sent once more on a fresh connection (as browsers and ``urllib3`` do).
**Proxies:** when the environment names a proxy for the endpoint (``HTTPS_PROXY``,
``HTTP_PROXY``, ``ALL_PROXY``, minus ``NO_PROXY``, read as ``urllib.request`` reads them),
the POST goes through an ``httpx2`` client instead, which honours them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from ragrouter.llm import streaming
from ragrouter.llm.errors import BackendError, retry_after, ssl_context

USER_AGENT = "ragrouter"


class LeanPoster:
    """POSTs JSON to ``base_url`` + path; a connection per concurrent attempt."""

    def __init__(self, base_url: str, timeout_s: float):
        self.base_url = str(base_url).rstrip("/")
        self.timeout_s = float(timeout_s)
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url {self.base_url!r} is not an http(s) URL")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._prefix = parts.path
        self.proxied = _proxied(parts.scheme, parts.hostname)
        self._idle: list = []
        self._all: list = []
        self._lock = threading.Lock()

    def _connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout_s,
                                               context=ssl_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)

    @contextlib.contextmanager
    def _client(self):
        """An idle connection (or httpx2 client, when proxied), back to the free-list after use."""
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            if self.proxied:
                import httpx2

                client = httpx2.Client(timeout=self.timeout_s, follow_redirects=False, verify=ssl_context(),
                                       limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1))
            else:
                client = self._connection()
            with self._lock:
                self._all.append(client)
        try:
            yield client
        finally:
            with self._lock:
                self._idle.append(client)

    def post(self, path: str, body: dict, *, api_key: str, headers: dict[str, str], timeout_s: float,
             sse=None) -> dict:
        """The parsed JSON object of the reply; BackendError for every failure. ``sse``: a
        :class:`~ragrouter.llm.streaming.Sink` — the request asks for server-sent events, each
        content delta goes to the sink, and the events come back assembled as the JSON reply
        (:mod:`ragrouter.llm.streaming`; not through a proxy, where the reply comes whole)."""
        if sse is not None and self.proxied:
            sse = None
        if sse is not None:
            body = streaming.request(body)
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        head = {"authorization": f"Bearer {api_key}", "content-type": "application/json",
                "accept": "application/json", "user-agent": USER_AGENT, **headers}
        with self._client() as client:
            if self.proxied:
                status, reply_headers, content = self._send_httpx(client, path, data, head, timeout_s)
            else:
                status, reply_headers, content = self._send(client, path, data, head, timeout_s, sse)
        if status >= 400:
            detail = f"HTTP {status}: {_error_text(content)}"
            if status == 429:
                raise BackendError("rate_limited", detail, retryable=True, status=status,
                                   retry_after_s=retry_after(reply_headers))
            if status >= 500:
                raise BackendError("server_error", detail, retryable=True, status=status,
                                   retry_after_s=retry_after(reply_headers))
            raise BackendError(f"http_{status}", detail, retryable=False, status=status)
        try:
            out = json.loads(content)
        except (ValueError, UnicodeDecodeError):
            raise BackendError("bad_response", f"HTTP {status} with a body that is not JSON", retryable=True,
                               status=status) from None
        if not isinstance(out, dict):
            raise BackendError("bad_response", "reply body is not a JSON object", retryable=True)
        return out

    def _send(self, conn: http.client.HTTPConnection, path: str, data: bytes, head: dict,
              timeout_s: float, sse=None) -> tuple[int, Any, bytes]:
        """(status, headers, body) of one POST on ``conn``; a stale kept-alive connection is
        replaced once. The connection is closed after any failure (its state is unknown)."""

        for fresh in ((conn.sock is None), True):
            conn.timeout = timeout_s
            if conn.sock is not None:
                conn.sock.settimeout(timeout_s)
            try:
                conn.request("POST", self._prefix + path, body=data, headers=head)
                resp = conn.getresponse()
                if sse is not None and resp.status == 200 and \
                        (resp.getheader("content-type") or "").startswith("text/event-stream"):
                    content = streaming.assemble(iter(resp.readline, b""), sse)
                    resp.read()  # what follows [DONE]: the connection is kept alive for the next request
                else:
                    content = resp.read()
            except (TimeoutError, socket.timeout) as exc:
                conn.close()
                raise BackendError("timeout", f"no reply within {timeout_s:.4g} s ({exc.__class__.__name__})",
                                   retryable=True) from None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                conn.close()
                if not fresh:  # the server closed the idle connection: once more on a new one
                    continue
                raise BackendError("connection_error", str(exc) or exc.__class__.__name__, retryable=True) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise BackendError("connection_error", str(exc) or exc.__class__.__name__, retryable=True) from None
            except Exception as exc:  # noqa: BLE001 - nothing but BackendError may leave an attempt
                conn.close()
                raise BackendError("client_error", f"{exc.__class__.__name__}: {exc}", retryable=False) from None
            if resp.will_close:
                conn.close()  # reopened by the next request
            return resp.status, resp.headers, content
        raise AssertionError("unreachable")

    def _send_httpx(self, client, path: str, data: bytes, head: dict, timeout_s: float) -> tuple[int, Any, bytes]:
        import httpx2


        try:
            resp = client.post(self.base_url + path, content=data, headers=head, timeout=timeout_s)
        except httpx2.TimeoutException as exc:
            raise BackendError("timeout", f"no reply within {timeout_s:.4g} s ({exc.__class__.__name__})",
                               retryable=True) from None
        except httpx2.TransportError as exc:
            raise BackendError("connection_error", str(exc) or exc.__class__.__name__, retryable=True) from None
        except Exception as exc:  # noqa: BLE001 - nothing but BackendError may leave an attempt
            raise BackendError("client_error", f"{exc.__class__.__name__}: {exc}", retryable=False) from None
        return resp.status_code, resp.headers, resp.content

    def close(self) -> None:
        with self._lock:
            clients, self._all, self._idle = self._all, [], []
        for client in clients:
            with contextlib.suppress(Exception):
                client.close()


def _proxied(scheme: str, host: str) -> bool:
    """Whether the environment routes ``scheme://host`` through a proxy (urllib's reading of
    ``*_PROXY`` / ``NO_PROXY``)."""
    proxies = urllib.request.getproxies()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(host)


def _error_text(content: bytes) -> str:
    """The provider's error message (``{"error": {"message": …}}``), else the body's start."""
    try:
        body: Any = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return content.decode("utf-8", "replace")[:300]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(body)[:300]
