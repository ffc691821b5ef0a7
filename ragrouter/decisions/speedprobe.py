"""This machine's speed of the local models, measured once and kept (``run --dry-run --probe``).

The dry run's priors for the embedded models (``dry_run.timing.priors``) were measured on one
2-core machine; another machine of the same size ran the same calls 1.5x faster
(benchmarks/README.md, "Time in every estimate"), which alone puts a fresh store's estimate
outside ±30 %. The probe measures the machine it runs on, per local model of the config:

* a chat model (``kind: local``): its server is started (``load_s``), then, at the backend's
  calls in flight (``n_parallel``), a round of short prompts with one reply token and a round of
  long prompts with one reply token (the pair alternated ``PROMPT_REPEATS`` times, each taken
  at its median) and a round of long prompts with ``GEN_TOKENS`` reply
  tokens (every prompt distinct, so llama.cpp's prompt cache cannot serve it). The per-call
  latency model of :mod:`ragrouter.stages.timing` (``overhead_s + prompt / prompt_tps +
  completion / gen_tps``) is solved from the rounds' latencies (each round the mean of its
  calls; the two prompt rounds the median of their repeats) and token counts as the server
  reported them; a fourth round of ~300-token prompts and ``SHORT_REPLY_TOKENS``-token
  replies gives the reply rate of short replies (``gen_tps_short``), which the estimate uses for
  calls whose mean reply is that short (interpolated up to ``GEN_TOKENS``);
* an encoder (``kind: local-encoder``): load time and tokens per second over a batch of
  chunk-sized texts; for the config's scoring encoder also the score stage's start on it
  (BERTScore's import and scorer, the first pair scored: ``score_start_s``).

Results are kept in ``$RAGROUTER_HOME/timing/<machine>.json`` (``$RAGROUTER_TIMING_DIR`` if set) (machine = CPU model and count),
so every later dry run, ``plan`` and ``status`` on this machine uses them (``time_basis``
``probe:<model>``) until the store has its own history of the model. No call goes to the
ledger: these are not benchmark calls, and a local model costs nothing.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from concurrent.futures import ThreadPoolExecutor

from ragrouter.evaluation.metrics import SemanticF1
from ragrouter.llm import local_server, speed
from ragrouter.llm.kinds import make_backend

GEN_TOKENS = 160  # the reply round: long enough that its seconds are not lost in the prompt rounds' noise (48 gave 10.8-19 tok/s idle)
SHORT_REPLY_TOKENS = 50  # the short-reply round: a judge's or an answer's reply size
MID_WORDS = 250  # ... and its prompt (~300 tokens)
SHORT_WORDS = 40
LONG_WORDS = 360
PROMPT_REPEATS = 3  # the two prompt rounds, alternated this many times, each at its median latency
_WORDS = ("the patient was given a dose of the drug and the nurse noted the pulse blood pressure and "
          "temperature every hour while the doctor reviewed the chart for signs of infection").split()


# the figures' file lives in the model layer (a local backend's timeout follows them)
machine_key, cache_path, load, _save = speed.machine_key, speed.cache_path, speed.load, speed.save


def _text(words: int, salt: int) -> str:
    """A distinct prompt of about ``words`` words (salt first: no shared prefix to cache)."""
    out = [f"record {salt * 7919 % 100003}:"]
    i = salt
    while len(out) < words:
        out.append(_WORDS[i % len(_WORDS)])
        i = i * 31 + 7
    return " ".join(out)


def _round(backend, n: int, words: int, max_tokens: int, salt: int) -> tuple[float, float, float]:
    """(mean latency s, mean prompt tokens, mean completion tokens) of ``n`` concurrent calls,
    each given the backend's timeout for a call of its size (``probe_timeout``)."""
    timeout = probe_timeout(backend, int(words * 1.4) + 12, max_tokens)

    def one(i: int):
        messages = [{"role": "user", "content": _text(words, salt + i) + "\nCount from 1 to 500, comma separated."}]
        started = time.perf_counter()
        reply = backend.chat_once(messages, temperature=0.0, max_tokens=max_tokens, response_format=None,
                                  timeout_s=timeout)
        return time.perf_counter() - started, float(reply.prompt_tokens or 0), float(reply.completion_tokens or 0)

    with ThreadPoolExecutor(max_workers=n) as pool:
        rows = list(pool.map(one, range(n)))
    return tuple(sum(r[k] for r in rows) / n for k in range(3))  # type: ignore[return-value]


def probe_timeout(backend, prompt_tokens: int, max_tokens: int) -> float:
    """A probe call's timeout: the probe's own setting (``dry_run.probe_timeout_s``, set on the
    backend as ``probe_timeout_s``), else the backend's timeout for a call of that size
    (:meth:`~ragrouter.llm.local_backends.LocalBackend.call_timeout`: scaled from the prior
    speed), else its fixed ``timeout_s``."""
    fixed = getattr(backend, "probe_timeout_s", None)
    if fixed:
        return float(fixed)
    scaled = getattr(backend, "call_timeout", None)
    return float(scaled(prompt_tokens, max_tokens)) if scaled else float(getattr(backend, "timeout_s", 600.0))


def solve(short: tuple, long: tuple, gen: tuple) -> dict:
    """overhead_s, prompt_tps, gen_tps from three rounds' (latency, prompt, completion) means:
    short vs long prompt gives seconds per prompt token, long vs long-with-reply seconds per
    reply token, and the rest is overhead (each clipped at ≥ 0)."""
    (l1, p1, c1), (l2, p2, c2), (l3, p3, c3) = short, long, gen
    s_prompt = max(1e-6, (l2 - l1) / max(1.0, p2 - p1))
    s_gen = max(1e-6, (l3 - l2 - s_prompt * (p3 - p2)) / max(1.0, c3 - c2))
    overhead = max(0.0, l2 - s_prompt * p2 - s_gen * c2)
    return {"overhead_s": round(overhead, 3), "prompt_tps": round(1.0 / s_prompt, 1), "gen_tps": round(1.0 / s_gen, 2)}


def probe_chat(backend) -> dict:
    started = time.perf_counter()
    backend.endpoint()  # starts the local server (weights installed when missing)
    load_s = time.perf_counter() - started
    n = max(1, int(getattr(backend, "n_parallel", 1) or 1))
    _round(backend, 1, 8, 1, 0)  # warm-up: the first call of a fresh server pays for its buffers
    # the prompt rate comes from the difference of two rounds of 2 calls: one round slowed by a
    # neighbour moved the 1.5B's reading from 50 to 29 tok/s with idle cores (and the judge's
    # estimate, prompt-bound, with it), so the pair is alternated and each taken at its median
    shorts, longs = [], []
    for k in range(PROMPT_REPEATS):
        shorts.append(_round(backend, n, SHORT_WORDS, 1, 100 + 10 * k))
        longs.append(_round(backend, n, LONG_WORDS, 1, 200 + 10 * k))
    short, long = median_round(shorts), median_round(longs)
    # the reply round must generate GEN_TOKENS in every call: a call that stops early leaves
    # the other one alone on the cores (a 0.5B stopped at 77 of 160 tokens on average and read
    # 23 tok/s, where a full round read 10-17); llama.cpp's server takes ``ignore_eos``
    saved = getattr(backend, "extra_body", None)
    if saved is not None:
        backend.extra_body = {**saved, "ignore_eos": True}
    try:
        gen = _round(backend, n, LONG_WORDS, GEN_TOKENS, 300)
        reply = _round(backend, n, MID_WORDS, SHORT_REPLY_TOKENS, 400)
    finally:
        if saved is not None:
            backend.extra_body = saved
    fig = solve(short, long, gen)
    return {**fig, **short_reply_rate(fig, reply), "parallel": n, "load_s": round(load_s, 2),
            "rounds": {"short": short, "long": long, "gen": gen, "reply": reply,
                       "short_latencies": [round(r[0], 3) for r in shorts],
                       "long_latencies": [round(r[0], 3) for r in longs]}}


def median_round(rounds: list[tuple]) -> tuple:
    """The round of median latency (its own token counts: the rounds' prompts differ a little)."""
    ordered = sorted(rounds, key=lambda r: r[0])
    return ordered[(len(ordered) - 1) // 2]


def short_reply_rate(fig: dict, reply: tuple) -> dict:
    """The reply rate of the short-reply round (``gen_tps_short`` at ``short_reply_tokens``):
    its latency less the overhead and its prompt at the solved rates, over its reply tokens.
    A one-off round at the judge's sizes once read ~6 tok/s where the long round read 11.7
    (the judge's calls took 13.9 s, the linear model predicted 9.9); in the four demo probes
    since (demo7-demo10, both chat models), the short round read 0.87-1.0x the long one, so
    this guards the case more than it has mattered (benchmarks/README.md, "Time in every
    estimate")."""
    lat, prompt, completion = reply
    if completion < 1:
        return {}
    gen_s = lat - fig["overhead_s"] - prompt / fig["prompt_tps"]
    per = max(1.0 / fig["gen_tps"], gen_s / completion)  # never faster than the long replies
    return {"gen_tps_short": round(1.0 / per, 2), "short_reply_tokens": round(float(completion), 1),
            "long_reply_tokens": float(GEN_TOKENS)}


_CHILD = """
import json, sys, time
t = time.perf_counter()
from ragrouter.llm.encoder import get_encoder
from ragrouter.decisions.speedprobe import _encode_rate, _score_start
enc = get_encoder(sys.argv[1])
enc.encode(["warm up"], batch_size=1)
load_s = time.perf_counter() - t
out = {"load_s": load_s, "prompt_tps": _encode_rate(enc, int(sys.argv[2]))}
if int(sys.argv[3]) > 0:
    out["score_start_s"] = _score_start(enc, int(sys.argv[3]))
print(json.dumps(out))
"""


def _score_start(enc, layers: int) -> float:
    """Seconds the score stage spends before its first run once its sentence encoder is loaded:
    BERTScore's import and its scorer built on the same weights (``layers`` layers), then one
    pair scored (the first forward pass)."""
    started = time.perf_counter()
    sem = SemanticF1(model_path=enc.model_path, num_layers=layers)
    sem.score(["The probe's answer."], ["The probe's reference."])
    return round(time.perf_counter() - started, 3)


def _encode_rate(enc, batch_size: int) -> float:
    """Tokens per second ``enc`` encodes 64 distinct 300-word texts at ``batch_size``."""
    texts = [_text(300, 400 + i) for i in range(64)]
    started = time.perf_counter()
    enc.encode(texts, batch_size=batch_size)
    secs = time.perf_counter() - started
    return round(sum(enc.count_tokens(texts)) / max(secs, 1e-6), 1)


def _fresh_process(model: str, batch_size: int, score_layers: int = 0) -> dict | None:
    """An encoder measured in a fresh interpreter: the seconds to import the encoder stack and
    load ``model`` (what the first embedding stage of a run pays) and its encoding rate. The
    calling process never loads the model, so a stage that follows the probe in it (the demo)
    pays the load the estimate charges; with ``score_layers``, also the score stage's start on
    it (:func:`_score_start`). ``None`` when the child cannot load it (an encoder registered
    only in this process)."""
    import json
    import subprocess
    import sys

    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, model, str(batch_size), str(int(score_layers))],
                             capture_output=True, text=True, timeout=300, check=True)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        return {"load_s": float(got["load_s"]), "prompt_tps": float(got["prompt_tps"]),
                **({"score_start_s": float(got["score_start_s"])} if "score_start_s" in got else {})}
    except (subprocess.SubprocessError, OSError, ValueError, IndexError, KeyError, TypeError):
        return None


def probe_encoder(backend, score_layers: int = 0) -> dict:
    """An encoder's figures, measured in a child process; the first child reads the weights
    from disk and is discarded, so the second one's load is what a run pays with the page cache
    the probe leaves (a cold read measured 5.5 s where the stage then took 4 s). An encoder the
    child cannot load is measured in this process. ``score_layers`` > 0 (the config's scoring
    encoder): the score stage's start on it too (``score_start_s``)."""
    got = _fresh_process(backend.model, backend.batch_size)
    if got is not None:
        got = _fresh_process(backend.model, backend.batch_size, score_layers) or got
    else:
        started = time.perf_counter()
        enc = backend.encoder()
        enc.encode(["warm up"], batch_size=1)
        got = {"load_s": time.perf_counter() - started, "prompt_tps": _encode_rate(enc, backend.batch_size)}
        if score_layers > 0 and getattr(enc, "model_path", None) is not None:
            got["score_start_s"] = _score_start(enc, score_layers)
    out = {"overhead_s": 0.0, "prompt_tps": got["prompt_tps"], "gen_tps": None, "parallel": 1,
           "load_s": round(got["load_s"], 2)}
    if "score_start_s" in got:
        out["score_start_s"] = got["score_start_s"]
    return out


SETTLE_IDLE = 0.85  # a chat model is probed once this share of the CPU time is idle over a second ...
SETTLE_MAX_S = 30.0  # ... or after this long


def _cpu_times() -> tuple[float, float] | None:
    """(idle, total) jiffies of all cores from /proc/stat (None where there is none)."""
    try:
        with open("/proc/stat", encoding="utf-8") as fh:
            fields = [float(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + (fields[4] if len(fields) > 4 else 0.0), sum(fields)


def settle(max_s: float = SETTLE_MAX_S, idle: float = SETTLE_IDLE, sleep=time.sleep) -> float:
    """Wait until the cores are idle (``idle`` of the CPU time over the last second), at most
    ``max_s``; the seconds waited. The previous model's server keeps the cores busy for a few
    seconds after it stops, and a chat model probed then read its prompt rate 1.7x apart between
    two runs (29 and 50 tok/s, the 1.5B after the 0.5B; benchmarks/README.md, "Time in every
    estimate"). The 1-minute load average lags by a minute, so it cannot tell."""
    started = time.monotonic()
    before = _cpu_times()
    if before is None:
        return 0.0
    while time.monotonic() - started < max_s:
        sleep(1.0)
        now = _cpu_times()
        if now is None or now[1] <= before[1]:
            return round(time.monotonic() - started, 1)
        if (now[0] - before[0]) / (now[1] - before[1]) >= idle:
            break
        before = now
    return round(time.monotonic() - started, 1)


def local_backends(config) -> dict[str, dict]:
    """{backend name: spec} of the config's local backends bound to a role or a generator."""
    backends = config.section("backends")
    return {n: backends[n] for n in sorted(config.bound_backends())
            if isinstance(backends.get(n), dict) and backends[n].get("kind") in ("local", "local-encoder")}


def cores_busy(idle: float = SETTLE_IDLE) -> float | None:
    """The share of CPU time that was busy over the last second when it was more than
    ``1 - idle`` (another job on the machine), else None."""
    before = _cpu_times()
    if before is None:
        return None
    time.sleep(1.0)
    now = _cpu_times()
    if now is None or now[1] <= before[1]:
        return None
    busy = 1.0 - (now[0] - before[0]) / (now[1] - before[1])
    return busy if busy > 1.0 - idle else None


def probe(config, echo=print, *, missing_only: bool = False, on_model=None) -> dict[str, dict]:
    """Measure every local model the config uses (``missing_only``: those this machine has
    no figures for yet); keep and return {model: figures}.

    A probe never stops the work that asked for it: a model whose probe fails or times out is
    one warning line and keeps the priors; each model's figures are saved the moment they are
    measured; on cores another job keeps busy (still busy after :func:`settle`'s wait) a model is
    not measured, with a note, since its figures would be this machine's for every later
    estimate. ``on_model(model, k, n)`` is told before each model is measured (the demo writes
    it to the store's progress file, so ``status`` shows it); ``dry_run.probe_timeout_s`` caps
    each probe call (null: scaled from the model's prior speed and the call's size)."""
    # each model is measured alone and left stopped: a resident idle server slowed the other
    # model's calls ~30 % on 2 cores, in the probe and in the stages after it
    resident = {s.model_name for s in local_server.running_servers()}
    figures: dict[str, dict] = {}
    known = load() if missing_only else {}
    priors = dict(config.get("dry_run.timing.priors", None) or {})
    call_cap = config.get("dry_run.probe_timeout_s", None)
    # encoders first: a chat model's server leaves the cores busy for a few seconds after it
    # stops, and an encoder's load (seconds, CPU-bound) measured then reads ~1.5x slow
    ordered = sorted(local_backends(config).items(), key=lambda kv: kv[1].get("kind") != "local-encoder")
    todo = [(n, s) for n, s in ordered if s.get("model") not in known]
    for k, (name, spec) in enumerate(todo):
        model = str(spec.get("model"))
        if model in figures:
            continue
        if on_model is not None:
            on_model(model, k, len(todo))
        settled = settle() if spec.get("kind") == "local" else 0.0
        busy = cores_busy(idle=0.65)
        if busy is not None:
            echo(f"probe: {model} not measured: the cores are {100 * busy:.0f} % busy with other work, and figures "
                 "taken now would be this machine's for every later estimate; the estimates use the priors "
                 "(probe again when the machine is idle: run --dry-run --probe)")
            continue
        load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        echo(f"probe: measuring {model} on this machine ({machine_key()}) …")
        backend = None
        try:
            backend = make_backend(name, spec, source=config.source)
            if spec.get("kind") == "local":
                backend.priors, backend.probe_timeout_s = priors, call_cap
            if spec.get("kind") == "local-encoder":
                scoring = str(config.get("scoring.encoder", "") or "") == model
                fig = probe_encoder(backend, int(config.get("scoring.bertscore_layers", 0) or 0) if scoring else 0)
            else:
                fig = probe_chat(backend)
        except Exception as exc:  # noqa: BLE001 - a probe is optional: priors, one warning, go on
            reason = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            echo(f"probe: warning: {model} could not be measured ({reason[:300]}); the estimates use its priors")
            continue
        finally:
            if backend is not None:
                backend.close()
            local_server.stop_idle_except(resident)
        fig["measured_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        fig["load_average"] = round(load_avg, 2)
        fig["settled_s"] = settled
        figures[model] = fig
        path = _save({model: fig})  # kept now: a later model's failure or a kill loses nothing
        echo(f"probe: {model}: load {fig['load_s']} s, prompt {fig['prompt_tps']} tok/s, "
             f"reply {fig['gen_tps']} tok/s per call at {fig['parallel']} in flight"
             + (f", score stage start {fig['score_start_s']} s" if "score_start_s" in fig else "")
             + f" (kept in {path})")
    return figures
