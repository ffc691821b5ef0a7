"""What every request to ``serve`` passes before the application sees it (an ASGI middleware).

* **Authentication** (``--api-key`` or ``RAGROUTER_SERVE_API_KEY``): every path but
  ``/health`` needs ``Authorization: Bearer <key>``; a missing or wrong one is a 401 in
  OpenAI's shape (``invalid_api_key``). The key is compared in constant time and is never
  logged, stored or echoed.
* **Body size** (``--max-body-bytes``, 1 MiB by default): a ``Content-Length`` above the
  limit is answered 413 before a byte of the body is read; a chunked body is read up to the
  limit and answered 413 as soon as it passes it. Either way the body is never kept nor
  parsed: what the client still pushes is read and dropped for at most ``DISCARD_S`` seconds
  before the 413 goes out (a client that writes its whole body before reading would otherwise
  meet a reset, not the reply; one that sent ``Expect: 100-continue`` is answered at once),
  and the connection is closed.

The body, once read within the limit, is handed to the application as one message.
"""

from __future__ import annotations

import hmac
import json
import time

DEFAULT_MAX_BODY = 1 << 20
DISCARD_S = 2.0
OPEN_PATHS = frozenset({"/health"})


def _error(status: int, message: str, type_: str, code: str | None, extra_headers=()) -> tuple[dict, dict]:
    body = json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *extra_headers]
    return ({"type": "http.response.start", "status": status, "headers": headers},
            {"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: the API key and the body-size limit (see the module doc)."""

    def __init__(self, app, *, max_body: int = DEFAULT_MAX_BODY, api_key: str | None = None):
        self.app, self.max_body = app, int(max_body)
        self._key = f"Bearer {api_key}".encode() if api_key else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self._key is not None and scope.get("path") not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self._key):
                what = "no API key" if not given else "an incorrect API key"
                start, body = _error(401, f"You gave {what}: send 'Authorization: Bearer <key>' with the key the "
                                     "server was started with (--api-key / RAGROUTER_SERVE_API_KEY).",
                                     "invalid_request_error", "invalid_api_key",
                                     [(b"www-authenticate", b"Bearer")])
                return await self._refuse(start, body, receive, send, more=self._has_body(headers))
        length = headers.get(b"content-length")
        if length is not None:
            try:
                n = int(length)
            except ValueError:
                n = -1
            if n < 0:
                start, body = _error(400, "the Content-Length header is not a number", "invalid_request_error", None)
                return await self._refuse(start, body, receive, send, more=False)
            if n > self.max_body:
                expect = headers.get(b"expect", b"").lower() == b"100-continue"
                return await self._refuse(*self._too_large(n), receive, send, more=n > 0, expect=expect)
        if scope.get("method") in ("GET", "HEAD", "OPTIONS") and length is None:
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None  # the client left before its body was whole: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return await self._refuse(*self._too_large(None), receive, send, more=message.get("more_body", False))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()  # after the body: the disconnect a streaming reply listens for

        return await self.app(scope, replay, send)

    @staticmethod
    def _has_body(headers: dict) -> bool:
        length = headers.get(b"content-length")
        return (length is not None and length != b"0") or b"transfer-encoding" in headers

    def _too_large(self, n: int | None) -> tuple[dict, dict]:
        size = f"{n} bytes" if n is not None else f"more than {self.max_body} bytes"
        return _error(413, f"The request body is {size}; this server takes at most {self.max_body} "
                      "(--max-body-bytes).", "invalid_request_error", "request_too_large",
                      [(b"connection", b"close")])

    @staticmethod
    async def _refuse(start: dict, body: dict, receive, send, more: bool = True, expect: bool = False) -> None:
        """Read and drop what the client still sends of its body, for at most ``DISCARD_S``
        seconds (nothing is kept or parsed; a client that writes its whole body before reading
        would otherwise meet a reset, not the reply), then send the error. A client that sent
        ``Expect: 100-continue`` is answered at once: it has not sent its body."""
        import anyio

        if more and not expect:
            with anyio.move_on_after(DISCARD_S):
                while True:
                    message = await receive()
                    if message["type"] != "http.request" or not message.get("more_body", False):
                        break
        await send(start)
        await send(body)
