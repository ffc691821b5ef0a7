"""Reading the figures of a short text for the judge's figures rule (:mod:`ragrouter.evaluation.precision`).

:func:`read` turns a text into typed figures, each a tuple of alternative readings (a reading is a
:class:`Num`, :class:`Clock`, :class:`Date`, :class:`Span`, :class:`Quarter` or :class:`Name`).
Libraries read the values; the patterns here only find where a figure is (glue):

- units by pint (:mod:`ragrouter.evaluation.units`): any unit pint parses after a number
  ("mg/kg", "micrograms", "mL per hour", "knots", "km/h", "ft", "hPa", "°C", "basis points"),
  converted to base units, so a conversion is the same value; "FL350" is 35,000 ft.
- number words by text2num (``alpha2digit``: "twenty-three", "fourth"); a few fractions ("a
  third", "two fifths", "a quarter of a percentage point").
- dates, clock times, quarters, decades and dosing frequencies by :mod:`ragrouter.evaluation.when`
  (dateparser and its glue): "5 March 1994", "03/05/1994" (both readings), "14:30 UTC", "1430Z",
  "half past five", "Q3 FY2024", "the 1990s", "twice daily".
- money: currencies, scale words ("$1.2 billion" = "1,200 million"), scale stated for a whole
  table ("in thousands", "USD thousands"), accounting negatives ("(1,234)"), ranges whose first
  end borrows the second's scale and unit ("$1.1–1.2 billion", "7 to 10 days").
- numbers inside names ("Windows 11", "Python 3.10", "COVID-19") as the name, compared as text.

Parts of the text are read once: each pass blanks what it read. A number followed by a word
that looks like a unit but that pint cannot read ("20 gtt/min") is kept with ``unread`` set, so
the rule can abstain instead of guessing.
"""

from __future__ import annotations

import dataclasses
import re

from text_to_num import alpha2digit

from ragrouter.evaluation import units as un
from ragrouter.evaluation.figure_types import Name, Num
from ragrouter.evaluation.when import DATE_TIME_PASSES, MONTH_PATTERN, MONTHS, QUARTER_PASSES
from ragrouter.evaluation.when import small as _small


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
    # text2num keeps "one" and "two" as words: as an hour of a clock time they are digits ("half past two")
    text = re.sub(r"\b(past|after|to|before)\s+(one|two)\b(?=\s*(?:$|[.,;!?)]|o'clock|[ap]\.?m\.?(?![a-z])|in the|"
                  r"at night|utc|gmt|local))|\b(one|two)(?=\s*(?:o'clock|[ap]\.?m\.?(?![a-z])))",
                  lambda m: (f"{m.group(1)} {1 if m.group(2).lower() == 'one' else 2}" if m.group(1)
                             else str(1 if m.group(3).lower() == "one" else 2)), text, flags=re.I)
    text = _SMALL_BEFORE_UNIT.sub(lambda m: (str(int(_small(m.group(1)))) + m.group(2))
                                  if un.read_after(m.string[m.end():]) else m.group(0), text)
    return _ORD.sub(lambda m: "1st" if m.group(1).lower() == "first" else "2nd", text)


# --------------------------------------------------------------------------- the passes

_NAME = re.compile(r"\b([A-Z][A-Za-z]*(?:[A-Z][A-Za-z]*)?)(?:\s|-)(\d+(?:\.\d+)*)\b(?![.,]\d)(?!\s*%)")
_FLIGHT_LEVEL = re.compile(r"\b(?:FL\s?|flight\s+level\s+)(\d{2,3})\b", re.I)
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
    if word.lower() in ("utc", "gmt") and m.group(0)[len(word):len(word) + 1] == "-":  # "GMT-05:00": an offset
        return None
    if word.lower() in _NAME_STOP or word.lower().rstrip(".") in MONTHS or re.fullmatch(MONTH_PATTERN, word, re.I) \
            or word.lower() in _WEEKDAYS or word.lower() in _CURRENCY or un.parse(word) is not None:
        return None
    if un.read_after(text[m.end():]) is not None:  # "Room 12 m" is a length, not a name
        return None
    return Name(f"{word.lower()} {m.group(2)}")


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
    for pattern, fn in ((_FLIGHT_LEVEL, _read_flight_level), *QUARTER_PASSES, (_NAME, _names), *DATE_TIME_PASSES,
                        (_COMPOUND, _read_compound), (_RANGE_YEARS, _read_year_range), (_FRAC_TOKEN, _read_fraction),
                        (_SLASH, _read_slash)):
        text, found = _scan(text, pattern, fn)
        figs.extend(_flatten([(f,) if not isinstance(f, tuple) else f for f in found]))
    text, found = _read_numbers(text, table)
    figs.extend(found)
    return figs
