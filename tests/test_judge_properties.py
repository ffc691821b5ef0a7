"""The figures rule against renderings it was not written from: a quantity drawn by hypothesis
(value, unit, scale, currency, date, time) is rendered by library formatters — babel's number,
currency, percent, date and time formats in US and British English, pint's conversions and unit
names, num2words' written-out numbers (benchmarks/figure_forms.py) — and every equivalent
rendering must keep a "correct" verdict, every rendering with one figure or unit changed must
lower it. The benchmark draws thousands (benchmarks/bench_figures.py --properties N)."""

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.figure_forms import KINDS, draw
from ragrouter.evaluation.precision import judge_figures


def _check(pair):
    for answer in pair.same:
        out = judge_figures("correct", pair.question, pair.gold, answer)
        assert out.label == "correct", (pair.kind, pair.gold, answer, sorted(out.missing))
    for answer in pair.differs:
        out = judge_figures("correct", pair.question, pair.gold, answer)
        assert out.label == "incomplete", (pair.kind, pair.gold, answer, out.review)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_equivalent_renderings_state_the_gold_and_changed_ones_do_not(rnd):
    _check(draw(rnd))


def test_every_kind_of_rendering_is_drawn():
    """Each generator (quantity, money, written number, percent, date, time) runs at least once."""
    for make in dict.fromkeys(KINDS):
        _check(make(random.Random(3)))
