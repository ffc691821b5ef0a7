"""The figures the judge's figures rule compares (:mod:`ragrouter.evaluation.figures_read` reads
them, :mod:`ragrouter.evaluation.when` the dates and times among them): each is one reading of a
figure in a text; a figure is a tuple of its alternative readings."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Num:
    value: float          # in base units of its dimension (money in currency units, ratios as fractions)
    prec: float           # half of it is the rounding the written figure allows
    dim: str | None = None  # pint's dimension key ("[mass]", "[length] / [time]", "ratio", ...) or "money"
    raw: float | None = None  # the number as written (40 for "40 %"), for a comparison without units
    currency: str | None = None
    hedged: bool = False  # "about", "around", "nearly" … before it
    unit: str | None = None  # pint's unit expression as written ("knot"), to tell a conversion
    negative: bool = False  # written negative: "(1,234)", "-5", "−5"
    unread: bool = False  # followed by a word that looks like a unit pint cannot read ("20 gtt/min")
    scale: float = 1.0  # the scale it was written at ("$1.2 billion": 1e9; a table "in thousands": 1e3)
    loose: float = 0.0  # its precision if trailing zeros of a whole number are rounding ("9,450 m": 10 m), base units


@dataclasses.dataclass(frozen=True)
class Clock:
    minute: int           # minutes after 12 o'clock on a 12-hour dial (5:30 → 330)
    half: str | None      # "am", "pm" or None (not said)
    second: int | None = None
    offset: int | None = None  # the zone's offset from UTC in minutes when one is said ("UTC": 0, "EST": -300)
    zone: str | None = None    # the zone as written, lower-case ("utc", "eastern")


@dataclasses.dataclass(frozen=True)
class Date:
    readings: frozenset   # of (year | None, month, day | None)


@dataclasses.dataclass(frozen=True)
class Span:
    first: int
    last: int


@dataclasses.dataclass(frozen=True)
class Quarter:
    quarter: int
    year: int | None
    fiscal: bool | None = None  # True: "Q3 FY2024"; None: not said ("Q3 2024")


@dataclasses.dataclass(frozen=True)
class Name:
    text: str             # "windows 11"
