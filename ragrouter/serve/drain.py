"""SIGTERM under load: stop accepting, answer every connection already accepted, then stop.

uvicorn's own shutdown closes its listening sockets and then, at once, every connection whose
request it has not parsed yet: a client whose connection was accepted (by the kernel's listen
queue, or by the event loop a moment before) but whose request bytes were still on their way
or not yet read gets its connection closed without a reply — under load, several of dozens.
:class:`DrainingServer` does, in order:

1. accepts every connection still waiting in the listen queue (the kernel completed their
   handshakes: to their clients they are accepted), then closes the listening sockets —
   nothing new is accepted from here on;
2. waits up to ``REQUEST_WAIT_S`` seconds for the connections that have sent no whole request
   yet to send it (a client that sends nothing in that time is closed unanswered, as it asked
   nothing);
3. hands over to uvicorn's shutdown: idle keep-alive connections are closed, every request in
   flight is answered (its connection then closed), within ``--grace`` seconds.
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_WAIT_S = 2.0
READ_TIMEOUT_S = 10.0  # default of serve --read-timeout
_TIMEOUT_BODY = b'{"error": {"message": "request not received in time", "type": "invalid_request_error", "code": null}}'
_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
              b"content-length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n" + _TIMEOUT_BODY)


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read timeout: a request's headers and body must arrive within
    ``read_timeout`` seconds of its first byte (of the connection, for the first request), or the
    connection gets a 408 and is closed. uvicorn alone keeps a half-sent request open for ever, so
    a few thousand slow clients (slowloris) hold that many connections. A request received whole
    may take as long as its answer takes; an idle keep-alive connection is uvicorn's to close
    (``timeout_keep_alive``)."""

    read_timeout = READ_TIMEOUT_S

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._read_timer = None
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
        self._read_timer = self.loop.call_later(self.read_timeout, self._expire)

    def _receiving(self) -> bool:
        """No request yet, or the next one's bytes arriving, or a body not yet whole."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def _expire(self) -> None:
        self._read_timer = None
        if self.transport is None or self.transport.is_closing() or not self._receiving():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:  # say why
            self.transport.write(_TIMED_OUT)
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app reading the body gets http.disconnect; its reply is dropped
            cycle.message_event.set()
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._read_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the next request on a kept-alive connection starts its clock
        super().data_received(data)

    def on_response_complete(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None
        super().on_response_complete()

    def connection_lost(self, exc) -> None:
        if getattr(self, "_read_timer", None) is not None:
            self._read_timer.cancel()
            self._read_timer = None
        super().connection_lost(exc)


def server_config(app, host: str, port: int, grace: float, read_timeout: float = READ_TIMEOUT_S) -> uvicorn.Config:
    protocol = type("TimedH11Protocol", (TimedH11Protocol,), {"read_timeout": float(read_timeout)})
    return uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=grace,
                          access_log=False, http=protocol)


def _awaiting_request(conn) -> bool:
    """A connection that has not sent a whole request yet (uvicorn's h11 protocol makes its
    request cycle when the headers are in)."""
    transport = getattr(conn, "transport", None)
    return getattr(conn, "cycle", False) is None and transport is not None and not transport.is_closing()


class DrainingServer(uvicorn.Server):
    """uvicorn's server with the shutdown described in the module doc."""

    async def _accept_queued(self) -> int:
        loop = asyncio.get_running_loop()
        config = self.config

        def protocol():
            return config.http_protocol_class(config=config, server_state=self.server_state,
                                              app_state=self.lifespan.state)

        accepted = 0
        for server in getattr(self, "servers", []):
            for listener in server.sockets or ():
                sock = socket.fromfd(listener.fileno(), listener.family, listener.type)  # a dup: same queue
                try:
                    sock.setblocking(False)
                    while True:
                        try:
                            conn, _ = sock.accept()
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError:
                            break
                        conn.setblocking(False)
                        await loop.connect_accepted_socket(protocol, conn)
                        accepted += 1
                finally:
                    sock.close()
        return accepted

    async def shutdown(self, sockets=None) -> None:
        await self._accept_queued()
        for server in getattr(self, "servers", []):
            server.close()  # stop accepting
        loop = asyncio.get_running_loop()
        grace = self.config.timeout_graceful_shutdown
        wait = REQUEST_WAIT_S if grace is None else min(REQUEST_WAIT_S, float(grace))
        deadline = loop.time() + wait
        while loop.time() < deadline and not self.force_exit:
            if not any(_awaiting_request(c) for c in list(self.server_state.connections)):
                break
            await asyncio.sleep(0.02)
        await super().shutdown(sockets)
