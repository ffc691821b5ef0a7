"""Call-level scheduling: a backend's request slots go to the unit with the most calls left.

A backend serves at most ``concurrency`` requests at a time. Units that make several
*sequential* calls (IterativeRAG: up to 2 + 3·max_rounds) would leave a tail if a thread held
a slot for a whole unit: the last long units to start end long after everything else. So the
stage runner runs more unit threads than the backend has slots (``worker.threads_per_slot``)
and each HTTP attempt takes a slot from :class:`PrioritySlots`: the free slot goes to the
waiting call whose unit has the **most expected calls left** (ties: the unit that started
first). With unit-time calls on identical slots this is Hu's highest-level-first rule, optimal
for chains: every long unit keeps progressing, the one-call units fill the gaps, and the slots
stay full until the end (``benchmarks/README.md``, issue 17).

The unit's weight travels in a context variable that the runner sets around
``stage.compute`` (:func:`unit_priority`); a call made outside any unit (direct library use)
has weight 0 and is served first-come first-served behind the units' calls of weight ≥ 1.
The gateway counts a unit's chat calls down as they are made (:func:`count_call`).
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import threading
import time


class UnitPriority:
    """The expected calls a unit still has to make, and its start order (lower first)."""

    __slots__ = ("remaining", "seq")

    def __init__(self, remaining: int, seq: int):
        self.remaining = int(remaining)
        self.seq = int(seq)

    def key(self) -> tuple[int, int]:
        return (-self.remaining, self.seq)


_CURRENT: contextvars.ContextVar[UnitPriority | None] = contextvars.ContextVar("ragrouter_unit_priority",
                                                                               default=None)
_SEQ = itertools.count()


@contextlib.contextmanager
def unit_priority(expected_calls: int, seq: int | None = None):
    """Within this block, the calling thread's requests carry the priority of a unit that
    expects ``expected_calls`` sequential calls (``seq``: its place in the schedule)."""
    token = _CURRENT.set(UnitPriority(expected_calls, next(_SEQ) if seq is None else seq))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_key() -> tuple[int, int]:
    """The sort key of the calling thread's next request (lower = served first)."""
    p = _CURRENT.get()
    return (0, 1 << 62) if p is None else p.key()


def count_call() -> None:
    """One of the current unit's calls was made (served from the cache or not)."""
    p = _CURRENT.get()
    if p is not None and p.remaining > 1:
        p.remaining -= 1


class PrioritySlots:
    """A counting semaphore whose waiters are served lowest key first (FIFO among equals).

    Used as ``with slots:`` (the key comes from :func:`current_key`) or through
    :meth:`acquire`/:meth:`release`. A released slot is handed to the best waiter directly,
    so a newcomer never overtakes a waiter."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError("PrioritySlots needs at least one slot")
        self.size = int(n)
        self._free = int(n)
        self._lock = threading.Lock()
        self._heap: list[tuple[tuple[int, int], int, threading.Event]] = []
        self._order = itertools.count()
        self.in_use_peak = 0
        self._busy = 0.0  # slot-seconds held so far (integral of slots in use over time)
        self._since = time.perf_counter()

    def acquire(self, key: tuple[int, int] | None = None) -> None:
        key = current_key() if key is None else key
        with self._lock:
            if self._free > 0 and not self._heap:
                self._tick()
                self._free -= 1
                self.in_use_peak = max(self.in_use_peak, self.size - self._free)
                return
            entry = (key, next(self._order), threading.Event())
            heapq.heappush(self._heap, entry)
        try:
            entry[2].wait()
        except BaseException:  # interrupted while waiting (the main thread, Ctrl-C)
            with self._lock:
                if entry in self._heap:
                    self._heap.remove(entry)
                    heapq.heapify(self._heap)
                    raise
            self.release()  # the slot was handed over meanwhile: give it back
            raise

    def release(self) -> None:
        with self._lock:
            if self._heap:
                heapq.heappop(self._heap)[2].set()  # the slot passes to the best waiter
            else:
                if self._free >= self.size:
                    raise ValueError("PrioritySlots released more often than acquired")
                self._tick()
                self._free += 1

    def waiting(self) -> int:
        with self._lock:
            return len(self._heap)

    def busy_seconds(self) -> float:
        """Slot-seconds the slots were held since construction (for utilisation figures)."""
        with self._lock:
            self._tick()
            return self._busy

    def _tick(self) -> None:  # caller holds _lock
        now = time.perf_counter()
        self._busy += (self.size - self._free) * (now - self._since)
        self._since = now

    def __enter__(self) -> "PrioritySlots":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
