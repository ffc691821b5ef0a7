"""Colours every figure uses, chosen to stay apart for readers with a colour-vision deficiency.

* :data:`CATEGORICAL`: the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"), for
  routers, paradigms and corpora. Every pair stays at least ΔE*ab 15 apart under simulated
  protanopia, deuteranopia and tritanopia (tests/test_figures_palette.py); matplotlib's ``tab10``,
  used before, put orange and green 5 apart for a protanope. Past eight series a hatch pattern
  (:func:`hatch`) tells the repeated colours apart.
* :data:`OUTCOME`: correct / incorrect / no answer (Table 13's bars): blue, vermillion and grey,
  which differ in hue for red–green deficient readers (the former green/red pair did not).
* :data:`SEQUENTIAL`: ``cividis``, the colour map made for colour-vision deficiency (Nuñez et al.
  2018), for every heat map; :func:`text_color` picks black or white text for a cell.
"""

from __future__ import annotations

OKABE_ITO = {
    "blue": "#0072B2", "orange": "#E69F00", "bluish green": "#009E73", "vermillion": "#D55E00",
    "sky blue": "#56B4E9", "reddish purple": "#CC79A7", "yellow": "#F0E442", "black": "#000000",
}
CATEGORICAL: tuple[str, ...] = tuple(OKABE_ITO.values())
OUTCOME = {"correct": OKABE_ITO["blue"], "incorrect": OKABE_ITO["vermillion"], "no answer": "#BBBBBB"}
SEQUENTIAL = "cividis"
HATCHES = ("", "//", "..", "xx")


def color(i: int) -> str:
    """The ``i``-th categorical colour (cycling after eight)."""
    return CATEGORICAL[i % len(CATEGORICAL)]


def hatch(i: int) -> str:
    """The hatch of the ``i``-th series: none for the first eight, then a pattern per cycle."""
    return HATCHES[(i // len(CATEGORICAL)) % len(HATCHES)]


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(rgb) -> float:
    """WCAG relative luminance of an RGB(A) colour given as floats in [0, 1] or a '#rrggbb' string."""
    if isinstance(rgb, str):
        h = rgb.lstrip("#")
        rgb = tuple(int(h[k:k + 2], 16) / 255 for k in (0, 2, 4))
    r, g, b = (_linear(float(c)) for c in tuple(rgb)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def text_color(background) -> str:
    """Black or white, whichever contrasts more with ``background`` (WCAG contrast ratio)."""
    lum = luminance(background)
    return "black" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "white"
