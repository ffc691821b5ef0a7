"""A lean fake OpenAI-compatible endpoint for the throughput benchmarks.

The tests' scripted ``FakeOpenAI`` (``tests/fake_openai.py``) validates every request, injects
faults and runs a thread per connection: ~1.5 ms of CPU per request, which on a 2-core machine
competes with the client being measured, and its replies arrive a few ms after the nominal
latency. This server does only what a benchmark needs:

* asyncio, HTTP/1.1 keep-alive, ``TCP_NODELAY``, one ``write`` per reply;
* ``POST …/chat/completions``: the reply of ``responder(request)`` (a string, or a dict sent as
  JSON text) with ``usage`` counted as words; ``POST …/embeddings``: deterministic hashed unit
  vectors (``tests.fake_openai.fake_embedding``);
* a fixed latency per request, **calibrated**: the event loop wakes late (epoll's millisecond
  rounding plus the vCPU's wake-up, ~1.3 ms per sleep on the development VM), so each sleep is
  shortened by the median lateness measured at start-up and a request really takes ``latency``;
* counters by path and the peak number of requests in flight; with ``log_requests``, each
  request's arrival (``time.monotonic()``, comparable across processes), path and body;
* optionally at most ``max_in_flight`` requests served at once (the rest queue, unmeasured), so
  ``latency_sum / max_in_flight`` is a true lower bound of the wall time whatever the client does.

Run it in a child process (``start_in_process``) so its CPU does not compete for the client's GIL.
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing as mp
import socket
import time
from collections.abc import Callable


def default_responder(request: dict) -> str:
    text = str((request.get("messages") or [{}])[-1].get("content", ""))[-40:]
    return f"Answer to: {text}"


class LeanEndpoint:
    def __init__(self, latency: float, responder: Callable[[dict], str | dict] | None = None,
                 embedding_dim: int = 8, sigma: float = 0.0, seed: int = 0, max_in_flight: int | None = None,
                 log_requests: bool = False):
        import random

        self.log: list[dict] | None = [] if log_requests else None

        # > 0: at most this many requests are served at once, the others queue (unmeasured) as at
        # a provider with a concurrency limit; then wall >= latency_sum / max_in_flight always
        self.max_in_flight = int(max_in_flight or 0)
        self._gate: asyncio.Semaphore | None = None

        self.latency = float(latency)
        self.sigma = float(sigma)  # > 0: log-normal latency with median ``latency``
        self._rng = random.Random(seed)
        self.latency_sum = 0.0
        self.responder = responder or default_responder
        self.embedding_dim = int(embedding_dim)
        self.late = 0.0
        self.by_path: dict[str, int] = {}
        self.in_flight = 0
        self.peak_in_flight = 0
        self.first_at: float | None = None  # since the last reset: first request read ...
        self.last_at: float | None = None  # ... and last reply written (the endpoint's busy span)

    def stats(self) -> dict:
        return {"total": sum(self.by_path.values()), "by_path": dict(self.by_path),
                "peak_in_flight": self.peak_in_flight, "late_ms": round(1000 * self.late, 3),
                "latency_sum_s": round(self.latency_sum, 3),
                "span_s": round(self.last_at - self.first_at, 3) if self.first_at and self.last_at else 0.0}

    def reset(self) -> None:
        if self.log is not None:
            self.log.clear()
        self.by_path.clear()
        self.latency_sum = 0.0
        self.first_at = self.last_at = None
        self.peak_in_flight = self.in_flight

    async def calibrate(self, samples: int = 10) -> None:
        if self.latency <= 0:
            return
        late = []
        for _ in range(samples):
            t0 = time.perf_counter()
            await asyncio.sleep(self.latency)
            late.append(time.perf_counter() - t0 - self.latency)
        self.late = max(0.0, sorted(late)[len(late) // 2])

    def _reply(self, path: str, body: dict) -> dict:
        if path.endswith("/embeddings"):
            from tests.fake_openai import fake_embedding

            inputs = body.get("input") or []
            inputs = [inputs] if isinstance(inputs, str) else inputs
            n = sum(len(str(t).split()) for t in inputs)
            return {"object": "list", "model": body.get("model"), "usage": {"prompt_tokens": n, "total_tokens": n},
                    "data": [{"object": "embedding", "index": i,
                              "embedding": fake_embedding(str(t), self.embedding_dim).tolist()}
                             for i, t in enumerate(inputs)]}
        content = self.responder(body)
        if not isinstance(content, str):
            content = json.dumps(content)
        prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
        completion = len(content.split())
        return {"id": "cmpl-lean", "object": "chat.completion", "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                path = lines[0].split(b" ")[1].decode()
                length = 0
                for line in lines[1:]:
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = json.loads(await reader.readexactly(length)) if length else {}
                if self.log is not None:
                    self.log.append({"t": time.monotonic(), "path": path, "body": body})
                self.by_path[path] = self.by_path.get(path, 0) + 1
                if self.first_at is None:
                    self.first_at = time.perf_counter()
                if self._gate is not None:
                    await self._gate.acquire()
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                try:
                    delay = self.latency
                    if self.sigma > 0:
                        delay = self.latency * math.exp(self.sigma * self._rng.gauss(0.0, 1.0))
                    self.latency_sum += delay
                    await asyncio.sleep(max(0.0, delay - self.late))
                    data = json.dumps(self._reply(path, body)).encode()
                finally:
                    self.in_flight -= 1
                    if self._gate is not None:
                        self._gate.release()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(data)).encode() + b"\r\n\r\n" + data)
                await writer.drain()
                self.last_at = time.perf_counter()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def serve(self, conn) -> None:
        """Serve until ``conn`` (a Pipe end) says 'stop'; answers 'stats' and 'reset'."""
        await self.calibrate()
        if self.max_in_flight > 0:
            self._gate = asyncio.Semaphore(self.max_in_flight)
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn.send(f"http://127.0.0.1:{port}/v1")
        loop = asyncio.get_running_loop()
        while True:
            cmd = await loop.run_in_executor(None, conn.recv)
            if cmd == "stats":
                conn.send(self.stats())
            elif cmd == "log":
                conn.send(list(self.log or []))
            elif cmd == "reset":
                self.reset()
                conn.send("ok")
            else:
                break
        server.close()


def _child(conn, latency: float, responder, embedding_dim: int, sigma: float = 0.0,
           max_in_flight: int | None = None, log_requests: bool = False) -> None:
    asyncio.run(LeanEndpoint(latency, responder, embedding_dim, sigma=sigma, max_in_flight=max_in_flight,
                             log_requests=log_requests).serve(conn))


class Handle:
    """An endpoint running in a child process: ``base_url``, ``stats()``, ``reset()``, ``stop()``.

    ``target(conn, *args)`` runs in the child: it sends its base URL over ``conn``, then answers
    'stats' and 'reset' and returns on 'stop' (as :meth:`LeanEndpoint.serve` does)."""

    def __init__(self, target, args: tuple = ()):
        ctx = mp.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=target, args=(child, *args), daemon=True)
        self._proc.start()
        self.base_url: str = self._conn.recv()

    def stats(self) -> dict:
        self._conn.send("stats")
        return self._conn.recv()

    def reset(self) -> None:
        self._conn.send("reset")
        self._conn.recv()

    def requests(self) -> list[dict]:
        """The requests since the last reset (``log_requests``): arrival time, path, body."""
        self._conn.send("log")
        return self._conn.recv()

    def stop(self) -> None:
        if self._proc.is_alive():
            self._conn.send("stop")
            self._proc.join(timeout=10)

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_in_process(latency: float, responder=None, embedding_dim: int = 8, sigma: float = 0.0,
                     max_in_flight: int | None = None, log_requests: bool = False) -> Handle:
    """The endpoint in a child process; ``sigma`` > 0 draws each latency log-normally around
    the median ``latency`` (stats()["latency_sum_s"] adds them up, for the ideal time);
    ``max_in_flight`` caps the requests served at once (the rest queue); ``log_requests`` keeps
    each request for :meth:`Handle.requests`."""
    return Handle(_child, (latency, responder, embedding_dim, sigma, max_in_flight, log_requests))
