"""The speed probe never stops the work (ragrouter/decisions/speedprobe.py) and a local call's
timeout follows the call's size and the model's speed (ragrouter/llm/speed.py):

* a local model whose server never answers: its probe times out, one warning line names it,
  the probe returns without it (its priors stay) and what was measured before is kept;
* figures are saved the moment each model is measured, not after the last one;
* on cores another job keeps busy a model is not measured, with a note, and nothing is cached;
* a local backend without a fixed ``timeout_s`` gives each call a timeout scaled to its
  prompt and reply cap at the probed (else prior) speed; a fixed one is kept.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import pytest

from ragrouter.config import Config
from ragrouter.llm import speed
from ragrouter.llm.kinds import make_backend
from ragrouter.llm.local_backends import LocalBackend
from ragrouter.decisions import speedprobe


class BlackHole:
    """A TCP server on 127.0.0.1 that accepts connections, reads, and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.conns: list[socket.socket] = []
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)  # held open, never answered

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def close(self) -> None:
        self.stopped.set()
        for c in self.conns:
            c.close()
        self.sock.close()


class _Server:
    """What LocalBackend.server() returns, pointed at the black hole."""

    def __init__(self, hole: BlackHole, model: str) -> None:
        self.base_url, self.model, self.running, self.api_key = hole.base_url, model, True, "k"

    def in_use(self):  # a call in flight (LocalServer counts them)
        return contextlib.nullcontext(self)


@pytest.fixture
def timing_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RAGROUTER_TIMING_DIR", str(tmp_path / "timing"))
    return tmp_path / "timing"


def _config(probe_timeout_s: float | None) -> Config:
    cfg = Config.load(Path("configs/demo.yaml"), env={})
    data = dict(cfg.data)
    data["dry_run"] = {**data["dry_run"], "probe_timeout_s": probe_timeout_s}
    return Config(data, source="test")


def test_a_local_model_that_never_answers_leaves_its_priors_with_one_warning(timing_dir, monkeypatch):
    hole = BlackHole()
    monkeypatch.setattr(LocalBackend, "server", lambda self: _Server(hole, self.model))
    monkeypatch.setattr(speedprobe, "settle", lambda: 0.0)
    monkeypatch.setattr(speedprobe, "cores_busy", lambda idle=0.65: None)
    saved_before_chat = []

    def encoder_probe(backend, layers=0):
        return {"overhead_s": 0.0, "prompt_tps": 5000.0, "gen_tps": None, "parallel": 1, "load_s": 1.0}

    real_chat = speedprobe.probe_chat

    def chat_probe(backend):
        saved_before_chat.append(dict(speed.load()))
        return real_chat(backend)

    monkeypatch.setattr(speedprobe, "probe_encoder", encoder_probe)
    monkeypatch.setattr(speedprobe, "probe_chat", chat_probe)
    lines: list[str] = []
    try:
        got = speedprobe.probe(_config(0.5), echo=lines.append)
    finally:
        hole.close()
    chat_models = {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    # the encoder was measured and saved before any chat model was tried
    assert set(got) == {"all-MiniLM-L6-v2"}
    assert saved_before_chat and all("all-MiniLM-L6-v2" in s for s in saved_before_chat)
    assert set(speed.load()) == {"all-MiniLM-L6-v2"}  # nothing cached for the models that timed out
    warnings = [ln for ln in lines if "warning" in ln]
    assert len(warnings) == len(chat_models)  # one line per model, no traceback
    for model in chat_models:
        [line] = [ln for ln in warnings if model in ln]
        assert "could not be measured" in line and "timeout" in line and "priors" in line


def test_busy_cores_are_not_probed_and_nothing_is_cached(timing_dir, monkeypatch):
    monkeypatch.setattr(speedprobe, "settle", lambda: 30.0)
    monkeypatch.setattr(speedprobe, "cores_busy", lambda idle=0.65: 0.97)
    measured = []
    monkeypatch.setattr(speedprobe, "probe_chat", lambda b: measured.append(b.model))
    monkeypatch.setattr(speedprobe, "probe_encoder", lambda b, layers=0: measured.append(b.model))
    progress = []
    lines: list[str] = []
    assert speedprobe.probe(_config(None), echo=lines.append, on_model=lambda m, k, n: progress.append((m, k, n))) == {}
    assert measured == [] and speed.load() == {}
    assert len(lines) == 3 and all("not measured: the cores are 97 % busy" in ln for ln in lines)
    # the caller was told of each model in turn (the demo writes it to the progress file)
    assert [p[1:] for p in progress] == [(0, 3), (1, 3), (2, 3)] and progress[0][0] == "all-MiniLM-L6-v2"


def test_cores_busy_reads_proc_stat(monkeypatch):
    samples = iter([(0, 100), (10, 200)])  # 10 of 100 jiffies idle: 90 % busy
    monkeypatch.setattr(speedprobe, "_cpu_times", lambda: next(samples))
    monkeypatch.setattr(speedprobe.time, "sleep", lambda s: None)
    assert speedprobe.cores_busy() == pytest.approx(0.9)
    samples = iter([(0, 100), (95, 200)])
    monkeypatch.setattr(speedprobe, "_cpu_times", lambda: next(samples))
    assert speedprobe.cores_busy() is None


def test_a_local_calls_timeout_scales_with_its_size_and_the_models_speed(timing_dir):
    cfg = Config.load(Path("configs/demo.yaml"), env={})
    priors = dict(cfg.get("dry_run.timing.priors"))
    be = make_backend("local-qwen-1.5b", cfg.backend("local-qwen-1.5b"))
    be.priors = priors
    p = priors["qwen2.5-coder-1.5b"]
    expected = p["overhead_s"] + 3000 / p["prompt_tps"] + 300 / p["gen_tps"]
    assert be.call_timeout(3000, 300) == pytest.approx(speed.TIMEOUT_SCALE * expected)
    assert be.call_timeout(3000, 300) > be.call_timeout(300, 50) >= speed.TIMEOUT_FLOOR_S
    assert be.call_timeout(10, 1) == speed.TIMEOUT_FLOOR_S
    # this machine's probe replaces the prior (twice as fast: half the timeout)
    speed.save({"qwen2.5-coder-1.5b": {**p, "overhead_s": p["overhead_s"] / 2, "prompt_tps": 2 * p["prompt_tps"],
                                       "gen_tps": 2 * p["gen_tps"]}})
    fresh = make_backend("local-qwen-1.5b", cfg.backend("local-qwen-1.5b"))
    fresh.priors = priors
    assert fresh.call_timeout(3000, 300) == pytest.approx(speed.TIMEOUT_SCALE * expected / 2)
    # a fixed timeout_s in the config is kept as it is
    fixed = make_backend("x", {**cfg.backend("local-qwen-1.5b"), "timeout_s": 42})
    assert fixed.call_timeout(3000, 300) == 42.0


def test_the_gateway_gives_a_local_chat_call_its_scaled_timeout(timing_dir):
    from ragrouter.llm.prepare import check_timeout

    cfg = Config.load(Path("configs/demo.yaml"), env={})
    be = make_backend("local-qwen-0.5b", cfg.backend("local-qwen-0.5b"))
    be.priors = dict(cfg.get("dry_run.timing.priors"))
    long = [{"role": "user", "content": "word " * 4000}]
    assert check_timeout(be, None, long, 150) == pytest.approx(be.call_timeout(
        __import__("ragrouter.llm.tokens", fromlist=["x"]).message_tokens(long), 150))
    assert check_timeout(be, None, long, 150) > 600  # more than the old fixed 600 s for such a call
    assert check_timeout(be, 5.0, long, 150) == 5.0  # a stage's own timeout wins
