"""Reading the figures of a short text for the judge's figures rule (:mod:`ragrouter.evaluation.precision`).

:func:`read` turns a text into typed figures, each a tuple of alternative readings (a reading is a
:class:`Num`, :class:`Clock`, :class:`Date`, :class:`Span`, :class:`Quarter` or :class:`Name`):

- times: "5:30 PM", "5.30 pm", "17:30", "half past five", "a quarter to ten in the evening",
  "noon"; a time without am/pm ("5:30") keeps both halves of the day open. "2:01:09" is also read
  as a duration.
- dates in every order: ISO "1994-03-05" (year, month, day), "5 March 1994", "March 5th, 1994",
  "the 5th of March", "March 1994"; a numeric "03/05/1994" is read day-first *and* month-first
  (one :class:`Date` with both readings, so the ambiguity stays explicit), "14/03/2024" only one
  way.
- decades and centuries ("the 1990s", "19th century") as spans of years; "Q3 2021" as a quarter.
- numbers with their precision (decimals times the scale: "$82.96 billion" is 82.96e9 ± 0.005e9),
  scale words ("million", "bn", "k"), currencies ("$", "€", "euros", "cents"), percentages ("25 %",
  "25 per cent" — a ratio of 0.25), fractions ("a third", "two fifths", "a quarter of a gram"),
  units converted to one base per dimension (mg/g/kg, ml/l, mm/cm/m/km, durations, bytes), ranges
  ("2019–2021", "1914-18", "3 to 5 days": both ends), number and ordinal words ("twenty-three",
  "fourth", "a dozen"; text2num's ``alpha2digit``).
- numbers inside names ("Windows 11", "Python 3.10", "COVID-19") as the name, compared as text
  ("3.10" is not "3.1"), never as a date or a year.

Parts of the text are read once: each pass blanks what it read.
"""

from __future__ import annotations

import dataclasses
import re

from text_to_num import alpha2digit


@dataclasses.dataclass(frozen=True)
class Num:
    value: float          # in base units of its dimension (money in currency units, ratios as fractions)
    prec: float           # half of it is the rounding the written figure allows
    dim: str | None = None  # "mass", "length", "volume", "time", "bytes", "ratio", "money", "temp", ...
    raw: float | None = None  # the number as written (40 for "40 %"), for a comparison without units
    currency: str | None = None
    hedged: bool = False  # "about", "around", "nearly" … before it


@dataclasses.dataclass(frozen=True)
class Clock:
    minute: int           # minutes after 12 o'clock on a 12-hour dial (5:30 → 330)
    half: str | None      # "am", "pm" or None (not said)
    second: int | None = None


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


@dataclasses.dataclass(frozen=True)
class Name:
    text: str             # "windows 11"


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MON = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_HEDGE = re.compile(r"(?:about|around|roughly|approximately|approx\.?|nearly|almost|some|circa|c\.|~|close to|just over|"
                    r"just under|over|under|more than|less than|up to|at least|at most)\s*$", re.I)
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "b": 1e9,
          "trillion": 1e12, "tn": 1e12, "t": 1e12}
_CURRENCY = {"$": "usd", "us$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "€": "eur", "eur": "eur",
             "euro": "eur", "euros": "eur", "£": "gbp", "gbp": "gbp", "pound": "gbp", "pounds": "gbp", "¥": "jpy",
             "yen": "jpy", "chf": "chf", "francs": "chf"}
_SUBUNIT = {"cent": 0.01, "cents": 0.01, "pence": 0.01, "p": 0.01}
# unit → (dimension, factor to the dimension's base unit)
_UNITS = {
    "mcg": ("mass", 1e-6), "µg": ("mass", 1e-6), "ug": ("mass", 1e-6), "mg": ("mass", 1e-3), "g": ("mass", 1.0),
    "gram": ("mass", 1.0), "grams": ("mass", 1.0), "kg": ("mass", 1e3), "kilograms": ("mass", 1e3),
    "kilogram": ("mass", 1e3), "milligrams": ("mass", 1e-3), "milligram": ("mass", 1e-3),
    "ml": ("volume", 1e-3), "millilitres": ("volume", 1e-3), "milliliters": ("volume", 1e-3), "l": ("volume", 1.0),
    "litre": ("volume", 1.0), "litres": ("volume", 1.0), "liter": ("volume", 1.0), "liters": ("volume", 1.0),
    "mm": ("length", 1e-3), "cm": ("length", 1e-2), "m": ("length", 1.0), "metre": ("length", 1.0),
    "metres": ("length", 1.0), "meter": ("length", 1.0), "meters": ("length", 1.0), "km": ("length", 1e3),
    "kilometre": ("length", 1e3), "kilometres": ("length", 1e3), "kilometer": ("length", 1e3),
    "kilometers": ("length", 1e3), "mi": ("length", 1609.344), "mile": ("length", 1609.344),
    "miles": ("length", 1609.344),
    "s": ("time", 1.0), "sec": ("time", 1.0), "secs": ("time", 1.0), "seconds": ("time", 1.0),
    "min": ("time", 60.0), "mins": ("time", 60.0), "minute": ("time", 60.0), "minutes": ("time", 60.0),
    "h": ("time", 3600.0), "hr": ("time", 3600.0), "hrs": ("time", 3600.0), "hour": ("time", 3600.0),
    "hours": ("time", 3600.0), "day": ("time", 86400.0), "days": ("time", 86400.0),
    "week": ("time", 604800.0), "weeks": ("time", 604800.0), "month": ("time", 2629746.0),
    "months": ("time", 2629746.0), "year": ("time", 31556952.0), "years": ("time", 31556952.0),
    "kb": ("bytes", 1e3), "mb": ("bytes", 1e6), "gb": ("bytes", 1e9), "tb": ("bytes", 1e12),
    "kilobytes": ("bytes", 1e3), "megabytes": ("bytes", 1e6), "gigabytes": ("bytes", 1e9),
    "terabytes": ("bytes", 1e12),
    "°c": ("temp-c", 1.0), "degrees celsius": ("temp-c", 1.0), "degrees c": ("temp-c", 1.0),
    "°f": ("temp-f", 1.0), "degrees fahrenheit": ("temp-f", 1.0),
    "km/s": ("speed", 1e3), "kilometres per second": ("speed", 1e3), "kilometers per second": ("speed", 1e3),
    "m/s": ("speed", 1.0), "km/h": ("speed", 1 / 3.6), "kph": ("speed", 1 / 3.6), "mph": ("speed", 0.44704),
    "mg/kg": ("dose", 1.0), "mmhg": ("pressure", 1.0),
    "%": ("ratio", 0.01), "percent": ("ratio", 0.01), "per cent": ("ratio", 0.01), "pc": ("ratio", 0.01),
}
_UNIT_RE = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
_FRACTIONS = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fifth": 5, "fifths": 5,
              "sixth": 6, "sixths": 6, "eighth": 8, "eighths": 8, "tenth": 10, "tenths": 10}
_SMALL = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9}
_NAME_STOP = {"at", "in", "on", "by", "from", "about", "around", "nearly", "only", "just", "the", "it", "he", "she",
              "they", "we", "i", "up", "to", "over", "under", "since", "until", "after", "before", "approximately",
              "roughly", "some", "almost", "mid", "early", "late", "pre", "post", "and", "or", "of", "for", "with",
              "less", "more", "than", "was", "is", "are", "were", "q", "ca", "circa", "every", "each", "fy", "no",
              "page", "p", "cost", "costs", "total", "a", "an", "yes", "eps"}
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mon", "tue", "wed",
             "thu", "fri", "sat", "sun"}
NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"


def _blank(text: str, m: re.Match) -> str:
    return text[:m.start()] + " " * (m.end() - m.start()) + text[m.end():]


def _scan(text: str, pattern: re.Pattern, fn) -> tuple[str, list]:
    """Every match of ``pattern`` that ``fn`` reads (``fn`` returns a figure or None) is blanked."""
    out, pos = [], 0
    while (m := pattern.search(text, pos)) is not None:
        fig = fn(m, text)
        if fig is None:
            pos = m.start() + 1
            continue
        out.append(fig)
        text = _blank(text, m)
        pos = m.end()
    return text, out


def _number(s: str) -> tuple[float, float]:
    """Value and precision of a written number ("82.96" → 82.96, 0.01)."""
    s = s.replace(",", "")
    frac = s.split(".")[1] if "." in s else ""
    return float(s), 10.0 ** -len(frac)


def _hedged(text: str, start: int) -> bool:
    return bool(_HEDGE.search(text[max(0, start - 16):start]))


def _year(s: str | None) -> int | None:
    return int(s) if s else None


# --------------------------------------------------------------------------- normalisation

_WORD_FRACTION = re.compile(r"\b(a|an|one|two|three|four|five|six|seven|eight|nine|\d+)[\s-]+(" + "|".join(_FRACTIONS)
                            + r")\b(?!\s+(?:past|to)\b)", re.I)
_AND_A_HALF = re.compile(r"\b([a-z]+|\d+)\s+and\s+a\s+half\b", re.I)
_DOZEN = re.compile(r"\b(a|one|two|three|four|five|six|\d+)\s+dozens?\b", re.I)
_DIGIT_SCALE = re.compile(r"(\d)\s*(thousand|million|billion|trillion)\b", re.I)
_ORD = re.compile(r"(?<![\d\w])(?<!per )(?<!a )(?<!one )(?<!each )(?<!every )(first|second)\b(?!s)", re.I)


def _small(word: str) -> float | None:
    w = word.lower()
    if w.isdigit():
        return float(w)
    if w in _SMALL:
        return float(_SMALL[w])
    conv = alpha2digit(w, "en")
    return float(conv) if conv.isdigit() else None


def normalise(text: str) -> str:
    """Dashes, spaces, fractions and number words made uniform before the figures are read."""
    text = (text or "").replace("\u2013", "-").replace("\u2014", "-").replace("\u2212", "-")
    text = re.sub(r"[\u00a0\u2009\u202f]", " ", text)
    text = _AND_A_HALF.sub(lambda m: f"{_small(m.group(1)) + 0.5:g}" if _small(m.group(1)) is not None else m.group(0),
                           text)

    def frac(m):
        n, d = _small(m.group(1)), _FRACTIONS[m.group(2).lower()]
        if n is None or (m.group(2).lower() in ("half", "third", "quarter", "fifth") and n > 1):
            return m.group(0)
        return f" FRAC{n / d:.6f} "
    text = re.sub(r"\bhalf\b(?!\s+(?:past|an?\s+hour)\b)", lambda m: " FRAC0.500000 ", text) if re.search(
        r"\b(?:less|more) than half\b|^\s*half\b", text, re.I) else text
    text = _WORD_FRACTION.sub(frac, text)
    text = _DOZEN.sub(lambda m: f"{12 * (_small(m.group(1)) or 1):g}", text)
    text = _DIGIT_SCALE.sub(lambda m: f"{m.group(1)} SCALE{m.group(2).lower()}", text)  # "8.3 million" stays
    try:
        text = alpha2digit(text, "en")
    except Exception:  # noqa: BLE001 — a text the parser cannot read keeps its digits as written
        pass
    text = re.sub(r"SCALE([a-z]+)", r"\1", text)
    return _ORD.sub(lambda m: "1st" if m.group(1).lower() == "first" else "2nd", text)


# --------------------------------------------------------------------------- the passes

_NAME = re.compile(r"\b([A-Z][A-Za-z]*(?:[A-Z][A-Za-z]*)?)(?:\s|-)(\d+(?:\.\d+)*)\b(?![.,]\d)(?!\s*(?:%|(?:" + _UNIT_RE
                   + r")\b))")
_QUARTER = re.compile(r"\bQ([1-4])(?:\s*(\d{4}))?\b|\b([1-4])(?:st|nd|rd|th) quarter(?: of)?(?:\s*(\d{4}))?", re.I)
_AMPM = r"(a\.?m\.?|p\.?m\.?)(?![a-z])"
_PART = r"(?:\s+in the (morning|afternoon|evening)|\s+at night)?"
_CLOCK = re.compile(r"(?<![\d.:])(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*" + _AMPM + r")?" + _PART, re.I)
_DOT_CLOCK = re.compile(r"(?<![\d.:,])(\d{1,2})\.(\d{2})\s*" + _AMPM + _PART, re.I)
_SPACE_CLOCK = re.compile(r"(?<![\d.:,])(\d{1,2}) (\d{2})\s*" + _AMPM, re.I)
_HOUR = re.compile(r"(?<![\d.:,])(\d{1,2})\s*(?:" + _AMPM + r"|o'clock" + r")" + _PART, re.I)
_WORD_CLOCK = re.compile(r"\b(half|(?:a\s+)?quarter)\s+(past|to)\s+(\d{1,2})" + r"(?:\s*" + _AMPM + r")?" + _PART, re.I)
_NOON = re.compile(r"\b(noon|midday|midnight)\b", re.I)
_ISO = re.compile(r"(?<![\d/.-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\d/-])")
_NUMERIC_DATE = re.compile(r"(?<![\d/.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4})(?![\d/-]|\.\d)")
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_MONTH = re.compile(r"\b(?:the\s+)?" + _DAY + r"\s+(?:of\s+)?(" + _MON + r")(?![a-z])(?:,?\s+(\d{4})(?![\d,]))?", re.I)
_MONTH_DAY = re.compile(r"\b(" + _MON + r")(?![a-z])\s+(?:the\s+)?" + _DAY + r"\b(?!\s*(?::|%))(?:,?\s+(\d{4})(?![\d,]))?",
                        re.I)
_MONTH_YEAR = re.compile(r"\b(" + _MON + r")(?![a-z]),?\s+(?:of\s+)?(\d{4})\b", re.I)
_MONTH_ALONE = re.compile(r"\b(" + "|".join(m for m in _MONTHS if m != "may") + r"|(?<=\bof\s)may|(?<=\bin\s)may)\b",
                          re.I)
_CENTURY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\s+century\b", re.I)
_DECADE = re.compile(r"(?<![\d,.])(?:(\d{2})|')(\d)0'?s\b", re.I)
_COMPOUND = re.compile(r"(?<![\d.,])(\d+)\s*(h|hrs?|hours?)\s*(?:and\s+)?(\d+)\s*(min|mins|minutes?)"
                       r"(?:\s*(?:and\s+)?(\d+)\s*(s|secs?|seconds?))?\b", re.I)
_RANGE_YEARS = re.compile(r"(?<![\d,.])(\d{4})\s*-\s*(\d{2})(?![\d,.])")
_FRAC_TOKEN = re.compile(r"FRAC(\d\.\d+)(?:\s+of\s+(?:a|an|the)\s+(" + _UNIT_RE + r"))?(?![a-z])", re.I)
_SLASH = re.compile(r"(?<![\d/.])(\d+)/(\d+)(?![\d/])")
_MONEY = re.compile(r"(us\$|[$€£¥]|usd|eur|gbp|chf)?\s*(-)?(" + NUM + r")(?:\s*(thousand|million|billion|trillion|mn|bn|tn|[kmbt])"
                    r"(?![a-z/]))?(?:\s*(" + _UNIT_RE + r"|" + "|".join(_CURRENCY) + "|" + "|".join(_SUBUNIT)
                    + r")(?![a-z]))?(?:st|nd|rd|th)?", re.I)


def _names(m: re.Match, text: str):
    word = m.group(1)
    if word.lower() in _NAME_STOP or word.lower().rstrip(".") in _MONTHS or re.fullmatch(_MON, word, re.I) \
            or word.lower() in _WEEKDAYS or word.lower() in _CURRENCY or word.lower() in _UNITS:
        return None
    return Name(f"{word.lower()} {m.group(2)}")


def _clock(hour: int, minute: int, half: str | None, part: str | None, second: int | None = None):
    if hour > 24 or minute > 59:
        return None
    half = (half or "").lower().replace(".", "")[:2] or None
    if part:
        half = "am" if part.lower() == "morning" else "pm"
    if hour >= 13 or (hour == 24):
        half, hour = "pm" if hour < 24 else "am", hour - 12 if hour < 24 else 0
    elif hour == 0:
        half = "am"
    elif half is None and hour == 12 and minute == 0:
        half = None
    return Clock((hour % 12) * 60 + minute, half, second)


def _read_clock(m, text):
    h, mi, sec = int(m.group(1)), int(m.group(2)), m.group(3)
    c = _clock(h, mi, m.group(4), m.group(5), int(sec) if sec else None)
    if c is None:
        return None
    if sec and not m.group(4):  # "2:01:09" is a clock time or a duration
        return (c, Num(h * 3600 + mi * 60 + int(sec), 1.0, "time"))
    return (c,)


def _read_word_clock(m, text):
    kind, how, hour = m.group(1).lower(), m.group(2).lower(), int(m.group(3))
    minute = 30 if kind == "half" else 15
    if how == "to":
        hour, minute = hour - 1, 60 - minute
    c = _clock(hour, minute, m.group(4), m.group(5))
    return (c,) if c else None


def _read_noon(m, text):
    return (Clock(0, "am" if m.group(1).lower() == "midnight" else "pm"),)


def _date(y, mo, d) -> tuple | None:
    if not 1 <= mo <= 12 or (d is not None and not 1 <= d <= 31):
        return None
    return (y, mo, d)


def _read_iso(m, text):
    r = _date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return (Date(frozenset([r])),) if r else None


def _read_numeric_date(m, text):
    a, b, y = int(m.group(1)), int(m.group(3)), int(m.group(4))
    readings = {r for r in (_date(y, b, a), _date(y, a, b)) if r}  # day-first and month-first
    return (Date(frozenset(readings)),) if readings else None


def _month(name: str) -> int:
    return 1 + [x[:3] for x in _MONTHS].index(name[:3].lower())


def _read_day_month(m, text):
    r = _date(_year(m.group(3)), _month(m.group(2)), int(m.group(1)))
    return (Date(frozenset([r])),) if r else None


def _read_month_day(m, text):
    r = _date(_year(m.group(3)), _month(m.group(1)), int(m.group(2)))
    return (Date(frozenset([r])),) if r else None


def _read_month_year(m, text):
    return (Date(frozenset([(int(m.group(2)), _month(m.group(1)), None)])),)


def _read_month(m, text):
    return (Date(frozenset([(None, _month(m.group(1)), None)])),)


def _read_century(m, text):
    c = int(m.group(1))
    return (Span((c - 1) * 100, (c - 1) * 100 + 99),)


def _read_decade(m, text):
    century, tens = m.group(1), int(m.group(2))
    if century is None:  # "the '90s"
        return tuple(Span(c * 100 + tens * 10, c * 100 + tens * 10 + 9) for c in (19, 20))
    start = int(century) * 100 + tens * 10
    if tens == 0:  # "the 1800s": the century (usually) or its first decade
        return (Span(start, start + 99), Span(start, start + 9))
    return (Span(start, start + 9),)


def _read_quarter(m, text):
    q = int(m.group(1) or m.group(3))
    y = m.group(2) or m.group(4)
    return (Quarter(q, int(y) if y else None),)


def _read_compound(m, text):
    secs = int(m.group(1)) * 3600 + int(m.group(3)) * 60 + (int(m.group(5)) if m.group(5) else 0)
    return (Num(float(secs), 1.0 if m.group(5) else 60.0, "time", hedged=_hedged(text, m.start())),)


def _read_year_range(m, text):
    first, short = m.group(1), m.group(2)
    last = int(first[:2] + short)
    if last <= int(first):
        return None
    return ((Num(float(first), 1.0),), (Num(float(last), 1.0),))


def _read_fraction(m, text):
    value = float(m.group(1))
    unit = (m.group(2) or "").lower()
    hedged = _hedged(text, m.start())
    if unit in _UNITS:
        dim, factor = _UNITS[unit]
        return (Num(value * factor, 0.01 * factor, dim, hedged=hedged),)
    return (Num(value, 0.01, "ratio", hedged=hedged),)


def _read_slash(m, text):
    a, b = int(m.group(1)), int(m.group(2))
    if 0 < a < b <= 12:  # "1/3": a fraction, or two figures
        return ((Num(a / b, 0.01, "ratio"),), (Num(float(a), 1.0),), (Num(float(b), 1.0),))
    return ((Num(float(a), 1.0),), (Num(float(b), 1.0),))


def _read_money(m, text):
    symbol, number, scale, unit = m.group(1), m.group(3), m.group(4), m.group(5)
    value, prec = _number(number)  # a sign is not read: "-" mostly joins a range ("2019-2021", "3-1")
    hedged = _hedged(text, m.start())
    sym = (symbol or "").lower() or None
    if scale:
        key = scale.lower()
        if key == "m" and unit is None and not sym:  # "1.2m": metres unless money is said
            return ((Num(value * 1e6, prec * 1e6, raw=value * 1e6, hedged=hedged),
                     Num(value, prec, "length", raw=value, hedged=hedged)),)
        value, prec = value * _SCALE[key], prec * _SCALE[key]
    unit_l = (unit or "").lower()
    currency = _CURRENCY.get(sym or "") or _CURRENCY.get(unit_l)
    if unit_l in _SUBUNIT:
        return (Num(value * _SUBUNIT[unit_l], prec * _SUBUNIT[unit_l], "money", raw=value, hedged=hedged),)
    if currency:
        return (Num(value, prec, "money", raw=value, currency=currency, hedged=hedged),)
    if unit_l in _UNITS:
        dim, factor = _UNITS[unit_l]
        return (Num(value * factor, prec * factor, dim, raw=value, hedged=hedged),)
    return (Num(value, prec, raw=value, hedged=hedged),)


def _flatten(figs: list) -> list[tuple]:
    out = []
    for f in figs:
        if f and isinstance(f[0], tuple):
            out.extend(f)
        else:
            out.append(f)
    return out


def read(text: str) -> list[tuple]:
    """The figures of ``text``: a list of figures, each a tuple of alternative readings."""
    text = normalise(text)
    text = re.sub(r"(?:^|(?<=[\n;]))\s*\(?\d{1,2}[.)]\s", " ", text)  # list numbering ("1. Surgery") is no figure
    figs: list = []
    for pattern, fn in ((_NAME, _names), (_QUARTER, _read_quarter), (_ISO, _read_iso),
                        (_NUMERIC_DATE, _read_numeric_date), (_CLOCK, _read_clock), (_DOT_CLOCK, _read_clock_dot),
                        (_SPACE_CLOCK, _read_clock_dot), (_WORD_CLOCK, _read_word_clock), (_HOUR, _read_hour),
                        (_NOON, _read_noon), (_CENTURY, _read_century), (_DAY_MONTH, _read_day_month),
                        (_MONTH_DAY, _read_month_day), (_MONTH_YEAR, _read_month_year), (_MONTH_ALONE, _read_month),
                        (_DECADE, _read_decade), (_COMPOUND, _read_compound), (_RANGE_YEARS, _read_year_range),
                        (_FRAC_TOKEN, _read_fraction), (_SLASH, _read_slash), (_MONEY, _read_money)):
        text, found = _scan(text, pattern, fn)
        figs.extend(_flatten([(f,) if not isinstance(f, tuple) else f for f in found]))
    return figs


def _read_clock_dot(m, text):
    c = _clock(int(m.group(1)), int(m.group(2)), m.group(3), m.group(4) if m.lastindex >= 4 else None)
    return (c,) if c else None


def _read_hour(m, text):
    c = _clock(int(m.group(1)), 0, m.group(2), m.group(3))
    return (c,) if c else None
