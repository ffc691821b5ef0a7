"""Units of the figures rule read and converted by pint (:mod:`ragrouter.evaluation.figures_read`).

A unit written after a number ("mg", "micrograms", "mcg", "mg/kg", "mL per hour", "knots",
"km/h", "feet", "hPa", "°C", "basis points") is parsed by pint's unit registry and the figure
converted to base units, so "0.05 mg" and "50 µg", "145 kt" and "268.5 km/h", "1.5 percentage
points" and "150 bp" are the same value, and "145 mph" or "2 km" against "145 knots" or "2 NM"
are not. What is hand-written here is the glue pint lacks or reads otherwise (each line says
why, docs/explanation/judge.md lists them): finance's points, aviation's abbreviations, spelled-out
temperature scales, and English words that pint would read as units ("a" is a year, "at" a
technical atmosphere, "in" an inch).

pint is imported on first use (about 0.35 s with its registry, measured on the 2-core machine
under load): ``cli.py`` imports the judge for every command, and most commands read no figure.
"""

from __future__ import annotations

import dataclasses
import functools
import re

# pint's definitions for what it lacks (finance points, aviation and clinical abbreviations)
_DEFINITIONS = (
    "basis_point = 1e-4 = bp = bps",          # pint: "bp" is a typographic big point, "bps" baud
    "percentage_point = 0.01 = pp = ppt",     # a difference of percentages: numerically a percent
    "@alias nautical_mile = NM",              # pint has "nmi" only ("nm" is a nanometre)
    "international_unit = [iu] = IU",         # an activity, not convertible to mass
    "milliequivalent = [meq] = mEq",
    "beat = [beat]",
    "bpm = beat / minute",
    "fpm = foot / minute",
    "flight_level = 100 * foot = FL",         # "FL350" is 35,000 ft (glue reads the form)
    "USG = gallon",
)
# written forms pint does not parse, as pint expressions (spelled-out scales, plural phrases)
_ALIASES = {
    "degrees celsius": "degC", "degree celsius": "degC", "celsius": "degC", "°c": "degC", "ºc": "degC",
    "degrees c": "degC", "deg c": "degC", "degrees fahrenheit": "degF", "degree fahrenheit": "degF",
    "fahrenheit": "degF", "°f": "degF", "ºf": "degF", "degrees f": "degF",
    "nautical miles": "NM", "nautical mile": "NM", "nm": "NM", "statute miles": "mile", "statute mile": "mile",
    "basis points": "bp", "basis point": "bp", "bps": "bp", "bp": "bp",
    "percentage points": "pp", "percentage point": "pp", "percent points": "pp", "pts": "pp", "ppts": "pp",
    "%": "percent", "per cent": "percent", "pc": "percent",
    "tonnes": "metric_ton", "tonne": "metric_ton", "metric tons": "metric_ton",
    "mcg": "microgram", "µg": "microgram", "μg": "microgram", "ug": "microgram",
    "kts": "knot", "kt": "knot", "kn": "knot", "kias": "knot", "ktas": "knot",
    "lbs": "pound", "lb": "pound", "cc": "cubic_centimeter", "beats per minute": "bpm",
    "us gallons": "gallon", "litres": "liter", "litre": "liter", "metres": "meter", "metre": "meter",
    "hrs": "hour", "hr": "hour", "mins": "minute", "secs": "second", "sec": "second",
    "yrs": "year", "yr": "year", "wk": "week", "wks": "week",
}
# English words pint reads as units: never a unit here
_NOT_UNITS = frozenset("""a an at in are as is it c e k u b point points line lines link links rod rods pole poles perch
chain chains turn turns cycle cycles light sun earth force board number count to or and of on the by for from with
pi mil tex ha gal bar bars cup cups pint pints quart quarts barrel barrels stone stones grain grains dram drams
gauge speed gravity atomic cal g0 e0 ft0 hand hands span spans last shake lambert franklin gilbert planck dozen
degree degrees""".split())
# a dozen is a count word for text2num; "degrees" alone is an angle only when a compass heading follows
_A_TIME = re.compile(r"\s+(?:an?|each|every)\s+(second|minute|hour|day|week|month|year)\b", re.I)
_TOKEN = re.compile(r"[^\s,;:()\[\]\d][^\s,;:()\[\]]*")
MAX_TOKENS = 6  # "micrograms per kilogram per minute"


@dataclasses.dataclass(frozen=True)
class Unit:
    """A unit read after a number: its pint expression, its dimension key and how it converts."""

    expr: str           # pint's unit expression ("milligram / kilogram")
    dim: str            # a key: equal keys are comparable ("[length]", "ratio", "[mass]^-1 [mass]^1", "temperature")


@functools.lru_cache(maxsize=1)
def registry():
    """pint's unit registry with the definitions above (built once)."""
    import pint  # deferred: see the module docstring

    ureg = pint.UnitRegistry(autoconvert_offset_to_baseunit=True)
    for line in _DEFINITIONS:
        ureg.define(line)
    return ureg


_RATIO = {"percent", "basis_point", "percentage_point", "ppm", "permille"}


def _dim_key(ureg, units) -> str:
    names = dict(units._units)
    if set(names) <= _RATIO:
        return "ratio"
    dim = ureg.get_dimensionality(units)
    if not dim:  # mg/kg, mL/L: keep what is divided by what ("[mass]/[mass]"), not a bare number
        return " ".join(sorted(f"{ureg.get_dimensionality(name)}^{power:g}" for name, power in names.items()))
    if str(dim) == "[temperature]":
        return "temperature"
    return str(dim)


@functools.lru_cache(maxsize=4096)
def parse(written: str) -> Unit | None:
    """The unit of one written form ("mg/kg", "milligrams per kilogram", "knots"), or None when
    pint cannot read it or it is an English word that pint would misread."""
    key = re.sub(r"\s+", " ", written.strip().strip(".")).lower()
    if not key or key in _NOT_UNITS:
        return None
    expr = _ALIASES.get(key)
    if expr is None:
        words = key.split(" ")
        if any(w in _NOT_UNITS for w in words if w not in ("per",)):
            return None
        expr = re.sub(r"\s+per\s+", " / ", written.strip().strip("."))
        if " " in expr.replace(" / ", "/"):  # two unit words not joined by "per": no unit
            return None
        expr = " / ".join(_ALIASES.get(p.strip().lower(), p.strip()) for p in expr.split("/"))
    ureg = registry()
    try:
        units = ureg.parse_units(expr)
    except Exception:  # noqa: BLE001 — pint raises several kinds for an unknown unit
        return None
    if not units._units:
        return None
    return Unit(str(units), _dim_key(ureg, units))


def _per_day_dropped(unit: Unit) -> Unit | None:
    ureg = registry()
    units = ureg.parse_units(unit.expr) * ureg.parse_units("day")
    return Unit(str(units), _dim_key(ureg, units)) if units._units else None


@functools.lru_cache(maxsize=1024)
def factor(expr: str) -> float:
    """How many base units one ``expr`` is (two names of one unit have the same factor)."""
    return float(registry().Quantity(1.0, expr).to_base_units().magnitude)


def to_base(value: float, unit: Unit) -> float:
    """``value`` in ``unit`` as a magnitude in pint's base units (kelvin for a temperature)."""
    ureg = registry()
    return float(ureg.Quantity(value, unit.expr).to_base_units().magnitude)


def read_after(text: str) -> tuple[Unit, int] | None:
    """The unit that starts ``text`` (after optional space) and how many characters it takes: the
    longest run of up to :data:`MAX_TOKENS` words pint reads ("milligrams per kilogram of body
    weight" → "milligrams per kilogram")."""
    pos, spans = 0, []
    m = re.match(r"\s?", text)
    pos = m.end()
    for tok in _TOKEN.finditer(text, pos):
        if tok.start() != pos or len(spans) >= MAX_TOKENS:
            break
        word = tok.group(0).rstrip(".").rstrip("'’")
        spans.append((tok.start(), tok.start() + len(word)))
        pos = tok.end()
        nxt = re.match(r" ", text[pos:])
        if not nxt:
            break
        pos += 1
    start = re.match(r"\s?", text).end()
    for k in range(len(spans), 0, -1):
        end = spans[k - 1][1]
        unit = parse(text[start:end])
        rate = _A_TIME.match(text, end)
        if unit is not None and rate:  # "2.4 tonnes an hour" is 2.4 tonnes per hour
            per = parse(f"{text[start:end]} per {rate.group(1)}")
            if per is not None:
                unit, end = per, rate.end()
        if unit is not None and registry().parse_units(unit.expr)._units.get("day") == -1:
            unit = _per_day_dropped(unit)  # "4,000 mg per day", "5 mg/kg/day": a daily dose of 4 g, of 5 mg/kg
        if unit is not None:
            return unit, end
    return None


def looks_like_unit(word: str) -> bool:
    """A word after a number that reads as a unit abbreviation pint does not know ("gtt/min",
    "KXYZ"): upper-case letters after the first, a slash, a degree or micro sign.
    The figures rule abstains rather than guess such a figure's value."""
    w = word.strip(".,;:()")
    if not w or w.lower() in _NOT_UNITS or not any(ch.isalpha() for ch in w):
        return False
    return "/" in w or "°" in w or "µ" in w or (len(w) >= 2 and any(ch.isupper() for ch in w[1:]))
