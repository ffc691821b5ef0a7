"""The report's figures read for colour-vision deficient readers, and Fig. 5's bound labels do not
print on top of each other.

Colour-vision deficiency is simulated with the matrices of Machado, Oliveira & Fernandes (2009,
"A physiologically-based model for simulation of color vision deficiency", severity 1.0) on
linear sRGB; colours are compared by CIE76 ΔE*ab in CIELAB (D65)."""

from __future__ import annotations

import itertools

import matplotlib
import matplotlib.text
import numpy as np
import pandas as pd
import pytest

from ragrouter import palette
from ragrouter.report import figures

MACHADO = {
    "normal": np.eye(3),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}
SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])
D65 = np.array([0.95047, 1.0, 1.08883])
MIN_DELTA_E = 15.0  # tab10, used before, had pairs 4.6 (protanopia) and 7.2 (deuteranopia) apart


def _lab(color, vision: str) -> np.ndarray:
    rgb = np.asarray(matplotlib.colors.to_rgb(color), dtype=float)
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = SRGB_TO_XYZ @ np.clip(MACHADO[vision] @ linear, 0, 1)
    t = xyz / D65
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _closest_pair(colors, vision: str) -> tuple[float, str, str]:
    return min((float(np.linalg.norm(_lab(a, vision) - _lab(b, vision))), a, b)
               for a, b in itertools.combinations(colors, 2))


def test_the_simulation_reproduces_the_known_confusions():
    """A check of the test itself: a protanope or deuteranope loses the red-green axis (pure
    red and a green of equal lightness fall together), a tritanope the blue-yellow one."""
    red_green = ("#e41a1c", "#4daf4a")
    chroma = {v: float(np.hypot(*(_lab(red_green[0], v) - _lab(red_green[1], v))[1:])) for v in MACHADO}
    assert chroma["normal"] > 100 and chroma["deuteranopia"] < 25 and chroma["protanopia"] < 25
    assert _closest_pair(["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                          "#7f7f7f", "#bcbd22", "#17becf"], "protanopia")[0] < 5  # tab10's orange and green


@pytest.mark.parametrize("vision", list(MACHADO))
def test_every_pair_of_series_colours_stays_apart(vision):
    d, a, b = _closest_pair(palette.CATEGORICAL, vision)
    assert d >= MIN_DELTA_E, f"{a} and {b} are {d:.1f} apart under {vision}"
    d, a, b = _closest_pair(list(palette.OUTCOME.values()), vision)
    assert d >= MIN_DELTA_E, f"{a} and {b} are {d:.1f} apart under {vision}"


@pytest.mark.parametrize("vision", ["protanopia", "deuteranopia"])
def test_correct_and_incorrect_differ_in_hue_not_only_in_lightness(vision):
    """Table 13's correct/incorrect pair was green/red: under red-green deficiency the two kept only
    their lightness difference; now they sit on opposite sides of the blue-yellow axis."""
    lab_c, lab_i = _lab(palette.OUTCOME["correct"], vision), _lab(palette.OUTCOME["incorrect"], vision)
    assert float(np.hypot(*(lab_c - lab_i)[1:])) >= 60


@pytest.mark.parametrize("vision", list(MACHADO))
def test_the_heat_map_colour_map_rises_in_lightness_for_every_reader(vision):
    cmap = matplotlib.colormaps[palette.SEQUENTIAL]
    lightness = [_lab(cmap(x), vision)[0] for x in np.linspace(0, 1, 17)]
    assert all(b > a for a, b in zip(lightness, lightness[1:])), lightness
    assert lightness[-1] - lightness[0] > 60


def test_cell_text_contrasts_with_its_background():
    assert palette.text_color("#000000") == "white" and palette.text_color("#ffffff") == "black"
    assert palette.text_color(matplotlib.colormaps["cividis"](0.0)) == "white"
    assert palette.text_color(matplotlib.colormaps["cividis"](1.0)) == "black"


def _bars(fig) -> list:
    return [p for ax in fig.axes for p in ax.patches]


def test_the_figures_draw_with_the_palette():
    bd = pd.DataFrame([{"corpus": c, "paradigm": p, "qtype": "all", "correct_pct": 40.0, "incorrect_pct": 35.0,
                        "incomplete_pct": 25.0, "n": 20} for c in ("a", "b") for p in ("naive", "graph", "llm_only")])
    fig = figures.breakdown_bars(bd)
    used = {matplotlib.colors.to_hex(p.get_facecolor()).lower() for p in _bars(fig)}
    assert used == {c.lower() for c in palette.OUTCOME.values()}
    figures.plt.close(fig)
    scores = pd.DataFrame([{"router": r, "features": f, "routing_accuracy": 40.0, "correct_rate": 50.0}
                           for r in ("lr", "mlp", "svm", "xgboost", "dnn", "two_tower", "adaptive_rag", "mba_rag",
                                     "router_dc") for f in ("q", "qc")])
    fig = figures.routing_bounds(scores, {"Random": {"routing_accuracy": 11.1, "correct_rate": 30.0}})
    faces = [matplotlib.colors.to_hex(p.get_facecolor()).lower() for p in fig.axes[0].patches]
    assert set(faces) == {c.lower() for c in palette.CATEGORICAL}  # nine routers: all eight, one repeated...
    hatched = {(f, p.get_hatch() or "") for f, p in zip(faces, fig.axes[0].patches)}
    assert len({h for h in hatched}) == 9  # ...and told apart by its hatch
    figures.plt.close(fig)
    acc = pd.DataFrame([{"paradigm": "naive", "qtype": "factual", "corpus": "a", "correct_pct": 50.0, "ci_low": 40.0,
                         "ci_high": 60.0, "n": 10}])
    fig = figures.accuracy_heatmaps(acc)
    assert fig.axes[0].images[0].get_cmap().name.startswith(palette.SEQUENTIAL)
    figures.plt.close(fig)


def _text_boxes(fig, texts):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # the text's own box (an Annotation's extent would include its leader line)
    return [(t.get_text(), matplotlib.text.Text.get_window_extent(t, renderer)) for t in texts]


@pytest.mark.parametrize("random_cr,oracle_cr", [(33.3, 33.3), (33.3, 35.0), (100.0, 100.0), (0.0, 0.0)])
def test_fig5_bound_labels_do_not_overlap(random_cr, oracle_cr):
    """'Random 33.3' and 'Oracle 33.3' were both printed at the line's height at the same x: one
    over the other. Now each sits right of the panel at its line, moved apart where lines are
    close (also at the top and bottom of the scale), and none touches the legend or a panel."""
    scores = pd.DataFrame([{"router": r, "features": f, "routing_accuracy": 30.0 + k, "correct_rate": 33.3}
                           for k, r in enumerate(("lr", "mlp", "xgboost")) for f in ("q", "c", "qc")])
    bounds = {"Random": {"routing_accuracy": 33.3, "correct_rate": random_cr},
              "Oracle": {"routing_accuracy": 100.0, "correct_rate": oracle_cr}, "_source": "baselines"}
    fig = figures.routing_bounds(scores, bounds)
    labels = [t for ax in fig.axes for t in ax.texts if t.get_text().startswith(("Random", "Oracle"))]
    assert sorted(t.get_text() for t in labels) == sorted([f"Random {33.3:.1f}", f"Oracle {100.0:.1f}",
                                                           f"Random {random_cr:.1f}", f"Oracle {oracle_cr:.1f}"])
    boxes = _text_boxes(fig, labels)
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), f"{ta!r} overlaps {tb!r}"
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    for text, box in boxes:
        assert not box.overlaps(legend), f"{text!r} overlaps the legend"
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), f"{text!r} lies on a panel"
    figures.plt.close(fig)


def test_no_figure_code_picks_its_own_colours():
    """Every matplotlib figure of the package takes its colours from ragrouter.palette: no other
    colour map, no tab10 colour, no hue named in a color= argument, no hex colour but a grey."""
    import re
    from pathlib import Path

    root = Path(palette.__file__).parent
    banned = re.compile(r"""colormaps\[\s*["'](?!cividis)|cmap\s*=\s*["']|["']tab:(?!gr[ae]y)|"""
                        r"""colou?r\s*=\s*["'](red|green|blue|orange|purple|yellow|brown|pink|cyan|magenta)["']""")
    hexes = re.compile(r"""["']#([0-9a-fA-F]{6})["']""")
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        if "matplotlib" not in text or path.name == "palette.py":
            continue
        for no, line in enumerate(text.splitlines(), 1):
            greys_only = all(h[0:2] == h[2:4] == h[4:6] for h in hexes.findall(line))
            if banned.search(line) or not greys_only:
                found.append(f"{path.relative_to(root)}:{no}: {line.strip()}")
    assert not found, "\n".join(found)


def test_fig5_has_error_bars_and_n_fig6_reads_an_all_zero_panel_fig7_shows_every_star():
    """Fig. 5 drew bars with no N and no interval; Fig. 6 gave an all-zero indicator a 1e-13
    offset axis and no y label; Fig. 7 put the routers that share a point on top of each other."""
    scores = pd.DataFrame([{"router": r, "features": f, "routing_accuracy": 40.0 + k, "correct_rate": 50.0,
                            "routing_accuracy_ci_low": 30.0 + k, "routing_accuracy_ci_high": 52.0 + k,
                            "correct_rate_ci_low": 41.0, "correct_rate_ci_high": 59.0, "n_outcomes": 120}
                           for k, r in enumerate(("lr", "mlp")) for f in ("q", "qc")])
    fig = figures.routing_bounds(scores, {})
    labels = fig.legends[0].get_texts()
    assert sorted(t.get_text() for t in labels) == ["lr (N=120)", "mlp (N=120)"]
    for ax in fig.axes:
        caps = [c for c in ax.collections if isinstance(c, matplotlib.collections.LineCollection)]
        segments = [seg for c in caps for seg in c.get_segments()]
        assert len(segments) == 4  # one error bar per bar
        spans = sorted(round(abs(seg[1][1] - seg[0][1]), 6) for seg in segments)
        assert spans == ([18.0] * 4 if "C.R" in ax.get_title() else [22.0] * 4), spans
    figures.plt.close(fig)

    prof = pd.DataFrame([{"corpus": c, "lcc_ratio": 0.0, "density": 0.0, "clustering": 0.0, "hubness": 1.2}
                         for c in ("a", "b")])
    fig = figures.corpus_profile(prof)
    fig.canvas.draw()
    for ax in fig.axes:
        assert ax.get_ylabel().endswith("(raw)")
        assert ax.yaxis.get_offset_text().get_text() == ""  # no '1e-13' above the axis
        lo, hi = ax.get_ylim()
        if ax.get_title().startswith("LCC"):
            assert hi - lo > 0.3, (lo, hi)  # a plain axis around zero
    figures.plt.close(fig)

    acc = pd.DataFrame([{"corpus": "c", "paradigm": p, "qtype": "all", "avg_tokens": t, "correct_pct": y,
                         "ci_low": y - 5, "ci_high": y + 5} for p, t, y in (("naive", 900.0, 40.0),
                                                                             ("graph", 3000.0, 55.0))])
    routers = pd.DataFrame([{"corpus": "c", "label": f"router {r}", "avg_tokens": 1500.0, "correct_rate": 50.0}
                            for r in ("lr (q)", "lr (qc)", "mlp (qc)")])
    fig = figures.cost_quality(acc, routers)
    ax = fig.axes[0]
    stars = [ln for ln in ax.lines if ln.get_marker() == "*"]
    xs = sorted(float(ln.get_xdata()[0]) for ln in stars)
    assert len(xs) == 3 and all(b / a > 1.1 for a, b in zip(xs, xs[1:])), xs  # side by side, none hidden
    figures.plt.close(fig)
