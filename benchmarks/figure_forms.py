"""Equivalent and different renderings of one quantity, made by library formatters (babel,
pint, num2words), for the figures rule's property test (tests/test_judge_properties.py) and its
benchmark (benchmarks/bench_figures.py --properties N).

:func:`draw` takes a ``random.Random`` and returns a :class:`Pair` set: a gold rendering, several
renderings of the same figure (the rule must keep a "correct" verdict) and renderings with one
figure or one unit changed (the rule must lower it). The renderings come from the libraries, not
from the rule's reader, so they do not share its blind spots: babel's number, currency, percent,
date and time formats in US and British English, pint's unit conversions and its short and long
unit names, num2words' written-out numbers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from decimal import Decimal

import babel.dates as bd
import babel.numbers as bn
from num2words import num2words

from ragrouter.evaluation.units import registry


@dataclasses.dataclass
class Pair:
    kind: str
    question: str
    gold: str
    same: list[str]
    differs: list[str]


LOCALES = ("en_US", "en_GB")
# (family, unit, other units of the same dimension pint converts to; exact decimal factors)
UNITS = (
    ("dose", "milligram", ("microgram", "gram")),
    ("dose", "microgram", ("milligram",)),
    ("dose rate", "milligram / kilogram", ("microgram / kilogram", "gram / kilogram")),
    ("infusion", "milliliter / hour", ("liter / hour", "milliliter / minute")),
    ("speed", "knot", ("kilometer / hour", "meter / second")),
    ("speed", "mile / hour", ("kilometer / hour",)),
    ("altitude", "foot", ("meter",)),
    ("distance", "kilometer", ("meter", "mile")),
    ("distance", "nautical_mile", ("kilometer", "meter")),
    ("mass", "kilogram", ("pound", "gram", "metric_ton")),
    ("pressure", "hectopascal", ("pascal", "kilopascal")),
    ("duration", "hour", ("minute",)),
    ("rate", "percent", ("basis_point", "percentage_point")),
)
# a unit of the same number but another value or dimension
WRONG_UNIT = {"milligram": "gram", "microgram": "milligram", "milligram / kilogram": "milligram",
              "milliliter / hour": "milliliter / minute", "knot": "mile / hour", "mile / hour": "knot",
              "foot": "meter", "kilometer": "mile", "nautical_mile": "kilometer", "kilogram": "pound",
              "hectopascal": "kilopascal", "hour": "day", "percent": "basis_point"}
WORDS = {"basis_point": ("bp", "basis points", "bps"), "percentage_point": ("percentage points", "pp"),
         "percent": ("%", "percent", "per cent"), "nautical_mile": ("NM", "nautical miles"),
         "knot": ("knots", "kt"), "metric_ton": ("tonnes", "t")}


def _dec(x: float | Decimal, places: int = 12) -> Decimal:
    return Decimal(str(round(float(x), places))).normalize()


def _plain(d: Decimal, locale: str = "en_US") -> str:
    """A decimal written out with its digits kept (babel's grouping, no rounding)."""
    digits = max(0, -d.as_tuple().exponent)
    return bn.format_decimal(d, format="#,##0" + ("." + "0" * digits if digits else ""), locale=locale)


def _unit_names(unit: str) -> list[str]:
    ureg = registry()
    u = ureg.Unit(unit)
    names = [f"{u:~P}", f"{u:P}".replace("/", " per ")]
    for part in unit.split(" / "):
        if part.strip() in WORDS and " / " not in unit:
            names = list(WORDS[part.strip()]) + names[1:]
    return [n.replace("·", " ") for n in names if n]


def _quantity(rnd: random.Random) -> Pair:
    family, unit, others = rnd.choice(UNITS)
    places = rnd.choice((0, 0, 1, 2))
    value = Decimal(rnd.randint(1, 9999)).scaleb(-places)
    ureg = registry()
    gold = f"{_plain(value)} {rnd.choice(_unit_names(unit))}"
    same = [f"{_plain(value, loc)} {name}" for loc in LOCALES for name in _unit_names(unit)]
    for other in others:
        conv = _dec(ureg.Quantity(float(value), unit).to(other).magnitude)
        same += [f"{_plain(conv)} {name}" for name in _unit_names(other)]
    changed = value + Decimal(1).scaleb(-places) * rnd.choice((1, 2, 5, -1)) if value > 1 else value * 2
    differs = [f"{_plain(changed)} {name}" for name in _unit_names(unit)]
    wrong = WRONG_UNIT[unit]
    try:  # the same number in another unit of the dimension must lie outside the gold's rounding
        apart = abs(ureg.Quantity(float(value), wrong).to(unit).magnitude - float(value)) > float(Decimal(1).scaleb(-places))
    except Exception:  # noqa: BLE001 — pint's DimensionalityError: another dimension always differs
        apart = True
    if apart:
        differs += [f"{_plain(value)} {name}" for name in _unit_names(wrong)]  # the same number in another unit
    return Pair(f"quantity ({family})", f"What was the {family}?", gold, same, differs)


def _money(rnd: random.Random) -> Pair:
    currency = rnd.choice(("USD", "EUR", "GBP"))
    scale, word = rnd.choice(((Decimal(1), ""), (Decimal(10) ** 3, "thousand"), (Decimal(10) ** 6, "million"),
                              (Decimal(10) ** 9, "billion")))
    places = rnd.choice((0, 1, 2))
    m = Decimal(rnd.randint(1, 99999)).scaleb(-places)
    value = m * scale
    loc = rnd.choice(LOCALES)
    fmt = lambda v, c=currency, loc=loc: bn.format_currency(v, c, format="¤#,##0.######", locale=loc)  # noqa: E731
    gold = f"{fmt(m)} {word}".strip()
    names = {"USD": "US dollars", "EUR": "euros", "GBP": "pounds sterling"}
    same = [fmt(value), f"{_plain(value)} {currency}", bn.format_currency(value, currency, format="#,##0.###### ¤¤",
                                                                          locale=loc)]
    if word:
        smaller = {"thousand": None, "million": "thousand", "billion": "million"}[word]
        if smaller:
            same.append(f"{fmt(m * 1000)} {smaller}")
        same.append(f"{_plain(m)} {word} {names[currency]}")
    other = {"USD": "EUR", "EUR": "GBP", "GBP": "USD"}[currency]
    differs = [f"{fmt(m * 10)} {word}".strip(), f"{bn.format_currency(m, other, format='¤#,##0.######', locale=loc)} {word}".strip()]
    return Pair("money", "How much was it?", gold, same, differs)


def _written_number(rnd: random.Random) -> Pair:
    n = rnd.randint(3, 999_999)  # text2num leaves "one" and "two" as words (its threshold): a documented limit
    gold = bn.format_decimal(n, locale="en_US")
    same = [num2words(n), str(n), bn.format_decimal(n, locale="en_GB")]
    differs = [num2words(n + rnd.choice((1, 10, 100))), bn.format_decimal(n * 10, locale="en_US")]
    return Pair("written number", "How many were there?", gold, same, differs)


def _percent(rnd: random.Random) -> Pair:
    tenths = rnd.randint(1, 999)
    ratio = Decimal(tenths) / 1000
    gold = bn.format_percent(ratio, "#,##0.0%", locale="en_US")
    bp = Decimal(tenths) * 10
    same = [f"{_plain(ratio * 100)} percent", f"{bp} basis points", f"{_plain(ratio * 100)} percentage points"]
    differs = [bn.format_percent(ratio + Decimal("0.001"), "#,##0.0%", locale="en_US"),
               f"{_plain(ratio * 100)} basis points"]
    return Pair("percent", "What was the rate?", gold, same, differs)


def _date(rnd: random.Random) -> Pair:
    d = dt.date(1900, 1, 1) + dt.timedelta(days=rnd.randint(0, 73000))
    gold = bd.format_date(d, "d MMMM y", locale="en_GB")
    same = [bd.format_date(d, f, locale=loc) for f in ("full", "long", "medium") for loc in LOCALES] + [d.isoformat()]
    if d.day > 12:  # a numeric date that reads one way only
        same.append(bd.format_date(d, "dd/MM/y", locale="en_GB"))
    nxt = d + dt.timedelta(days=rnd.choice((1, 31, 366)))
    differs = [bd.format_date(nxt, "long", locale=loc) for loc in LOCALES]
    return Pair("date", "When was it?", gold, same, differs)


def _time(rnd: random.Random) -> Pair:
    t = dt.time(rnd.randint(0, 23), rnd.randint(0, 59))
    gold = bd.format_time(t, "HH:mm", locale="en_GB") + " UTC"
    same = [bd.format_time(t, "HHmm", locale="en_GB") + "Z", bd.format_time(t, "h:mm a", locale="en_US") + " UTC",
            bd.format_time(t, "HH:mm", locale="en_GB") + " GMT"]
    m = (t.hour * 60 + t.minute + rnd.choice((1, 10, 60))) % 1440
    other = dt.time(m // 60, m % 60)
    differs = [bd.format_time(other, "HH:mm", locale="en_GB") + " UTC", bd.format_time(other, "HHmm") + "Z"]
    return Pair("time", "At what time?", gold, same, differs)


KINDS = (_quantity, _quantity, _money, _written_number, _percent, _date, _time)


def draw(rnd: random.Random) -> Pair:
    """One gold figure with its equivalent and its changed renderings."""
    return rnd.choice(KINDS)(rnd)
