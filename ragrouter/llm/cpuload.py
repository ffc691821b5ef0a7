"""The CPU other work leaves this process, and the llama.cpp settings and slowdown that go with it.

Read from ``/proc/stat`` (all cores) and ``/proc/self/stat`` (this process, every thread) over a
short window: what the cores did less what this process did is **other work** — other users'
jobs, services, another ``cli.py`` — in cores. Busy cores say nothing more once they are all
busy, so the window also counts the **other sessions** with a thread ready to run
(``/proc/*/task/*/stat``, a few samples): Linux shares the CPU between sessions first
(scheduler autogroups), so beside ``k`` busy sessions a server's session gets ``cpus / (k + 1)``
cores, however many threads it runs. The figures and the rule below come from
``benchmarks/bench_local_models.py --load-matrix`` (benchmarks/docs/local-models.md, "Beside
other work"): tokens per second of both embedded models for 1 and 2 threads × llama.cpp's
``poll`` 0 and 50 (its default), idle and beside 1 and 2 CPU-bound processes in sessions of
their own (each its own scheduler autogroup, as another user's job is: the kernel shares the
CPU between sessions first, so ``nice`` does not reach across them).

* :func:`choose` — threads and poll for a server that starts now (pure: cores and other work
  in, settings out);
* :func:`slowdown` — how much longer a call takes beside that other work than on idle cores,
  at the settings :func:`choose` picks: the idle setting's speed over the speed of the cores
  the server's session gets (pure);
* :func:`current` — the other work now, measured once and kept for a little while.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

WINDOW_S = 0.5  # a measurement: /proc/stat before and after this long
MAX_AGE_S = 20.0  # a measurement is reused this long (stage starts, dry runs' many estimates)


@dataclass(frozen=True)
class Load:
    """Other work on this machine over a short window."""

    cpus: int
    others: float
    """Cores busy with other processes' work (0 … cpus)."""
    window_s: float
    groups: float | None = None
    """Other sessions (autogroups; threads where autogroups are off) with a thread ready to run,
    averaged over the window; None: not counted (taken as ``others``)."""

    @property
    def contenders(self) -> float:
        """What this process' session shares the cores with (:attr:`groups`, else :attr:`others`)."""
        return max(0.0, self.others if self.groups is None else self.groups)

    @property
    def share(self) -> float:
        """The share of the cores other work kept busy (0 … 1)."""
        return min(1.0, max(0.0, self.others / max(1, self.cpus)))

    @property
    def free(self) -> float:
        return max(0.0, self.cpus - self.others)


@dataclass(frozen=True)
class Settings:
    """llama.cpp's worker threads and their polling (``poll`` 0: sleep between work items)."""

    threads: int
    poll: int


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def _system() -> tuple[float, float] | None:
    """(busy, total) jiffies of all cores (None where there is no /proc/stat)."""
    try:
        with open("/proc/stat", encoding="utf-8") as fh:
            f = [float(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = f[3] + (f[4] if len(f) > 4 else 0.0)
    return sum(f) - idle, sum(f)


def _own() -> float | None:
    """utime + stime of this process (all its threads, the in-process llama.cpp server's
    included), in the same clock ticks as /proc/stat."""
    try:
        with open("/proc/self/stat", encoding="utf-8") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return float(f[11]) + float(f[12])
    except (OSError, IndexError, ValueError):
        return None


def autogroups() -> bool:
    """Whether the scheduler shares the CPU between sessions first (Linux autogroups)."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled", encoding="utf-8") as fh:
            return fh.read().strip() == "1"
    except OSError:
        return False


def runnable(exclude: set[int]) -> tuple[int, int]:
    """(sessions, threads) of other processes with a thread running or ready to run now; the
    sessions in ``exclude`` (this process') and kernel threads (session 0) left out."""
    sessions: set[int] = set()
    threads = 0
    try:
        pids = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return 0, 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                    f = fh.read().rsplit(b")", 1)[1].split()
                sid = int(f[3])
            except (OSError, IndexError, ValueError):
                continue
            if f[0] == b"R" and sid and sid not in exclude:
                sessions.add(sid)
                threads += 1
    return len(sessions), threads


SAMPLES = 4  # runnable sessions are counted this many times over a measurement's window


def measure(window_s: float = WINDOW_S, sleep=time.sleep, exclude: set[int] | None = None) -> Load | None:
    """Other work over the next ``window_s`` seconds (None without /proc); ``exclude``: the
    sessions that are not other work (default: this process')."""
    s0, o0 = _system(), _own()
    if s0 is None or o0 is None:
        return None
    exclude = {os.getsid(0)} if exclude is None else exclude
    by_session = autogroups()
    counts = []
    for _ in range(SAMPLES):
        sleep(window_s / SAMPLES)
        sessions, threads = runnable(exclude)
        counts.append(sessions if by_session else threads)
    s1, o1 = _system(), _own()
    if s1 is None or o1 is None or s1[1] <= s0[1]:
        return None
    n = cpus()
    # /proc/stat counts every CPU of the machine; the share is of them all, in this process' CPUs
    total_cpus = os.cpu_count() or n
    others = total_cpus * max(0.0, (s1[0] - s0[0]) - (o1 - o0)) / (s1[1] - s0[1])
    return Load(cpus=n, others=round(min(float(n), others), 2), window_s=window_s,
                groups=round(sum(counts) / len(counts), 2))


_LOCK = threading.Lock()
_LAST: tuple[float, Load] | None = None


def current(max_age_s: float = MAX_AGE_S, window_s: float = WINDOW_S) -> Load | None:
    """The other work now: a measurement at most ``max_age_s`` old, else a new one."""
    global _LAST
    with _LOCK:
        if _LAST is not None and time.monotonic() - _LAST[0] <= max_age_s:
            return _LAST[1]
        got = measure(window_s)
        if got is not None:
            _LAST = (time.monotonic(), got)
        return got


def forget() -> None:
    """Drop the kept measurement (the next :func:`current` measures)."""
    global _LAST
    with _LOCK:
        _LAST = None


# ------------------------------------------------------------------------ the rule

BUSY_CORE = 0.5  # other work above this many cores takes a core from llama.cpp's threads


def choose(n_cpus: int, others: float) -> Settings:
    """Threads and poll for a llama.cpp server on ``n_cpus`` cores with ``others`` cores busy
    with other work (see the measured table in benchmarks/docs/local-models.md):

    * threads: the cores other work leaves free (rounded, a core counted busy above
      :data:`BUSY_CORE`), at least 1. Beside other work two threads on two cores were measured
      2–13x slower than one (a worker that loses its core stalls the other at every barrier);
    * poll: llama.cpp's default (50) on idle cores (other work at most :data:`BUSY_CORE`): the
      setting idle machines ran at before, so their speed is unchanged; 0 (idle workers sleep
      instead of spinning for work) beside other work, where a spinning worker only takes CPU
      from the working one.
    """
    n_cpus = max(1, int(n_cpus))
    busy = max(0.0, float(others))
    threads = max(1, min(n_cpus, int(n_cpus - busy + (1.0 - BUSY_CORE))))
    return Settings(threads=threads, poll=50 if busy <= BUSY_CORE else 0)


# Two threads on two idle cores against one (benchmarks/docs/local-models.md, "Idle re-run": on an
# idle 2-core machine the 0.5B read 122.5 / 32.9 prompt / reply tokens a second at 2 threads and
# 68.4 / 18.7 at 1, the 1.5B 59.0 / 14.2 and 35.6 / 8.4: 1.66-1.79x, 1.72x their geometric mean;
# a first pass between other jobs had read 1.34-1.41x): speed(cores) = cores ** SPEEDUP_EXP from
# one core up, linear below (time-slicing: a 1-thread server's rate over its share of a core was
# within 11-14 reply tokens a second beside 2.6 to 5.1 other sessions). Beside two busy sessions
# this predicts x2.6; a fresh clone's make run there took x2.8 (extract) and x2.3 (answer).
SPEEDUP_EXP = 0.78  # 2 ** 0.78 = 1.72


def speed(cores: float) -> float:
    """llama.cpp's speed on ``cores`` cores against one (time-slicing below one core)."""
    c = max(1e-3, float(cores))
    return c ** SPEEDUP_EXP if c >= 1.0 else c


def slowdown(load: Load) -> float:
    """How many times longer local model work takes beside the other work ``load`` than on idle
    cores: the idle setting's speed over the speed of the cores this session gets — the threads
    :func:`choose` picks now, at most its fair share ``cpus / (contenders + 1)`` of the cores."""
    n = max(1, int(load.cpus))
    idle, now = choose(n, 0.0), choose(n, load.others)
    contenders = load.contenders if load.contenders >= BUSY_CORE else 0.0  # a blip of a shell is no contender
    cores = min(float(now.threads), n / (contenders + 1.0))
    return max(1.0, speed(idle.threads) / speed(cores))
