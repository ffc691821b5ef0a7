"""The figures rule over a judge's verdict (``judge.figures``, issue 30 item 3).

A small judge calls "5 PM" correct for a gold of "5:30 PM" even when its prompt says a less
precise answer is incomplete (benchmarks/README.md, issue 30). This rule holds the verdict to
the gold's figures without a model call: a "correct" verdict becomes "incomplete" when a figure
of the gold answer — a number, a time, a year, a figure with a scale word — that the question
does not already give is missing from the answer at the gold's precision. "incorrect" and
"incomplete" verdicts pass unchanged, and an answer that states the gold figure and more
detail stays correct. The rule holds for short golds only (at most :data:`MAX_GOLD_WORDS`
words: a figure, a date, a name with a number — the answers whose precision is the point); a
long gold (a summary) may carry figures a right answer need not repeat, and there the judge
model weighs what is key.

Figures are compared as values after number words are turned into digits (``text2num``'s
``alpha2digit``: "two million" = 2000000, "twenty-five" = 25), thousands separators dropped
("1,000" = 1000), a scale word applied ("2.5 million" = 2500000) and times read as hours and
minutes on a 12-hour clock ("5:30 PM" = "17:30" = "5:30": the rule only ever lowers a verdict,
so it leaves AM against PM to the judge), ISO dates read as year, month and day, and month
names as their number ("1994-03-05" = "5 March 1994"; "2020" does not give "March 2020"). A
figure that is part of a longer one counts as missing ("5" does not give "5:30"; "1990" in
"the 1990s" does not give "1994").
"""

from __future__ import annotations

import re

from text_to_num import alpha2digit

_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2})(?:\s*(?:a\.?m\.?|p\.?m\.?))?(?![\w:])"
                   r"| (\d{2})\s*(?:a\.?m\.?|p\.?m\.?)(?!\w))", re.I)  # 5:30, 5:30 PM, "5 30 pm"
_HOUR = re.compile(r"\b(\d{1,2})\s*(a\.?m\.?|p\.?m\.?)(?!\w)", re.I)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_MONTH = re.compile(r"\b(" + "|".join(m for m in _MONTHS if m != "May") + r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\b\.?"
                    r"|\bMay\b(?=\s*\d)|(?<=\d\s)May\b|(?<=of\s)May\b")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_LIST_MARK = re.compile(r"(?:^|(?<=[\n;]))\s*\(?\d{1,2}[.)]\s")  # "1. Surgery; 2) Radiation": numbering, not figures
_SCALED = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s*(thousand|million|billion|trillion)\b", re.I)
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?")


def _clock(hour: int, minute: int) -> str:
    return f"t{hour % 12:02d}:{minute:02d}"


def _month(name: str) -> str:
    key = name[:3].lower()
    return str(1 + [m[:3].lower() for m in _MONTHS].index(key))


def figures(text: str) -> set[str]:
    """The figures of ``text`` as normalised strings: times as ``tHH:MM``, numbers as their
    value (``2500000``, ``3.14``)."""
    text = _LIST_MARK.sub(" ", text or "")
    text = _SCALED.sub(lambda m: f"{float(m.group(1).replace(',', '')) * _SCALE[m.group(2).lower()]:.0f}", text)
    try:
        text = alpha2digit(text, "en")
    except Exception:  # noqa: BLE001 — a text the parser cannot read keeps its digits as written
        text = text or ""
    out: set[str] = set()
    for m in _TIME.finditer(text):
        out.add(_clock(int(m.group(1)), int(m.group(2) or m.group(3))))
    text = _TIME.sub(" ", text)
    for m in _HOUR.finditer(text):
        out.add(_clock(int(m.group(1)), 0))
    text = _HOUR.sub(" ", text)
    text = _ISO_DATE.sub(lambda m: f" {m.group(1)} {int(m.group(2))} {int(m.group(3))} ", text)
    for m in _MONTH.finditer(text):
        out.add(_month(m.group(0).rstrip(".")))
    text = _MONTH.sub(" ", text)
    for m in _NUMBER.finditer(text):
        whole, frac = m.group(1).replace(",", ""), m.group(2)
        value = float(f"{whole}.{frac}" if frac else whole)
        out.add(f"{value:.10g}" if value < 1e15 else whole)
    return out


MAX_GOLD_WORDS = 15
"""Golds longer than this are left to the judge model (see the module docstring)."""


def missing_figures(question: str, gold: str, answer: str) -> set[str]:
    """The gold's figures (those the question does not give) that the answer does not state."""
    return (figures(gold) - figures(question)) - figures(answer)


def apply_figures(label: str, question: str, gold: str, answer: str) -> str:
    """The verdict under the figures rule: "correct" becomes "incomplete" when a gold figure is
    missing from the answer (a gold of at most :data:`MAX_GOLD_WORDS` words); every other label
    passes unchanged."""
    if label != "correct" or len((gold or "").split()) > MAX_GOLD_WORDS or not missing_figures(question, gold, answer):
        return label
    return "incomplete"
