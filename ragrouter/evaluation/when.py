"""Dates and times of the judge's figures rule (:mod:`ragrouter.evaluation.figures_read` reads the
rest of a text's figures).

dateparser reads the dates and clock times ("5 March 1994", "March 5th, 1994", "14 Mar 2023",
"2:30 pm", "14:30 UTC", "9:30 am EST"), with the period it knows (a day or a month) and a
zone's offset from UTC; a numeric "03/05/1994" is read day-first *and* month-first (both readings
kept). The patterns here find where a date or a time is (dateparser's own search takes "may",
"now" and "18 weeks" for dates) and read the forms dateparser does not: "1430Z", "14h30", spoken
times ("half past five", "five past seven in the evening", "six in the morning"), fiscal and
calendar quarters ("Q3 FY2024", "the third quarter of fiscal 2024", "3Q24"), fiscal years
("FY24"), the end of a month, decades and centuries, and dosing frequencies ("twice daily" is an
interval of 12 hours).
"""

from __future__ import annotations

import calendar
import functools
import re
import threading

from text_to_num import alpha2digit

from ragrouter.evaluation.figure_types import Clock, Date, Num, Quarter, Span

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MON = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"


_SMALL = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9}


def _year(s: str | None) -> int | None:
    if not s:
        return None
    y = int(s.lstrip("'"))
    return y if y >= 100 else (2000 + y if y < 70 else 1900 + y)


def _small(word: str) -> float | None:
    w = word.lower()
    if w.isdigit():
        return float(w)
    if w in _SMALL:
        return float(_SMALL[w])
    conv = alpha2digit(w, "en")
    return float(conv) if conv.isdigit() else None


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


_AMPM = r"(a\.?m\.?|p\.?m\.?)(?![a-z])"
_PART = r"(?:\s+in the (morning|afternoon|evening)|\s+at night)?"
# a zone after a time; a fixed offset from UTC as written ("UTC+2", "(GMT-05:00)", "local time (UTC+2)")
# is read as that offset
_OFFSET = r"(?:UTC|GMT)\s*[+-]\s*\d{1,2}(?::?\d{2})?"
_ZONE = (r"(?:\s*\(?\s*(" + r"(?:local(?:\s+time)?\s*\(\s*)?" + _OFFSET
         + r"|Z|UTC|GMT|Zulu|local(?:\s+time)?|[ECMP][SD]?T|Eastern|Central|Pacific|Mountain|CES?T|BST|IST|JST|AEST)"
         r"(?![a-z])\s*\)?)?")
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


_ZONES = {"z": 0, "utc": 0, "gmt": 0, "zulu": 0}


def _zone(written: str | None) -> tuple[int | None, str | None]:
    """(offset from UTC in minutes, zone as written) of a zone word; the offset from dateparser's
    time-zone table ("EST" is -300) and None where it names no fixed offset ("Eastern", "local")."""
    if not written:
        return None, None
    w = re.sub(r"\s+time$", "", written.strip().lower())
    fixed = re.search(r"(?:utc|gmt)\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?", w)
    if fixed:  # "utc+2", "local time (utc+02:00)": the offset as written
        minutes = int(fixed.group(2)) * 60 + int(fixed.group(3) or 0)
        return (minutes if fixed.group(1) == "+" else -minutes), f"utc{fixed.group(1)}{minutes}"
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
        hour, minute = (hour - 1) or 12, 60 - minute  # "a quarter to one" is 12:45
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



# the passes over a text, in order (figures_read.read runs them among its own)
QUARTER_PASSES = ((_QUARTER, _read_quarter),)
DATE_TIME_PASSES = (
    (_FISCAL_YEAR, _read_fiscal_year), (_ISO, _read_iso), (_ISO_MONTH, _read_iso_month),
    (_NUMERIC_DATE, _read_numeric_date), (_MIL_CLOCK, _read_mil_clock), (_CLOCK, _read_clock),
    (_DOT_CLOCK, _read_clock_dot), (_SPACE_CLOCK, _read_clock_dot), (_H_CLOCK, _read_h_clock),
    (_WORD_CLOCK, _read_word_clock), (_HOUR, _read_hour), (_NOON, _read_noon), (_FREQUENCY, _read_frequency),
    (_END_OF_MONTH, _read_end_of_month), (_CENTURY, _read_century), (_DAY_MONTH, _read_day_month),
    (_MONTH_DAY, _read_month_day), (_MONTH_YEAR, _read_month_year), (_MONTH_ALONE, _read_month),
    (_DECADE, _read_decade),
)
MONTHS, MONTH_PATTERN, small = _MONTHS, _MON, _small
