"""The CPU other work leaves free, the llama.cpp settings chosen from it, and the slowdown the
estimates allow for (ragrouter/llm/cpuload.py; the measured table: benchmarks/docs/local-models.md)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragrouter.llm import cpuload
from ragrouter.llm.cpuload import Load, Settings, choose, slowdown
from ragrouter.stages import timing


# What `benchmarks/bench_local_models.py --load-matrix` read as other work (cores, over one
# second) just before its cells started on the 2-core machine, and the setting measured fastest
# there (benchmarks/docs/local-models.md, "Beside other work").
MEASURED = [
    (0.0, Settings(2, 50)), (0.12, Settings(2, 50)),     # idle (a neighbour's editor, the shell)
    (1.0, Settings(1, 0)), (1.01, Settings(1, 0)),       # one busy session
    (1.55, Settings(1, 0)), (2.0, Settings(1, 0)),       # two busy sessions (or one and a neighbour's tests)
]


@pytest.mark.parametrize("others,best", MEASURED)
def test_the_rule_picks_the_setting_measured_fastest_on_two_cores(others, best):
    assert choose(2, others) == best


@given(st.integers(min_value=1, max_value=64), st.floats(min_value=0, max_value=64, allow_nan=False),
       st.floats(min_value=0, max_value=64, allow_nan=False))
def test_more_other_work_never_gets_more_threads_and_never_a_spinning_pool(cpus, a, b):
    lo, hi = sorted((min(a, cpus), min(b, cpus)))
    calm, busy = choose(cpus, lo), choose(cpus, hi)
    assert 1 <= busy.threads <= calm.threads <= cpus
    assert busy.threads <= max(1, math.ceil(cpus - hi))  # never more threads than cores left free
    assert calm.poll in (0, 50) and busy.poll in (0, 50)
    assert not (busy.poll > calm.poll)  # polling only where the cores are idler
    if hi > cpuload.BUSY_CORE:
        assert busy.poll == 0
    assert choose(cpus, 0.0) == Settings(cpus, 50)  # idle cores: every core, llama.cpp's default poll


def test_slowdown_is_the_idle_settings_speed_over_the_fair_share_of_a_busy_machine():
    assert slowdown(Load(2, 0.0, 0.5, groups=0.0)) == 1.0
    assert slowdown(Load(2, 0.1, 0.5, groups=0.3)) == 1.0  # a shell's blip
    two_over_one = cpuload.speed(2)
    assert two_over_one == pytest.approx(1.72, abs=0.01)  # measured: 2 threads on 2 idle cores vs 1
    # one busy session: one thread on its own core; two: a third of the cores each, the server 2/3 of one
    assert slowdown(Load(2, 1.0, 0.5, groups=1.0)) == pytest.approx(two_over_one)
    assert slowdown(Load(2, 2.0, 0.5, groups=2.0)) == pytest.approx(two_over_one * 1.5)
    assert slowdown(Load(2, 2.0, 0.5, groups=7.0)) == pytest.approx(two_over_one * 4.0)
    assert slowdown(Load(2, 1.5, 0.5)) == pytest.approx(two_over_one * 2.5 / 2)  # not counted: the busy cores


@given(st.integers(min_value=1, max_value=32), st.floats(min_value=0, max_value=32, allow_nan=False),
       st.floats(min_value=0, max_value=64, allow_nan=False), st.floats(min_value=0, max_value=64, allow_nan=False))
def test_slowdown_grows_with_the_contenders_and_is_never_a_speedup(cpus, others, a, b):
    others = min(others, cpus)
    lo, hi = sorted((a, b))
    calm, busy = slowdown(Load(cpus, others, 0.5, groups=lo)), slowdown(Load(cpus, others, 0.5, groups=hi))
    assert 1.0 <= calm <= busy


def test_measure_counts_the_cores_less_this_process_and_the_other_sessions(monkeypatch):
    # 200 jiffies of the whole machine went by (2 cores x 100): 150 busy, 50 of them this process'
    system = iter([(1000.0, 10_000.0), (1150.0, 10_200.0)])
    own = iter([400.0, 450.0])
    ready = iter([(1, 3), (2, 4), (2, 2), (1, 1)])  # (sessions, threads) ready to run at each sample
    monkeypatch.setattr(cpuload, "_system", lambda: next(system))
    monkeypatch.setattr(cpuload, "_own", lambda: next(own))
    monkeypatch.setattr(cpuload, "runnable", lambda exclude: next(ready))
    monkeypatch.setattr(cpuload, "autogroups", lambda: True)
    monkeypatch.setattr(cpuload, "cpus", lambda: 2)
    monkeypatch.setattr(cpuload.os, "cpu_count", lambda: 2)
    got = cpuload.measure(window_s=0.5, sleep=lambda s: None)
    assert got == Load(cpus=2, others=1.0, window_s=0.5, groups=1.5)
    assert got.share == 0.5 and got.free == 1.0 and got.contenders == 1.5


def test_runnable_finds_a_busy_session_of_its_own_and_leaves_ours_out():
    import os
    import subprocess
    import time

    busy = subprocess.Popen(["python3", "-c", "while True: pass"], start_new_session=True)
    try:
        time.sleep(0.3)
        seen = [cpuload.runnable({os.getsid(0)}) for _ in range(20)]
        mine = [cpuload.runnable({os.getsid(0), busy.pid}) for _ in range(20)]
    finally:
        busy.kill()
        busy.wait()
    # the busy loop is ready to run (or running) at every look, in a session that is not ours
    assert all(sessions >= 1 and threads >= 1 for sessions, threads in seen), seen
    assert sum(s for s, _ in mine) < sum(s for s, _ in seen)


def test_current_keeps_a_measurement_for_a_while(monkeypatch):
    calls = []
    monkeypatch.setattr(cpuload, "measure", lambda window_s: calls.append(window_s) or Load(2, 0.5, window_s))
    cpuload.forget()
    try:
        assert cpuload.current().others == 0.5 and cpuload.current().others == 0.5
        assert len(calls) == 1
        cpuload.current(max_age_s=0.0)
        assert len(calls) == 2
    finally:
        cpuload.forget()


def test_the_busy_line_names_the_share_and_the_factor(monkeypatch):
    monkeypatch.setenv(timing.OTHER_CORES_ENV, "1.4")
    monkeypatch.setattr(cpuload, "cpus", lambda: 2)
    share, factor = timing.load_scale()
    assert share == pytest.approx(0.7) and factor == pytest.approx(slowdown(Load(2, 1.4, 0.0)))
    line = timing.load_line()
    assert line.startswith(f"the cores are 70 % busy with other work: times ×{factor:.1f} (")
    assert timing.load_line(Load(2, 2.0, 0.5, groups=2.0)).startswith(
        "the cores are 100 % busy with other work, 2.0 other sessions running: times ×2.6 (")
    monkeypatch.setenv(timing.OTHER_CORES_ENV, "0")
    assert timing.load_line() is None
    monkeypatch.setenv(timing.OTHER_CORES_ENV, "lots")
    with pytest.raises(ValueError, match="RAGROUTER_OTHER_CORES='lots'"):
        timing.load_scale()
