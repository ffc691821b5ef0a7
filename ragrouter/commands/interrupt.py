"""Ctrl-C and SIGTERM on ``run`` and ``demo``: one line — what is done, what is pending, the
command that resumes — and an exit that does not wait for calls in flight.

:func:`stoppable` turns SIGTERM into :class:`Stopped` (a ``KeyboardInterrupt``, so every path
that keeps what finished on Ctrl-C does so on SIGTERM: the stage runner writes the finished
units and the interrupted stage's ``stage_timings`` row, ``ragrouter.stages.runner``). The
command tells :class:`Steps` which step it is in; the line is printed once the command's own
clean-up (the ledger's flush) is done, then the process ends at once (exit status 130 after
Ctrl-C, 143 after SIGTERM): a model call in flight is not waited for — its unit stays pending,
and a second signal while the line is being written ends the process on the spot.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from dataclasses import dataclass, field

import click

from ragrouter.db.redact import command_line


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised in the main thread."""


@dataclass
class Steps:
    """The steps of a command in order, and which of them are done."""

    planned: list[str]
    done: list[str] = field(default_factory=list)
    current: str | None = None

    def start(self, name: str) -> None:
        self.current = name
        if name not in self.planned:
            self.planned.append(name)

    def finish(self, name: str) -> None:
        if name not in self.done:
            self.done.append(name)
        if self.current == name:
            self.current = None

    def pending(self) -> list[str]:
        return [s for s in self.planned if s not in self.done and s != self.current]


def resume_command(argv: list[str] | None = None) -> str:
    """The command line that resumes this one (itself: every step is resumable), secrets redacted."""
    line = command_line(argv)
    return f"python {line}" if line.split(" ", 1)[0].endswith(".py") else line


def stop_line(steps: Steps, exc: BaseException, argv: list[str] | None = None) -> str:
    """One line: what stopped it, in which step with its units, what is done and pending, and
    the command that resumes."""
    how = "SIGTERM" if isinstance(exc, Stopped) else "Ctrl-C"
    rep = getattr(exc, "stage_report", None)
    where = ""
    if steps.current:
        where = f" in {steps.current}"
        if rep is not None:
            left = max(0, rep.pending - rep.done - rep.failed)
            where += (f" ({rep.done} of {rep.pending} units done" + (f", {rep.failed} failed" if rep.failed else "")
                      + f", {left} pending; its time is recorded)")
    done = ", ".join(steps.done) or "nothing"
    pending = ", ".join(steps.pending()) or "nothing else"
    return (f"stopped by {how}{where}; done: {done}; still to run: {pending}; "
            f"resume with: {resume_command(argv)}")


@contextlib.contextmanager
def stoppable(steps: Steps):
    """SIGTERM raises :class:`Stopped` in the block; an interruption prints :func:`stop_line`
    and ends the process (see the module doc). Only in the main thread (elsewhere: as is)."""
    if threading.current_thread() is not threading.main_thread():
        yield steps
        return
    state = {"stopping": False}

    def on_signal(signum, frame):
        if state["stopping"]:  # a second signal: no more clean-up
            os._exit(128 + signum)
        state["stopping"] = True
        raise Stopped() if signum == signal.SIGTERM else KeyboardInterrupt()

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield steps
    except KeyboardInterrupt as exc:
        state["stopping"] = True
        click.echo(stop_line(steps, exc), err=True)
        code = 143 if isinstance(exc, Stopped) else 130
        sys.stdout.flush()
        sys.stderr.flush()
        if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
            os._exit(code)  # worker threads with calls in flight would hold the exit until they return
        raise SystemExit(code) from None
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
