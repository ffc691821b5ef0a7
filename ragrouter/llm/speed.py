"""This machine's measured speed of the local models, and the timeout of a local call.

The speed probe (:mod:`ragrouter.decisions.speedprobe`) measures each local model once per machine
and keeps the figures in ``$RAGROUTER_HOME/timing/<machine>.json`` (``$RAGROUTER_TIMING_DIR``
if set; machine = CPU model and count). Every figure is saved the moment it is measured, so a
probe stopped half-way keeps what it measured. The figures are read here, in the model layer,
because a local backend's timeout follows them: a call on a CPU server takes seconds for a
short prompt and many minutes for a long one on a busy machine, so no single number is right
(:func:`call_timeout`).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

from ragrouter.paths import home

TIMEOUT_SCALE = 10.0  # a local call may take this many times its expected latency ...
TIMEOUT_FLOOR_S = 120.0  # ... and never less than this (a server's first call allocates its buffers)


def machine_key() -> str:
    """CPU model and count: machines of one size and kind share their figures."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    tag = hashlib.sha256(cpu.encode()).hexdigest()[:10]
    return f"{os.cpu_count() or 1}cpu-{tag}"


def cache_path() -> Path:
    """``$RAGROUTER_TIMING_DIR`` (the tests point it at a folder of their own), else
    ``$RAGROUTER_HOME/timing``, / ``<machine>.json``."""
    env = os.environ.get("RAGROUTER_TIMING_DIR")
    if env:
        return Path(env) / f"{machine_key()}.json"

    return home() / "timing" / f"{machine_key()}.json"


def load() -> dict[str, dict]:
    """{model: measured figures} of this machine ({} when never probed or unreadable)."""
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): dict(v) for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def save(figures: dict[str, dict]) -> Path:
    """Merge ``figures`` into this machine's file (atomically); its path."""
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = {**load(), **figures}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(merged, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
    return path


def figures_for(model: str, priors: dict[str, dict]) -> tuple[dict, str]:
    """The figures a local ``model``'s calls are timed by, and their basis: this machine's
    probe, else the config's prior for the model, else its prior for any local model."""
    probed = load().get(str(model))
    if probed and probed.get("prompt_tps"):
        return probed, f"probe:{model}"
    if priors.get(str(model)):
        return dict(priors[str(model)]), f"prior:{model}"
    return dict(priors.get("local") or {}), "prior:local"


def expected_seconds(fig: dict, prompt_tokens: int, max_tokens: int) -> float:
    """Expected latency of one call: overhead + prompt at the prompt rate + the whole reply
    cap at the reply rate (the figures are per call at the backend's calls in flight)."""
    def per(key: str, fallback: float) -> float:
        v = fig.get(key)
        return 1.0 / float(v) if isinstance(v, (int, float)) and v > 0 else 1.0 / fallback

    return float(fig.get("overhead_s") or 0.0) + prompt_tokens * per("prompt_tps", 20.0) \
        + max_tokens * per("gen_tps", 5.0)


def call_timeout(fig: dict, prompt_tokens: int, max_tokens: int) -> float:
    """The timeout of one local call: :data:`TIMEOUT_SCALE` times its expected latency (a
    loaded machine runs a few times slower; a server that does not answer in ten times the
    time is stuck), at least :data:`TIMEOUT_FLOOR_S`."""
    return max(TIMEOUT_FLOOR_S, TIMEOUT_SCALE * expected_seconds(fig, prompt_tokens, max_tokens))
