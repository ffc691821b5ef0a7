"""The figures rule over a judge's verdict (``judge.figures``).

A small judge calls "5 PM" correct for a gold of "5:30 PM" even when its prompt says a less
precise answer is incomplete (benchmarks/README.md, "Judge calibration"). This rule holds the
verdict to the gold's figures without a model call: a "correct" verdict becomes "incomplete" when a
figure of the gold answer that the question does not already give is not stated by the answer.
"incorrect" and "incomplete" verdicts pass unchanged, and an answer that states the gold figure
and more detail stays correct. The rule holds for short golds only (at most
:data:`MAX_GOLD_WORDS` words: a figure, a date, a name with a number — the answers whose precision
is the point); a long gold (a summary) may carry figures a right answer need not repeat, and there
the judge model weighs what is key.

**It abstains when unsure**: where a figure cannot be compared with confidence — a unit that
looks like one but no library reads ("20 gtt/min"), a numeric date that reads day-first and
month-first against a gold that says which, two different time zones without a fixed offset,
a fiscal quarter against one that does not say — and no gold figure is plainly missing, the
verdict is left as it is and :func:`judge_figures` says why (``Outcome.review``): the judge
stage stores that reason so that a person reviews the run.

How a figure is read is :mod:`ragrouter.evaluation.figures_read` (pint for units, dateparser for
dates and times, text2num for number words). When an answer states a gold figure:

- numbers are compared as values in base units ("0.05 mg" = "50 µg", "145 kt" = "268.5 km/h",
  "25 bp" = "0.25 percentage points", "FL350" = "35,000 ft", "$1.2 billion" = "1,200 million",
  "(4,512) in thousands" = "-$4.5 million"), at the gold's precision: a more precise answer states
  the gold when it rounds to it ("3.142" for "3.14"); a coarser one only when it is a rounding of
  the gold within 0.5 % and is not hedged ("$82.96 billion" for "$82,959 million" states it; "about
  1,200" for "1,204" does not) — a hedge is allowed on a conversion to another unit ("about 366 m"
  for "1,200 ft"), which must round. Dimensions must agree ("145 mph" is not "145 knots", "50 mg" is
  not "50 mg/kg", "5.8 mg/dL" is not "5.8 mmol/L"), and so must two named currencies; a figure with
  a unit on one side only is compared as written ("5" states "5 mg"). A gold written negative
  ("(2,310)") needs an answer that is negative or says a loss or a fall in words.
- clock times on a 12-hour dial; am/pm must agree only when both sides say it; zones with a known
  offset are compared as instants ("14:30 UTC" = "9:30 am EST"), "1430Z" = "14:30 UTC" = "2:30 pm
  UTC".
- dates by year, month and day; a missing year is taken from a year the answer or the question
  states. Quarters by number and year; fiscal against calendar is left to a person.
- decades and centuries as spans of years ("1994" states "the 1990s"; "the 1990s" does not state
  "1994"); numbers inside names as text ("Python 3.1" does not state "Python 3.10").
"""

from __future__ import annotations

import dataclasses
import math

from ragrouter.evaluation import units
from ragrouter.evaluation.figure_types import Clock, Date, Name, Num, Quarter, Span
from ragrouter.evaluation.figures_read import negative_cue, read

MAX_GOLD_WORDS = 15
"""Golds longer than this are left to the judge model (see the module docstring)."""

ROUNDING = 0.005
"""How far (relative) a coarser, unhedged answer may lie from the gold and still state it."""

CONVERTED_DIGITS = 2
"""Significant digits a figure converted to another unit or scale must keep to state the gold."""

UNSURE = None
"""A comparison that cannot be decided with confidence (the rule abstains)."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The figures rule's result: the label after it, the gold figures the answer lacks, and why it
    left the verdict to a person (None when it did not abstain)."""

    label: str
    missing: frozenset = frozenset()
    review: str | None = None


@dataclasses.dataclass(frozen=True)
class _Ctx:
    years: frozenset        # years the answer or the question states (a date without its year)
    answer_negative: bool   # the answer says a loss or a fall in words
    gold_negative: bool     # the gold or the question does


def _close(gv: float, gp: float, av: float, ap: float, hedged: bool, ref: float | None = None,
           converted: bool = False) -> bool:
    """``ref``: what the relative :data:`ROUNDING` is a share of (the value itself, or for a
    temperature the number as written: 0.5 % of 311 K is not a rounding of 38.5 °C).
    ``converted``: the answer wrote the figure in another unit or at another scale, where a
    figure is rounded, and said so or not ("about 366 m" for "1,200 ft", "$18.5 million" for
    "18,450" thousand): it states the gold when it rounds to the gold at its own precision and
    keeps :data:`CONVERTED_DIGITS` significant digits."""
    ref = abs(gv) if ref is None else abs(ref)
    tol = 1e-9 * max(abs(gv), gp)  # relative: base units make tiny magnitudes (50 µg is 5e-8 kg)
    diff = abs(gv - av)
    if diff <= tol:
        return True
    if ap <= gp + tol:  # as precise as the gold or more: it must round to the gold
        return diff <= gp / 2 + tol
    if converted:  # ``ap`` may count trailing zeros as rounding ("9,450 m" for "31,000 ft")
        return diff <= ap / 2 + tol and abs(av) >= 10 ** (CONVERTED_DIGITS - 1) * ap - tol
    return not hedged and diff <= ap / 2 + tol and diff <= ROUNDING * ref


def _digit_step(n: Num) -> float:
    """The value of the last of :data:`CONVERTED_DIGITS` significant digits of ``n`` as written,
    in base units (for "1,200 lb": 100 lb)."""
    raw = n.raw if n.raw else n.value
    if not raw or not n.value:
        return 0.0
    step = 10 ** (math.floor(math.log10(abs(raw))) - (CONVERTED_DIGITS - 1))
    return step * abs(n.value / raw)


def _as_written(n: Num) -> tuple[float, float]:
    if n.raw is None or not n.value:
        return n.value, n.prec
    return n.raw, n.prec * abs(n.raw / n.value)


def _sign_agrees(g: Num, a: Num, ctx: _Ctx) -> bool:
    if g.negative and not a.negative and not ctx.answer_negative:
        return False
    return not (a.negative and not g.negative and not ctx.gold_negative)


def _num_states(g: Num, a: Num, ctx: _Ctx):
    if not _sign_agrees(g, a, ctx):
        return False
    # a conversion: another unit of the dimension, or money or a count at another scale ("18,450" thousand)
    converted = bool(g.unit and a.unit and abs(units.factor(g.unit) - units.factor(a.unit))
                     > 1e-9 * units.factor(g.unit)) or (
        g.scale != a.scale and {g.dim, a.dim} <= {None, "money"})
    if g.dim and a.dim:
        if g.dim != a.dim or (g.currency and a.currency and g.currency != a.currency):
            return False
        ref = g.raw if g.dim == "temperature" and g.raw is not None else None
        if not converted:
            return _close(g.value, g.prec, a.value, a.prec, a.hedged, ref)
        # another unit: the answer's digits as written first, then its trailing zeros as rounding
        # ("9,450 m" for "31,000 ft"); the gold's trailing zeros count as rounding down to
        # CONVERTED_DIGITS significant digits ("about 545 kg" states "1,200 lb", not "1,290 lb")
        gp = max(g.prec, min(g.loose, _digit_step(g)))
        return any(_close(g.value, gp, a.value, ap, a.hedged, ref, True) for ap in (a.prec, max(a.prec, a.loose)))
    gv, gp = _as_written(g) if g.dim else (g.value, g.prec)
    av, ap = _as_written(a) if a.dim else (a.value, a.prec)
    if _close(gv, gp, av, ap, a.hedged, converted=converted):
        return True
    return UNSURE if (g.unread or a.unread) else False


def _year_of(r) -> int | None:
    if isinstance(r, Num) and r.dim is None and r.value == int(r.value) and 1000 <= r.value <= 2999:
        return int(r.value)
    return None


def _date_matches(r: tuple, g: tuple, years) -> bool:
    (ry, rm, rd), (gy, gm, gd) = r, g
    if rm != gm or (gd is not None and rd != gd):
        return False
    return gy is None or ry == gy or (ry is None and gy in years)


def _utc_minute(c: Clock) -> int | None:
    if c.offset is None or c.half is None:
        return None
    return ((c.minute + (720 if c.half == "pm" else 0)) - c.offset) % 1440


def _clock_states(g: Clock, a: Clock):
    if g.second is not None and a.second != g.second:
        return False
    if g.zone and a.zone and g.zone != a.zone:
        gu, au = _utc_minute(g), _utc_minute(a)
        if gu is not None and au is not None:
            return gu == au
        return UNSURE  # "Eastern" against "UTC": no fixed offset to compare by
    return a.minute == g.minute and (g.half is None or a.half is None or a.half == g.half)


def _dates_state(g: Date, a: Date, years):
    hits = [any(_date_matches(r, gr, years) for gr in g.readings) for r in a.readings]
    if all(hits):
        return True
    return UNSURE if any(hits) else False  # "03/05/1994" for "5 March 1994": either reading


def _reading_states(g, a, ctx: _Ctx):
    """True when the answer's reading ``a`` states the gold's reading ``g``, False when not,
    :data:`UNSURE` when it cannot be told."""
    if isinstance(g, Num):
        if isinstance(a, Num):
            return _num_states(g, a, ctx)
        if isinstance(a, Name):  # "Room 12" states "12"
            number = a.text.rsplit(" ", 1)[1]
            return g.dim is None and number.replace(".", "", 1).isdigit() and float(number) == g.value
        if isinstance(a, Date) and (y := _year_of(g)) is not None:
            return all(r[0] == y for r in a.readings)
        if isinstance(a, Quarter):
            return a.year is not None and _year_of(g) == a.year
        return False
    if isinstance(g, Clock):
        return isinstance(a, Clock) and _clock_states(g, a)
    if isinstance(g, Date):
        return isinstance(a, Date) and _dates_state(g, a, ctx.years)
    if isinstance(g, Span):
        if isinstance(a, Span):
            return g.first <= a.first and a.last <= g.last
        if (y := _year_of(a)) is not None:
            return g.first <= y <= g.last
        return isinstance(a, Date) and all(r[0] is not None and g.first <= r[0] <= g.last for r in a.readings)
    if isinstance(g, Quarter):
        if not isinstance(a, Quarter) or a.quarter != g.quarter:
            return False
        if not (g.year is None or a.year == g.year or (a.year is None and g.year in ctx.years)):
            return False
        return True if g.fiscal == a.fiscal else UNSURE  # fiscal against a quarter that does not say
    if isinstance(g, Name):
        return isinstance(a, Name) and a.text == g.text
    return False


def _best(values):
    """True if any is True, else UNSURE if any is, else False."""
    values = list(values)
    if any(v is True for v in values):
        return True
    return UNSURE if any(v is UNSURE for v in values) else False


def _years(figs: list[tuple]) -> set[int]:
    out: set[int] = set()
    for fig in figs:
        for r in fig:
            if (y := _year_of(r)) is not None:
                out.add(y)
            elif isinstance(r, Date):
                out |= {d[0] for d in r.readings if d[0] is not None}
    return out


def _state(answer_figures: list[tuple], gold_figure: tuple, ctx: _Ctx):
    return _best(_reading_states(g, a, ctx) for g in gold_figure for fig in answer_figures for a in fig)


def states(answer_figures: list[tuple], gold_figure: tuple, years=frozenset()) -> bool:
    """Whether one of the answer's figures states the gold figure (any reading of either)."""
    return _state(answer_figures, gold_figure, _Ctx(frozenset(years), True, True)) is True


def label(fig: tuple) -> str:
    """A figure as a short string ("t05:30pm", "d1994-03-05", "2500000", "0.25 ratio"), readings joined by " / "."""
    def one(r) -> str:
        if isinstance(r, Num):
            return ("-" if r.negative else "") + f"{r.value:.10g}" + (f" {r.dim}" if r.dim else "") \
                + (f" {r.currency}" if r.currency else "")
        if isinstance(r, Clock):
            return f"t{r.minute // 60:02d}:{r.minute % 60:02d}" + (f":{r.second:02d}" if r.second is not None else "") \
                + (r.half or "") + (f" {r.zone}" if r.zone else "")
        if isinstance(r, Date):
            return "d" + "|".join(sorted(f"{y or '?'}-{m:02d}-{d or 0:02d}" for y, m, d in r.readings))
        if isinstance(r, Span):
            return f"y{r.first}-{r.last}"
        if isinstance(r, Quarter):
            return f"Q{r.quarter}" + (f" {r.year}" if r.year else "") + (" fiscal" if r.fiscal else "")
        return f"n:{r.text}"
    return " / ".join(one(r) for r in fig)


def figures(text: str) -> set[str]:
    """The figures of ``text`` as short strings (:func:`label`)."""
    return {label(f) for f in read(text)}


def _compare(question: str, gold: str, answer: str) -> tuple[set[str], set[str]]:
    """(gold figures the answer does not state, gold figures it cannot be told whether it does)."""
    q, g, a = read(question), read(gold, question), read(answer, question)
    q_ctx = _Ctx(frozenset(_years(q)), True, True)
    ctx = _Ctx(frozenset(_years(a) | _years(q)), negative_cue(answer), negative_cue(gold + " " + question))
    missing, unsure = set(), set()
    for fig in g:
        if _state(q, fig, q_ctx) is True:
            continue  # the question gives it
        st = _state(a, fig, ctx)
        if st is False and any(r.unread for r in fig if isinstance(r, Num)):
            st = UNSURE
        if st is False:
            missing.add(label(fig))
        elif st is UNSURE:
            unsure.add(label(fig))
    return missing, unsure


def missing_figures(question: str, gold: str, answer: str) -> set[str]:
    """The gold's figures (those the question does not give) that the answer does not state."""
    return _compare(question, gold, answer)[0]


def judge_figures(label_: str, question: str, gold: str, answer: str) -> Outcome:
    """The figures rule on one verdict: "correct" becomes "incomplete" when a gold figure is
    missing from the answer (a gold of at most :data:`MAX_GOLD_WORDS` words); when none is missing
    but one cannot be compared with confidence the label stays and ``review`` says why."""
    if label_ != "correct" or len((gold or "").split()) > MAX_GOLD_WORDS:
        return Outcome(label_)
    missing, unsure = _compare(question, gold, answer)
    if missing:
        return Outcome("incomplete", frozenset(missing))
    if unsure:
        return Outcome(label_, review="figures rule unsure: " + ", ".join(sorted(unsure)))
    return Outcome(label_)


def apply_figures(label_: str, question: str, gold: str, answer: str) -> str:
    """The verdict under the figures rule: "correct" becomes "incomplete" when a gold figure is
    missing from the answer (a gold of at most :data:`MAX_GOLD_WORDS` words); every other label —
    and a verdict the rule abstains on — passes unchanged."""
    return judge_figures(label_, question, gold, answer).label
