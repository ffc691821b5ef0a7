"""Reading the figures of a short text for the judge's figures rule (:mod:`ragrouter.evaluation.precision`).

:func:`read` turns a text into typed figures, each a tuple of alternative readings (a reading is a
:class:`Num`, :class:`Clock`, :class:`Date`, :class:`Span`, :class:`Quarter` or :class:`Name`).
Libraries read the values; the patterns here only find where a figure is (glue):

- units by pint (:mod:`ragrouter.evaluation.units`): any unit pint parses after a number
  ("mg/kg", "micrograms", "mL per hour", "knots", "km/h", "ft", "hPa", "°C", "basis points"),
  converted to base units, so a conversion is the same value; "FL350" is 35,000 ft.
- number words by text2num (``alpha2digit``: "twenty-three", "fourth"); a few fractions ("a
  third", "two fifths", "a quarter of a percentage point").
- dates and clock times by dateparser: "5 March 1994", "March 5th, 1994", "1994-03-05",
  "March 1994", "14:30 UTC", "2:30 pm", "9:30 am EST" (its offset kept, so zones compare); a
  numeric "03/05/1994" is read day-first *and* month-first (both readings kept). Glue reads the
  forms dateparser does not: "1430Z", "0812 UTC", "half past five", "a quarter to ten".
- fiscal and calendar quarters ("Q3 FY2024", "third quarter of fiscal 2024", "3Q24", "Q3 2024"),
  fiscal years ("FY24" is 2024), decades and centuries as spans of years.
- money: currencies, scale words ("$1.2 billion" = "1,200 million"), scale stated for a whole
  table ("in thousands", "USD thousands"), accounting negatives ("(1,234)"), ranges whose first
  end borrows the second's scale and unit ("$1.1–1.2 billion", "7 to 10 days").
- numbers inside names ("Windows 11", "Python 3.10", "COVID-19") as the name, compared as text.

Parts of the text are read once: each pass blanks what it read. A number followed by a word
that looks like a unit but that pint cannot read ("145 KIAS") is kept with ``unread`` set, so
the rule can abstain instead of guessing.
"""

from __future__ import annotations

import calendar
import dataclasses
import functools
import re
import threading

from text_to_num import alpha2digit

from ragrouter.evaluation import units as un


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
    unread: bool = False  # followed by a word that looks like a unit pint cannot read ("145 KIAS")
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


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MON = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_HEDGE = re.compile(r"(?:about|around|roughly|approximately|approx\.?|nearly|almost|some|circa|c\.|~|close to|just over|"
                    r"just under|over|under|more than|less than|up to|at least|at most)\s*$", re.I)
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "mm": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9,
          "b": 1e9, "trillion": 1e12, "tn": 1e12, "t": 1e12}
_CURRENCY = {"$": "usd", "us$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "€": "eur", "eur": "eur",
             "euro": "eur", "euros": "eur", "£": "gbp", "gbp": "gbp", "pound sterling": "gbp", "¥": "jpy",
             "yen": "jpy", "chf": "chf", "francs": "chf"}
_SUBUNIT = {"cent": 0.01, "cents": 0.01, "pence": 0.01, "p": 0.01}
_FRACTIONS = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fifth": 5, "fifths": 5,
              "sixth": 6, "sixths": 6, "eighth": 8, "eighths": 8, "tenth": 10, "tenths": 10}
_SMALL = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9}
_NAME_STOP = {"at", "in", "on", "by", "from", "about", "around", "nearly", "only", "just", "the", "it", "he", "she",
              "they", "we", "i", "up", "to", "over", "under", "since", "until", "after", "before", "approximately",
              "roughly", "some", "almost", "mid", "early", "late", "pre", "post", "and", "or", "of", "for", "with",
              "less", "more", "than", "was", "is", "are", "were", "q", "ca", "circa", "every", "each", "fy", "no",
              "page", "p", "cost", "costs", "total", "a", "an", "yes", "eps", "fiscal", "flight", "level", "runway",
              "heading", "fl"}
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
    if not s:
        return None
    y = int(s.lstrip("'"))
    return y if y >= 100 else (2000 + y if y < 70 else 1900 + y)


# --------------------------------------------------------------------------- normalisation

_WORD_FRACTION = re.compile(r"\b(a|an|one|two|three|four|five|six|seven|eight|nine|\d+)[\s-]+(" + "|".join(_FRACTIONS)
                            + r")\b(?!\s+(?:past|to)\b)(?!\s+(?:of\s+)?(?:fiscal|fy|\d{4}|'\d\d))", re.I)
_AND_A_HALF = re.compile(r"\b([a-z]+|\d+)\s+and\s+a\s+half\b", re.I)
_DOZEN = re.compile(r"\b(a|one|two|three|four|five|six|\d+)\s+dozens?\b", re.I)
_DIGIT_SCALE = re.compile(r"(\d\)?)\s*(thousand|million|billion|trillion)\b", re.I)  # "$(0.35) million" too
_ORD = re.compile(r"(?<![\d\w])(?<!per )(?<!a )(?<!one )(?<!each )(?<!every )(first|second)\b(?!s)", re.I)
_SPOKEN_MONEY = re.compile(r"\b([a-z]+(?:-[a-z]+)?|\d+)\s+(?:us\s+)?dollars?\s+and\s+([a-z]+(?:-[a-z]+)?|\d{1,2})\s+cents?\b",
                           re.I)
_UNIT_AND_A_HALF = re.compile(r"\b(?:a|an|1)\s+([a-z]+)\s+and\s+a\s+half\b", re.I)  # "a year and a half"
_SMALL_BEFORE_UNIT = re.compile(r"\b(one|two)(\s)(?=\S)", re.I)  # "one milligram": text2num keeps "one" as a word
_ORD_QUARTER = re.compile(r"\b(first|second|third|fourth)(?=\s+(?:fiscal\s+)?quarter)", re.I)


def _small(word: str) -> float | None:
    w = word.lower()
    if w.isdigit():
        return float(w)
    if w in _SMALL:
        return float(_SMALL[w])
    conv = alpha2digit(w, "en")
    return float(conv) if conv.isdigit() else None


def _spoken_money(m: re.Match) -> str:
    dollars, cents = _small(m.group(1)), _small(m.group(2))
    if dollars is None or cents is None or cents >= 100:
        return m.group(0)
    return f"${dollars:g}.{int(cents):02d}"


def normalise(text: str) -> str:
    """Dashes, spaces, fractions and number words made uniform before the figures are read."""
    text = (text or "").replace("\u2013", "-").replace("\u2014", "-").replace("\u2212", "-")
    text = re.sub(r"[\u00a0\u2009\u202f]", " ", text)
    text = _ORD_QUARTER.sub(lambda m: {"first": "1st", "second": "2nd", "third": "3rd", "fourth": "4th"}[m.group(1).lower()],
                            text)
    text = _UNIT_AND_A_HALF.sub(lambda m: f"1.5 {m.group(1)}" if un.parse(m.group(1)) else m.group(0), text)
    text = _SPOKEN_MONEY.sub(_spoken_money, text)  # "two dollars and fifteen cents" is $2.15
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
    # text2num splits "one thousand, two hundred" at the comma num2words and many writers put there
    text = re.sub(r"\b(thousand|million|billion),\s+(?=(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
                  r"twelve|[a-z]+teen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|a hundred)\b)", r"\1 ", text,
                  flags=re.I)
    try:
        text = alpha2digit(text, "en")
    except Exception:  # noqa: BLE001 — a text the parser cannot read keeps its digits as written
        pass

    text = re.sub(r"SCALE([a-z]+)", r"\1", text)
    text = _SMALL_BEFORE_UNIT.sub(lambda m: (str(int(_small(m.group(1)))) + m.group(2))
                                  if un.read_after(m.string[m.end():]) else m.group(0), text)
    return _ORD.sub(lambda m: "1st" if m.group(1).lower() == "first" else "2nd", text)


# --------------------------------------------------------------------------- dates and times (dateparser)

_LOCAL = threading.local()


def _date_parser(order: str):
    """dateparser's parser for one date order, one per thread (the judge stage reads on several)."""
    parsers = _LOCAL.__dict__.setdefault("parsers", {})
    if order not in parsers:
        from dateparser.date import DateDataParser  # deferred with pint (see units.py): ~0.1 s on first use

        parsers[order] = DateDataParser(languages=["en"], settings={
            "DATE_ORDER": order, "PREFER_DAY_OF_MONTH": "first", "RETURN_TIME_AS_PERIOD": True})
    return parsers[order]


@functools.lru_cache(maxsize=4096)
def _parse_date(span: str, order: str = "DMY"):
    """(date object, period) of a span as dateparser reads it, or (None, None)."""
    try:
        data = _date_parser(order).get_date_data(span)
    except Exception:  # noqa: BLE001 — a span dateparser cannot read is no date
        return None, None
    return data.date_obj, data.period


def _date_reading(span: str, has_year: bool, order: str = "DMY") -> tuple | None:
    d, period = _parse_date(re.sub(r"^the\s+|(?<=\d)(?:st|nd|rd|th)\b|\bof\s+", "", span.strip(), flags=re.I), order)
    if d is None:
        return None
    return (d.year if has_year else None, d.month, d.day if period == "day" else None)


# --------------------------------------------------------------------------- the passes

_NAME = re.compile(r"\b([A-Z][A-Za-z]*(?:[A-Z][A-Za-z]*)?)(?:\s|-)(\d+(?:\.\d+)*)\b(?![.,]\d)(?!\s*%)")
_FY_WORD = r"(?:fy|fiscal(?:\s+year)?)"
_FY = _FY_WORD + r"\s*'?(\d{4}|\d{2})"
_QUARTER = re.compile(
    r"\bQ([1-4])\s*(?:of\s+)?" + _FY + r"\b"                                        # Q3 FY2024
    r"|\b" + _FY + r"\s*Q([1-4])\b"                                                  # FY24 Q3
    r"|\bfiscal\s+(?:Q([1-4])|([1-4])(?:st|nd|rd|th)\s+quarter)(?:\s+(?:of\s+)?(\d{4}))?"  # fiscal Q3 2024
    r"|\b([1-4])(?:st|nd|rd|th)\s+(?:fiscal\s+quarter(?:\s+of)?\s+(?:" + _FY_WORD
    + r"\s*)?|quarter(?:\s+of)?\s+" + _FY_WORD + r"\s*)'?(\d{4}|\d{2})\b"  # 3rd (fiscal) quarter of fiscal 2024
    r"|\bQ([1-4])(?:\s*'?(\d{4}|\d{2}))?\b"                                         # Q3 2024, Q3 '24
    r"|\b([1-4])Q\s*'?(\d{4}|\d{2})\b"                                              # 3Q24
    r"|\b([1-4])(?:st|nd|rd|th) quarter(?: of)?(?:\s*(\d{4}))?"                     # 3rd quarter of 2024
    r"|\b([1-4])Q\s*" + _FY + r"\b"                                                # 3Q FY24
    r"|\b" + _FY + r",?\s+([1-4])(?:st|nd|rd|th)\s+quarter\b", re.I)                # fiscal 2024 3rd quarter
_FISCAL_YEAR = re.compile(r"\b" + _FY + r"\b", re.I)
_FLIGHT_LEVEL = re.compile(r"\b(?:FL\s?|flight\s+level\s+)(\d{2,3})\b", re.I)
_AMPM = r"(a\.?m\.?|p\.?m\.?)(?![a-z])"
_PART = r"(?:\s+in the (morning|afternoon|evening)|\s+at night)?"
_ZONE = r"(?:\s*(Z|UTC|GMT|Zulu|local(?:\s+time)?|[ECMP][SD]?T|Eastern|Central|Pacific|Mountain|CES?T|BST|IST|JST|AEST)(?![a-z]))?"
_CLOCK = re.compile(r"(?<![\d.:])(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*" + _AMPM + r")?" + _PART + _ZONE, re.I)
_MIL_CLOCK = re.compile(r"(?<![\d.:,$€£])([01]\d|2[0-3])([0-5]\d)\s*(Z|UTC|GMT|Zulu|L|LT|local(?:\s+time)?|hours|hrs)\b", re.I)
_DOT_CLOCK = re.compile(r"(?<![\d.:,])(\d{1,2})\.(\d{2})\s*" + _AMPM + _PART + _ZONE, re.I)
_SPACE_CLOCK = re.compile(r"(?<![\d.:,])(\d{1,2}) (\d{2})\s*" + _AMPM + _ZONE, re.I)
_H_CLOCK = re.compile(r"(?<![\d.:,])([01]?\d|2[0-3])(?:h| (?=\d\d\s*(?:Z|UTC|GMT|hours|hrs)\b))([0-5]\d)(?:\s*(Z|UTC|GMT|hours|hrs)\b)?",
                      re.I)  # "14h30", "fourteen thirty hours" (text2num: "14 30 hours")
_HOUR = re.compile(r"(?<![\d.:,])(\d{1,2})\s*(?:" + _AMPM + r"|o'clock" + r")" + _PART + _ZONE
                   + r"|(?<![\d.:,])(\d{1,2})()\s+in the (morning|afternoon|evening)()", re.I)  # "six in the morning"
_WORD_CLOCK = re.compile(r"\b(half|(?:a\s+)?quarter|[1-5]?\d)(\s+minutes?)?\s+(past|after|to|before)\s+(\d{1,2})(?![\d:]|[.,]\d)"
                         r"(\s*o'clock)?(?:\s*" + _AMPM + r")?" + _PART, re.I)
_NOON = re.compile(r"\b(noon|midday|midnight)\b", re.I)
_ISO = re.compile(r"(?<![\d/.-])(\d{4})([-/.])(\d{1,2})\2(\d{1,2})(?![\d/-])")
_ISO_MONTH = re.compile(r"(?<![\d/.-])(\d{4})-(0[1-9]|1[0-2])(?![\d/-])")  # ISO 8601 year and month: "2018-03"
_NUMERIC_DATE = re.compile(r"(?<![\d/.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4})(?![\d/-]|\.\d)")
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_MONTH = re.compile(r"\b(?:the\s+)?" + _DAY + r"\s+(?:of\s+)?(" + _MON + r")(?![a-z])(?:,?\s+(\d{4})(?![\d,]))?", re.I)
_MONTH_DAY = re.compile(r"\b(" + _MON + r")(?![a-z])\s+(?:the\s+)?" + _DAY + r"\b(?!\s*(?::|%))(?:,?\s+(\d{4})(?![\d,]))?",
                        re.I)
_MONTH_YEAR = re.compile(r"\b(" + _MON + r")(?![a-z]),?\s+(?:of\s+)?(\d{4})\b", re.I)
_MONTH_ALONE = re.compile(r"\b(" + "|".join(m for m in _MONTHS if m != "may") + r"|(?<=\bof\s)may|(?<=\bin\s)may)\b",
                          re.I)
# a dosing frequency as the interval it means ("twice daily" is every 12 hours); "daily" alone is no figure
_FREQUENCY = re.compile(r"\b(?:(once|twice|thrice|one|two|\d)(?:\s+times)?\s+(?:a|per|each|every)\s+day|(once|twice|thrice|one|two|\d)"
                        r"(?:\s+times)?\s+daily|(b\.?i\.?d|t\.?i\.?d|q\.?i\.?d|q\.?d)\.?|q(\d{1,2})h)\b", re.I)
_TIMES = {"once": 1, "twice": 2, "thrice": 3, "bid": 2, "tid": 3, "qid": 4, "qd": 1}
_END_OF_MONTH = re.compile(r"\b(?:the\s+)?(?:very\s+)?end\s+of\s+(" + _MON + r")(?![a-z]),?\s+(?:of\s+)?(\d{4})\b", re.I)
_CENTURY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\s+century\b", re.I)
_DECADE = re.compile(r"(?<![\d,.])(?:(\d{2})|')(\d)0'?s\b", re.I)
_COMPOUND = re.compile(r"(?<![\d.,])(\d+)\s*(h|hrs?|hours?)\s*(?:and\s+)?(\d+)\s*(min|mins|minutes?)"
                       r"(?:\s*(?:and\s+)?(\d+)\s*(s|secs?|seconds?))?\b", re.I)
_RANGE_YEARS = re.compile(r"(?<![\d,.])(\d{4})\s*-\s*(\d{2})(?![\d,.])")
_FRAC_TOKEN = re.compile(r"FRAC(\d\.\d+)(?:\s+of\s+(?:a|an|the)\b)?", re.I)
_SLASH = re.compile(r"(?<![\d/.])(\d+)/(\d+)(?![\d/])")
_MONEY = re.compile(r"(\()?\s*(us\$|[$€£¥]|usd|eur|gbp|chf)?\s*(\()?\s*(-)?\s*(us\$|[$€£¥])?(" + NUM
                    + r")(\))?(?:\s*(thousand|million|billion|trillion|mn|mm|bn|tn|[kmbt])(?![a-z/]))?"
                    r"(?:\s*(" + "|".join(sorted(map(re.escape, list(_CURRENCY) + list(_SUBUNIT)), key=len, reverse=True))
                    + r")(?![a-z]))?(?:st|nd|rd|th)?", re.I)
# a scale stated for a whole table or answer: "(in thousands)", "in millions of euros", "USD thousands", "$000s"
_TABLE_SCALE = re.compile(r"\bin\s+(thousands|millions|billions)(?:\s+of\s+(us\s+dollars|dollars|usd|euros?|eur|\$|€|£))?"
                          r"|\b(usd|eur|gbp|\$|€|£)\s*(thousands|millions|'000s?|000s?)\b"
                          r"|(\$|€|£)\s*'?000s?\b|\b(thousands|millions)\s+of\s+(us\s+dollars|dollars|usd|euros?|eur)\b",
                          re.I)
_TABLE_FACTOR = {"thousands": 1e3, "millions": 1e6, "billions": 1e9, "'000": 1e3, "'000s": 1e3, "000": 1e3,
                 "000s": 1e3}
_NEGATIVE_CUE = re.compile(r"\b(?:loss(?:es)?|lost|lose|deficit|negative|shortfall|outflow|decline[ds]?|decrease[ds]?|"
                           r"fell|fall(?:en|s)?|drop(?:ped|s)?|down|minus|write-?downs?|impairment|narrow(?:ed|s)?|"
                           r"contract(?:ed|s)?|shr[aiu]nk|reduc(?:ed|tion)|cut|compress(?:ed|ion)|slipp?(?:ed)?|"
                           r"eased|lower(?:ed)?|worse(?:ned)?|deteriorat(?:ed|ion))\b", re.I)


def table_scale(text: str) -> tuple[float, str | None] | None:
    """(factor, currency) of a scale stated for a whole table ("(in thousands)", "USD thousands")."""
    m = _TABLE_SCALE.search(text or "")
    if not m:
        return None
    groups = [g for g in m.groups() if g]
    factor = next((_TABLE_FACTOR[g.lower()] for g in groups if g.lower() in _TABLE_FACTOR), 1e3)
    cur = next((_CURRENCY.get(g.lower().replace("us ", "")) for g in groups if _CURRENCY.get(g.lower().replace("us ", ""))),
               None)
    return factor, cur


def negative_cue(text: str) -> bool:
    """The text says a loss or a fall in words ("an operating loss of $4.5 million")."""
    return bool(_NEGATIVE_CUE.search(text or ""))


def _names(m: re.Match, text: str):
    word = m.group(1)
    if word.lower() in _NAME_STOP or word.lower().rstrip(".") in _MONTHS or re.fullmatch(_MON, word, re.I) \
            or word.lower() in _WEEKDAYS or word.lower() in _CURRENCY or un.parse(word) is not None:
        return None
    if un.read_after(text[m.end():]) is not None:  # "Room 12 m" is a length, not a name
        return None
    return Name(f"{word.lower()} {m.group(2)}")


_ZONES = {"z": 0, "utc": 0, "gmt": 0, "zulu": 0}


def _zone(written: str | None) -> tuple[int | None, str | None]:
    """(offset from UTC in minutes, zone as written) of a zone word; the offset from dateparser's
    time-zone table ("EST" is -300) and None where it names no fixed offset ("Eastern", "local")."""
    if not written:
        return None, None
    w = re.sub(r"\s+time$", "", written.strip().lower())
    if w in _ZONES:
        return 0, "utc"
    if w in ("l", "lt"):
        w = "local"
    if re.fullmatch(r"[a-z]{3,4}", w) and w not in ("local",):
        d, _ = _parse_date(f"12:00 {w.upper()}")
        if d is not None and d.tzinfo is not None and d.utcoffset() is not None:
            return int(d.utcoffset().total_seconds() // 60), w
    return None, w


def _clock(hour: int, minute: int, half: str | None, part: str | None, second: int | None = None,
           zone: str | None = None):
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
    offset, name = _zone(zone)
    return Clock((hour % 12) * 60 + minute, half, second, offset, name)


def _read_clock(m, text):
    h, mi, sec = int(m.group(1)), int(m.group(2)), m.group(3)
    half = m.group(4) or ("am" if m.group(1).startswith("0") and h else None)  # "03:47": a 24-hour morning time
    c = _clock(h, mi, half, m.group(5), int(sec) if sec else None, m.group(6))
    if c is None:
        return None
    if sec and not m.group(4):  # "2:01:09" is a clock time or a duration
        return (c, Num(h * 3600 + mi * 60 + int(sec), 1.0, "[time]"))
    return (c,)


def _read_mil_clock(m, text):
    zone = m.group(3)
    hour = int(m.group(1))
    c = _clock(hour, int(m.group(2)), "am" if hour < 12 else None, None, None,  # a 24-hour reading: "0347Z" is 3:47 am
               None if zone.lower() in ("hours", "hrs") else zone)
    return (c,) if c else None


def _read_h_clock(m, text):
    hour, zone = int(m.group(1)), m.group(3)
    c = _clock(hour, int(m.group(2)), "am" if hour < 12 and m.group(1).startswith("0") else None, None, None,
               None if not zone or zone.lower() in ("hours", "hrs") else zone)
    return (c,) if c else None


def _read_word_clock(m, text):
    kind, said_minutes, how, hour = m.group(1).lower(), m.group(2), m.group(3).lower(), int(m.group(4))
    minute = 30 if kind == "half" else 15 if "quarter" in kind else int(kind)
    if not 0 < minute < 60 or hour > 12:
        return None
    said_time = said_minutes or m.group(5) or m.group(6) or m.group(7)
    if how in ("to", "before") and kind[0].isdigit() and not said_time:  # "5 to 10 mg" is a range
        return None
    if how in ("to", "before"):
        hour, minute = hour - 1, 60 - minute
    c = _clock(hour, minute, m.group(6), m.group(7))
    return (c,) if c else None


def _read_noon(m, text):
    return (Clock(0, "am" if m.group(1).lower() == "midnight" else "pm"),)


def _read_clock_dot(m, text):
    c = _clock(int(m.group(1)), int(m.group(2)), m.group(3), m.group(4) if m.lastindex >= 4 else None,
               zone=m.group(m.lastindex) if m.lastindex >= 5 else None)
    return (c,) if c else None


def _read_hour(m, text):
    if m.group(5):  # "6 in the morning"
        c = _clock(int(m.group(5)), 0, None, m.group(7))
        return (c,) if c and int(m.group(5)) <= 12 else None
    c = _clock(int(m.group(1)), 0, m.group(2), m.group(3), zone=m.group(4))
    return (c,) if c else None


def _dates(*readings) -> tuple | None:
    found = frozenset(r for r in readings if r is not None)
    return (Date(found),) if found else None


def _read_iso(m, text):
    return _dates(_date_reading(f"{m.group(1)}-{m.group(3)}-{m.group(4)}", True, "YMD"))


def _read_iso_month(m, text):
    if int(m.group(2)) > int(m.group(1)[2:]):  # "2010-11" is more often the years 2010 to 2011
        return None
    return (Date(frozenset([(int(m.group(1)), int(m.group(2)), None)])),)


def _read_numeric_date(m, text):
    span = m.group(0)
    return _dates(_date_reading(span, True, "DMY"), _date_reading(span, True, "MDY"))  # day-first and month-first


def _read_day_month(m, text):
    return _dates(_date_reading(m.group(0), bool(m.group(3))))


def _read_month_day(m, text):
    return _dates(_date_reading(m.group(0), bool(m.group(3)), "MDY"))


def _read_month_year(m, text):
    return _dates(_date_reading(m.group(0), True))


def _month(name: str) -> int:
    return 1 + [x[:3] for x in _MONTHS].index(name[:3].lower())


def _read_month(m, text):
    return (Date(frozenset([(None, _month(m.group(1)), None)])),)


def _read_frequency(m, text):
    if m.group(4):
        hours = float(m.group(4))
    else:
        word = (m.group(1) or m.group(2) or m.group(3)).lower().replace(".", "")
        times = _TIMES.get(word) or int(_small(word) or 0)
        if not times:
            return None
        hours = 24.0 / times
    return (Num(hours * 3600.0, 3600.0, "[time]", unit="hour"),)


def _read_end_of_month(m, text):
    year, month = int(m.group(2)), _month(m.group(1))
    return (Date(frozenset([(year, month, calendar.monthrange(year, month)[1])])),)


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
    g = m.groups()
    # (q, year, fiscal) per alternative of _QUARTER, in its order
    for q_i, y_i, fiscal in ((0, 1, True), (3, 2, True), (4, 6, True), (5, 6, True), (7, 8, True), (9, 10, None),
                             (11, 12, None), (13, 14, None), (15, 16, True), (18, 17, True)):
        if g[q_i]:
            return (Quarter(int(g[q_i]), _year(g[y_i]), fiscal),)
    return None


def _read_fiscal_year(m, text):
    return (Num(float(_year(m.group(1))), 1.0),)


def _read_flight_level(m, text):
    ft = un.parse("ft")
    value = float(m.group(1)) * 100
    return (Num(un.to_base(value, ft), un.to_base(100.0, ft), ft.dim, raw=value, unit=ft.expr),)


def _read_compound(m, text):
    secs = int(m.group(1)) * 3600 + int(m.group(3)) * 60 + (int(m.group(5)) if m.group(5) else 0)
    return (Num(float(secs), 1.0 if m.group(5) else 60.0, "[time]", hedged=_hedged(text, m.start())),)


def _read_year_range(m, text):
    first, short = m.group(1), m.group(2)
    last = int(first[:2] + short)
    if last <= int(first):
        return None
    return ((Num(float(first), 1.0),), (Num(float(last), 1.0),))


def _with_unit(value: float, prec: float, unit, loose: float = 0.0, **kw) -> Num:
    base = un.to_base(value, unit)
    return Num(base, abs(un.to_base(value + prec, unit) - base), unit.dim, unit=unit.expr,
               loose=abs(un.to_base(value + loose, unit) - base) if loose else 0.0, **kw)


def _read_fraction(m, text):
    value = float(m.group(1))
    hedged = _hedged(text, m.start())
    found = un.read_after(text[m.end():]) if m.group(0).lower().rstrip().endswith(("a", "an", "the")) else None
    if found is not None:
        return (_with_unit(value, 0.01, found[0], hedged=hedged),)
    return (Num(value, 0.01, "ratio", hedged=hedged),)


def _read_slash(m, text):
    a, b = int(m.group(1)), int(m.group(2))
    if 0 < a < b <= 12:  # "1/3": a fraction, or two figures
        return ((Num(a / b, 0.01, "ratio"),), (Num(float(a), 1.0),), (Num(float(b), 1.0),))
    return ((Num(float(a), 1.0),), (Num(float(b), 1.0),))


@dataclasses.dataclass
class _Written:
    """A number as written, before it becomes a figure (a range's first end may borrow from the second)."""

    value: float
    prec: float
    scale: float | None = None
    currency: str | None = None
    subunit: float | None = None
    unit: object = None
    hedged: bool = False
    negative: bool = False
    unread: bool = False
    metre_or_million: bool = False
    grouped: bool = False  # written with a thousands separator ("2,310": not a year)
    zeros: int = 0  # trailing zeros of a whole number ("9,450": 1)

    def figure(self, table=None) -> tuple:
        v, p = self.value, self.prec
        kw = dict(hedged=self.hedged, negative=self.negative)
        loose = p * 10 ** self.zeros if self.zeros else 0.0
        if self.metre_or_million:  # "1.2m": metres unless money is said
            return (Num(v * 1e6, p * 1e6, raw=v * 1e6, loose=loose * 1e6, **kw),
                    _with_unit(v, p, un.parse("m"), loose=loose, raw=v, **kw))
        scale = self.scale
        year = (not self.currency and not self.grouped and not self.negative and self.value == int(self.value)
                and 1000 <= self.value <= 2999)
        if not scale and table and not self.unread and self.unit is None and not self.subunit and not year:
            scale = table[0]  # "(2,310)" or "$(1,234)" in a table "in thousands" (a year stays a year)
        if scale:
            v, p, loose = v * scale, p * scale, loose * scale
            kw["scale"] = scale
        if self.subunit:
            return (Num(v * self.subunit, p * self.subunit, "money", raw=v, loose=loose * self.subunit, **kw),)
        currency = self.currency or (table[1] if table and scale == table[0] and not self.scale else None)
        if currency:
            return (Num(v, p, "money", raw=v, currency=currency, loose=loose, **kw),)
        if self.unit is not None:
            return (_with_unit(v, p, self.unit, loose=loose, raw=v, **kw),)
        return (Num(v, p, raw=v, unread=self.unread, loose=loose, **kw),)


def _written(m, text, orig) -> tuple[_Written, int]:
    """A number match as written, and where it ends (after its unit when pint reads one)."""
    open1, sym1, open2, minus, sym2, number, close, scale, word = m.groups()
    value, prec = _number(number)
    digits = number.replace(",", "")
    w = _Written(value, prec, hedged=_hedged(orig, m.start()), grouped="," in number,
                 zeros=0 if "." in digits else len(digits) - len(digits.rstrip("0")))
    w.negative = bool(minus) or bool((open1 or open2) and close)
    if minus and re.search(r"[\d\w]\s*$", orig[:m.start(4)]):  # "2019-2021", "3-1": a range, not a sign
        w.negative = bool((open1 or open2) and close)
    sym = (sym1 or sym2 or "").lower() or None
    end = m.end()
    if close and not (open1 or open2):  # a lone ")" closes something else
        end = m.start(7)
    word_l = (word or "").lower()
    if scale:
        key = scale.lower()
        if key == "m" and word is None and not sym:
            w.metre_or_million = True
            return w, end
        if key == "t" and word is None and not sym:  # "2.3 t": tonnes unless money is said
            end = m.start(8)
        else:
            w.scale = _SCALE[key]
    w.currency = _CURRENCY.get(sym or "") or _CURRENCY.get(word_l)
    w.subunit = _SUBUNIT.get(word_l)
    if w.currency or w.subunit or w.scale:
        return w, end
    found = un.read_after(text[end:])
    if found is not None:
        w.unit, used = found[0], found[1]
        return w, end + used
    nxt = re.match(r"\s?(\S+)", text[end:])
    w.unread = bool(nxt) and un.looks_like_unit(nxt.group(1))
    return w, end


def _read_numbers(text: str, table) -> tuple[str, list]:
    """The numbers left (money, quantities with a unit, plain numbers); a range's first end takes
    the second's scale, currency and unit when it has none ("$1.1-1.2 billion", "7 to 10 days")."""
    orig, found, pos = text, [], 0
    while (m := _MONEY.search(text, pos)) is not None:
        if not m.group(6):
            pos = m.start() + 1
            continue
        w, end = _written(m, text, orig)
        found.append([m.start(6), end, w])
        text = text[:m.start()] + " " * (end - m.start()) + text[end:]
        pos = end
    for (_, end, w), nxt_item in zip(found, found[1:]):
        nxt = nxt_item[2]
        if not re.fullmatch(r"\s*(?:-|to|and|or)\s*(?:us\$|[$€£¥])?\s*", orig[end:nxt_item[0]], re.I):
            continue
        if not (w.scale or w.unit is not None or w.subunit or w.metre_or_million) and (nxt.scale or nxt.unit is not None):
            w.scale, w.unit, w.unread = nxt.scale, nxt.unit, False
        if w.currency and not nxt.currency and not nxt.unit:  # "$1.1-1.2 billion": the second end is dollars too
            nxt.currency = w.currency
        if nxt.currency and not w.currency and not w.unit:
            w.currency = nxt.currency
    out = [w.figure(table) for _, _, w in found]
    return text, out


def _flatten(figs: list) -> list[tuple]:
    out = []
    for f in figs:
        if f and isinstance(f[0], tuple):
            out.extend(f)
        else:
            out.append(f)
    return out


def read(text: str, context: str = "") -> list[tuple]:
    """The figures of ``text``: a list of figures, each a tuple of alternative readings.
    ``context`` (the question) may state a table's scale ("in thousands") that ``text`` does not."""
    table = table_scale(text) or table_scale(context)
    text = normalise(_TABLE_SCALE.sub(lambda m: " " * len(m.group(0)), text or ""))
    text = re.sub(r"(?:^|(?<=[\n;]))\s*\(?\d{1,2}[.)]\s", " ", text)  # list numbering ("1. Surgery") is no figure
    figs: list = []
    for pattern, fn in ((_FLIGHT_LEVEL, _read_flight_level), (_QUARTER, _read_quarter), (_NAME, _names),
                        (_FISCAL_YEAR, _read_fiscal_year), (_ISO, _read_iso), (_ISO_MONTH, _read_iso_month),
                        (_NUMERIC_DATE, _read_numeric_date), (_MIL_CLOCK, _read_mil_clock), (_CLOCK, _read_clock),
                        (_DOT_CLOCK, _read_clock_dot), (_SPACE_CLOCK, _read_clock_dot), (_H_CLOCK, _read_h_clock),
                        (_WORD_CLOCK, _read_word_clock),
                        (_HOUR, _read_hour), (_NOON, _read_noon), (_FREQUENCY, _read_frequency),
                        (_END_OF_MONTH, _read_end_of_month), (_CENTURY, _read_century),
                        (_DAY_MONTH, _read_day_month), (_MONTH_DAY, _read_month_day), (_MONTH_YEAR, _read_month_year),
                        (_MONTH_ALONE, _read_month), (_DECADE, _read_decade), (_COMPOUND, _read_compound),
                        (_RANGE_YEARS, _read_year_range), (_FRAC_TOKEN, _read_fraction), (_SLASH, _read_slash)):
        text, found = _scan(text, pattern, fn)
        figs.extend(_flatten([(f,) if not isinstance(f, tuple) else f for f in found]))
    text, found = _read_numbers(text, table)
    figs.extend(found)
    return figs
