"""Content words of a text: the one word rule of the judge's evidence gate and of the
calibration cases (kept here so that neither module imports the other)."""

from __future__ import annotations

import re

_STOP = frozenset("""
a an the of in on at to for from by with and or but nor so yet is are was were be been being am
it its it's this that these those as such which who whom whose what when where why how than then
also can cannot may might should would could will shall must do does did done has have had having
not no into onto about over under between during within without per via each any all some other
more most less least very there their they them he she his her him we our you your i me my
""".split())
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")


def content_words(text_: str) -> set[str]:
    """Lower-cased words of ≥ 3 characters that are not function words."""
    return {w for w in (m.group(0).lower().strip("'’-") for m in _WORD.finditer(text_))
            if len(w) >= 3 and w not in _STOP}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if (a or b) else 0.0
