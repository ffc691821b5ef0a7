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

REQUEST_WAIT_S = 2.0


def server_config(app, host: str, port: int, grace: float) -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=grace,
                          access_log=False, http="h11")


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
