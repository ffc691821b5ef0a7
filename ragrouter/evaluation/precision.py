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

How a figure is read is :mod:`ragrouter.evaluation.figures_read`. When an answer states a gold
figure (:func:`states`):

- numbers are compared as values in one base unit per dimension ("0.5 g" = "500 mg", "14 days" =
  "2 weeks", "45 cents" = "$0.45", "two fifths" = "40 %"), at the gold's precision: a more precise
  answer states the gold when it rounds to it ("3.142" for "3.14"); a coarser one only when it is
  a rounding of the gold within 0.5 % and is not hedged ("$82.96 billion" for "$82,959 million"
  states it; "about 1,200" for "1,204", "3.1" for "3.14" do not). Units of one dimension must
  agree ("12 miles" is not "12 km"), and so must two named currencies; a figure with a unit on one
  side only is compared as written ("5" states "5 mg").
- times on a 12-hour dial; am/pm must agree only when both sides say it ("5:30" states "5:30 PM",
  "8:15 PM" does not state "8:15 AM").
- dates by year, month and day: every reading of the answer's date must be one of the gold's, so a
  numeric date that can be read day-first and month-first ("03/05/1994") does not state a gold that
  says which ("5 March 1994"), but states a gold written the same ambiguous way; a missing year
  is taken from a year the answer or the question states.
- decades and centuries as spans of years ("1994" states "the 1990s"; "the 1990s" does not state
  "1994"); numbers inside names as text ("Python 3.1" does not state "Python 3.10").
"""

from __future__ import annotations

from ragrouter.evaluation.figures_read import Clock, Date, Name, Num, Quarter, Span, read

MAX_GOLD_WORDS = 15
"""Golds longer than this are left to the judge model (see the module docstring)."""

ROUNDING = 0.005
"""How far (relative) a coarser, unhedged answer may lie from the gold and still state it."""


def _close(gv: float, gp: float, av: float, ap: float, hedged: bool) -> bool:
    tol = 1e-9 * max(1.0, abs(gv))
    diff = abs(gv - av)
    if diff <= tol:
        return True
    if ap <= gp + tol:  # as precise as the gold or more: it must round to the gold
        return diff <= gp / 2 + tol
    return not hedged and diff <= ap / 2 + tol and diff <= ROUNDING * abs(gv)


def _as_written(n: Num) -> tuple[float, float]:
    if n.raw is None or not n.value:
        return n.value, n.prec
    return n.raw, n.prec * abs(n.raw / n.value)


def _num_states(g: Num, a: Num) -> bool:
    if g.dim and a.dim:
        if g.dim != a.dim or (g.currency and a.currency and g.currency != a.currency):
            return False
        return _close(g.value, g.prec, a.value, a.prec, a.hedged)
    gv, gp = _as_written(g) if g.dim else (g.value, g.prec)
    av, ap = _as_written(a) if a.dim else (a.value, a.prec)
    return _close(gv, gp, av, ap, a.hedged)


def _year_of(r) -> int | None:
    if isinstance(r, Num) and r.dim is None and r.value == int(r.value) and 1000 <= r.value <= 2999:
        return int(r.value)
    return None


def _date_matches(r: tuple, g: tuple, years: set[int]) -> bool:
    (ry, rm, rd), (gy, gm, gd) = r, g
    if rm != gm or (gd is not None and rd != gd):
        return False
    return gy is None or ry == gy or (ry is None and gy in years)


def _reading_states(g, a, years: set[int]) -> bool:
    if isinstance(g, Num):
        if isinstance(a, Num):
            return _num_states(g, a)
        if isinstance(a, Name):  # "Room 12" states "12"
            number = a.text.rsplit(" ", 1)[1]
            return g.dim is None and number.replace(".", "", 1).isdigit() and float(number) == g.value
        if isinstance(a, Date) and (y := _year_of(g)) is not None:
            return all(r[0] == y for r in a.readings)
        if isinstance(a, Quarter):
            return a.year is not None and _year_of(g) == a.year
        return False
    if isinstance(g, Clock):
        return (isinstance(a, Clock) and a.minute == g.minute and (g.half is None or a.half is None or a.half == g.half)
                and (g.second is None or a.second == g.second))
    if isinstance(g, Date):
        return isinstance(a, Date) and all(any(_date_matches(r, gr, years) for gr in g.readings) for r in a.readings)
    if isinstance(g, Span):
        if isinstance(a, Span):
            return g.first <= a.first and a.last <= g.last
        if (y := _year_of(a)) is not None:
            return g.first <= y <= g.last
        return isinstance(a, Date) and all(r[0] is not None and g.first <= r[0] <= g.last for r in a.readings)
    if isinstance(g, Quarter):
        return isinstance(a, Quarter) and a.quarter == g.quarter and (
            g.year is None or a.year == g.year or (a.year is None and g.year in years))
    if isinstance(g, Name):
        return isinstance(a, Name) and a.text == g.text
    return False


def _years(figs: list[tuple]) -> set[int]:
    out: set[int] = set()
    for fig in figs:
        for r in fig:
            if (y := _year_of(r)) is not None:
                out.add(y)
            elif isinstance(r, Date):
                out |= {d[0] for d in r.readings if d[0] is not None}
    return out


def states(answer_figures: list[tuple], gold_figure: tuple, years: set[int] = frozenset()) -> bool:
    """Whether one of the answer's figures states the gold figure (any reading of either)."""
    return any(_reading_states(g, a, set(years)) for g in gold_figure for fig in answer_figures for a in fig)


def label(fig: tuple) -> str:
    """A figure as a short string ("t05:30pm", "d1994-03-05", "2500000", "0.25 ratio"), readings joined by " / "."""
    def one(r) -> str:
        if isinstance(r, Num):
            return f"{r.value:.10g}" + (f" {r.dim}" if r.dim else "") + (f" {r.currency}" if r.currency else "")
        if isinstance(r, Clock):
            return f"t{r.minute // 60:02d}:{r.minute % 60:02d}" + (f":{r.second:02d}" if r.second is not None else "") \
                + (r.half or "")
        if isinstance(r, Date):
            return "d" + "|".join(sorted(f"{y or '?'}-{m:02d}-{d or 0:02d}" for y, m, d in r.readings))
        if isinstance(r, Span):
            return f"y{r.first}-{r.last}"
        if isinstance(r, Quarter):
            return f"Q{r.quarter}" + (f" {r.year}" if r.year else "")
        return f"n:{r.text}"
    return " / ".join(one(r) for r in fig)


def figures(text: str) -> set[str]:
    """The figures of ``text`` as short strings (:func:`label`)."""
    return {label(f) for f in read(text)}


def missing_figures(question: str, gold: str, answer: str) -> set[str]:
    """The gold's figures (those the question does not give) that the answer does not state."""
    q, g, a = read(question), read(gold), read(answer)
    q_years, a_years = _years(q), _years(a) | _years(q)
    return {label(f) for f in g if not states(q, f, q_years) and not states(a, f, a_years)}


def apply_figures(label_: str, question: str, gold: str, answer: str) -> str:
    """The verdict under the figures rule: "correct" becomes "incomplete" when a gold figure is
    missing from the answer (a gold of at most :data:`MAX_GOLD_WORDS` words); every other label
    passes unchanged."""
    if label_ != "correct" or len((gold or "").split()) > MAX_GOLD_WORDS or not missing_figures(question, gold, answer):
        return label_
    return "incomplete"
