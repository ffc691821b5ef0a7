"""The paper's figures with matplotlib (Agg backend): each function takes view rows and returns
a :class:`matplotlib.figure.Figure`; :func:`save` writes it as PNG (150 dpi) and SVG and closes it.

* :func:`accuracy_heatmaps` — Fig. 4: one panel per paradigm, rows = query types, columns =
  corpora, colour = % correct; each cell prints the %, its 95 % Wilson interval and N, and
  ``*`` on the best paradigm of each (type, corpus) cell.
* :func:`routing_bounds` — Fig. 5: R.A and C.R per feature configuration for each router, with the
  Random and Oracle bounds as lines.
* :func:`corpus_profile` — Fig. 6: one small panel per indicator with the RAW value of each
  corpus (works for one corpus; negative values go below a zero line; a missing value is marked).
* :func:`cost_quality` — Fig. 7: average tokens per query (log x) against % correct with Wilson
  error bars, one panel per corpus, a labelled point per paradigm and router, none hidden.
* :func:`calibration_heatmaps` — the judge calibration as confusion-matrix heat maps.
* :func:`breakdown_bars` — Table 13 as stacked bars (correct / incorrect / no answer).

Colours come from :mod:`ragrouter.palette` (Okabe–Ito series, cividis heat maps), which
stay apart for colour-vision deficient readers.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ragrouter import palette  # noqa: E402
from ragrouter.evaluation.calibration import LABELS  # noqa: E402
from ragrouter.report.calibration import confusion  # noqa: E402
from ragrouter.report.data import paradigm_order  # noqa: E402
from ragrouter.report.tables import qtype_order  # noqa: E402

STRUCTURAL = [("lcc_ratio", "LCC ratio"), ("density", "Density"), ("clustering", "Clustering"),
              ("avg_degree", "Avg. degree"), ("relation_types", "Rel. types"), ("components", "Components")]
SEMANTIC = [("intrinsic_dim", "Intrinsic dim."), ("hubness", "Hubness"), ("dist_mean", "Avg. distance"),
            ("dist_std", "Std. distance")]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "h", "<", ">"]


def _finite(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _tokens_label(value: float, _pos=None) -> str:
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def save(fig: Figure, path: Path, dpi: int = 150) -> Path:
    """Write ``fig`` as PNG (``path``) and as SVG beside it (same stem), release it; returns the PNG."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, facecolor="white", bbox_inches="tight")  # long titles are not clipped
    fig.savefig(path.with_suffix(".svg"), facecolor="white", bbox_inches="tight")
    plt.close(fig)
    return path


def accuracy_heatmaps(acc: pd.DataFrame, title: str = "") -> Figure:
    """Fig. 4 from ``v_accuracy_by_type`` rows of ONE (generator, judge).

    One panel per paradigm (paper order); rows are query types (without 'all'), columns
    corpora; a cell is the paradigm's % correct, starred where it is the best paradigm for that
    (type, corpus) — ties star every best paradigm, and nothing is starred where no paradigm
    answered anything. Missing cells are grey."""
    acc = acc[acc["qtype"] != "all"]
    paradigms = paradigm_order(acc["paradigm"].unique())
    corpora = sorted(acc["corpus"].unique())
    qtypes = qtype_order(acc["qtype"])
    cube = np.full((len(paradigms), len(qtypes), len(corpora)), np.nan)
    extra: dict[tuple[int, int, int], str] = {}
    for r in acc.itertuples(index=False):
        key = (paradigms.index(r.paradigm), qtypes.index(r.qtype), corpora.index(r.corpus))
        cube[key] = r.correct_pct
        lo, hi, n = getattr(r, "ci_low", None), getattr(r, "ci_high", None), getattr(r, "n", None)
        if _finite(lo) and _finite(hi):
            extra[key] = f"\n[{lo:.0f}–{hi:.0f}]" + (f"\nn={int(n)}" if _finite(n) else "")
    with np.errstate(all="ignore"):
        best = np.nanmax(np.where(np.isnan(cube), -np.inf, cube), axis=0)
    ncols = min(len(paradigms), 3)
    nrows = math.ceil(len(paradigms) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.0 + 1.3 * len(corpora) * ncols + 0.8, 0.6 + 1.0 * len(qtypes) * nrows + 0.6),
                             squeeze=False, layout="constrained")
    cmap = matplotlib.colormaps[palette.SEQUENTIAL].with_extremes(bad="#d9d9d9")
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= len(paradigms):
            fig.delaxes(ax)
            continue
        grid = cube[k]
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=100, aspect="auto")
        for i in range(len(qtypes)):
            for j in range(len(corpora)):
                v = grid[i, j]
                if np.isnan(v):
                    text = "–"
                else:
                    text = f"{v:.1f}" + ("*" if v == best[i, j] and v > 0 else "") + extra.get((k, i, j), "")
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="black" if np.isnan(v) else palette.text_color(cmap(v / 100)))
        ax.set_title(paradigms[k], fontsize=10)
        ax.set_xticks(range(len(corpora)), corpora, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(qtypes)), qtypes if k % ncols == 0 else [""] * len(qtypes), fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=[a for a in axes.flat if a in fig.axes], shrink=0.8,
                     label="% correct")
    fig.suptitle(title or "Accuracy by paradigm, query type and corpus (* = best paradigm)", fontsize=11)
    return fig


def routing_bounds(scores: pd.DataFrame, bounds: dict[str, dict[str, float]], title: str = "") -> Figure | None:
    """Fig. 5 from ``v_router_scores`` rows of ONE (dataset, generator, judge): two panels (R.A %,
    C.R %), x = feature configuration, one bar per router (baselines excluded), and horizontal
    lines for the bounds ``{'Random': {'routing_accuracy': …, 'correct_rate': …}, 'Oracle': …}``.
    The value is printed on every bar; where the rows carry ``<metric>_ci_low`` / ``_ci_high``
    (95 % Wilson intervals of the pooled CV predictions, same unit) each bar has its error bar,
    and the legend gives each router's N (its CV predictions, ``n_outcomes``). Returns None
    without routers."""
    s = scores[~scores["router"].isin(["random", "oracle", "best_fixed"])]
    if s.empty:
        return None
    features = sorted(s["features"].unique())
    routers = sorted(s["router"].unique())
    metrics = [("routing_accuracy", "R.A %")]
    if s["correct_rate"].notna().any():
        metrics.append(("correct_rate", "C.R %"))
    # panels one above the other, 0.5 in per bar: side by side at 0.6 in per bar, 5 routers on
    # 3 feature sets made a 24-inch strip whose 6-8 pt labels no page could show readably
    fig, axes = plt.subplots(len(metrics), 1, figsize=(max(5.0, 0.5 * len(features) * max(len(routers), 1) + 2.5),
                                                      3.4 * len(metrics) + 0.8), squeeze=False)
    width = 0.8 / max(len(routers), 1)
    bound_lines = []  # (panel, [(value, label)]): named once the layout is known (below)
    for ax, (col, lab) in zip(axes[:, 0], metrics):
        x = np.arange(len(features))
        for i, router in enumerate(routers):
            vals, lows, highs = [], [], []
            for f in features:
                part = s[(s["router"] == router) & (s["features"] == f)]
                r = part[col]
                vals.append(float(r.mean()) if r.notna().any() else np.nan)
                lo_c, hi_c = part.get(f"{col}_ci_low"), part.get(f"{col}_ci_high")
                ok = lo_c is not None and hi_c is not None and lo_c.notna().any() and hi_c.notna().any()
                lows.append(float(lo_c.mean()) if ok else np.nan)
                highs.append(float(hi_c.mean()) if ok else np.nan)
            xs = x + (i - (len(routers) - 1) / 2) * width
            label = router
            if "n_outcomes" in s.columns:
                ns = sorted({int(n) for n in s[s["router"] == router]["n_outcomes"].dropna()})
                if ns:
                    label = f"{router} (N={ns[0]})" if len(ns) == 1 else f"{router} (N={ns[0]}–{ns[-1]})"
            bars = ax.bar(xs, np.nan_to_num(vals), width, label=label, color=palette.color(i), hatch=palette.hatch(i),
                          edgecolor="white", linewidth=0.5)
            err = np.array([[max(0.0, v - lo) if np.isfinite(lo) and np.isfinite(v) else 0.0 for v, lo in zip(vals, lows)],
                            [max(0.0, hi - v) if np.isfinite(hi) and np.isfinite(v) else 0.0 for v, hi in zip(vals, highs)]])
            if err.any():
                ax.errorbar(xs, np.nan_to_num(vals), yerr=err, fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
            for bar, v, hi in zip(bars, vals, highs):
                top = (0 if np.isnan(v) else v) if not np.isfinite(hi) else hi
                ax.text(bar.get_x() + bar.get_width() / 2, top + 1.0,
                        "n/a" if np.isnan(v) else f"{v:.1f}", ha="center", va="bottom", fontsize=6, rotation=90)
        named = [(name, b) for name, b in bounds.items() if not name.startswith("_")]  # "_source" is a note
        lines = []
        for (name, b), style in zip(named, ("--", ":", "-.")):
            v = b.get(col)
            if v is not None and _finite(v):
                ax.axhline(v, linestyle=style, color="black" if name == "Oracle" else "grey", linewidth=1.2)
                lines.append((float(v), f"{name} {v:.1f}"))
        ax.set_xticks(x, features, fontsize=8)
        ax.set_xlabel("feature configuration", fontsize=8)
        ax.set_ylabel(lab, fontsize=8)
        ax.set_ylim(0, 118)
        ax.set_title(lab + (" (95 % Wilson interval; N = CV predictions)" if "n_outcomes" in s.columns else ""),
                     fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        bound_lines.append((ax, lines))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=7, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(title or "Routing accuracy and correct rate per feature configuration", fontsize=11)
    bottom = (0.05 + 0.22 * math.ceil(len(labels) / 5)) / fig.get_figheight()  # the legend's rows, in inches
    fig.tight_layout(rect=(0, bottom, 1, 1))
    for ax, lines in bound_lines:
        _label_lines(ax, lines)
    return fig


def _label_lines(ax, lines: list[tuple[float, str]], gap_pt: float = 10.0) -> None:
    """Name horizontal lines at the right edge of ``ax``, outside the plot: each label at its
    line's height, moved apart (with a leader) where lines lie closer than ``gap_pt`` points,
    e.g. a Random and an Oracle bound of the same value."""
    if not lines:
        return
    lo, hi = ax.get_ylim()
    height_pt = ax.get_window_extent().height * 72.0 / ax.figure.dpi
    gap = gap_pt / max(height_pt, 1.0) * (hi - lo)
    lines = sorted(lines)
    ys: list[float] = []
    for v, _ in lines:
        ys.append(v if not ys else max(v, ys[-1] + gap))
    shift = max(0.0, ys[-1] - (hi - gap / 2))  # keep the top label inside the axes' height
    ys = [y - shift for y in ys]
    for k in range(len(ys) - 2, -1, -1):  # a shift down must not push labels onto each other
        ys[k] = min(ys[k], ys[k + 1] - gap)
    for (v, text), y in zip(lines, ys):
        moved = abs(y - v) > 1e-9
        ax.annotate(text, xy=(1.0, v), xycoords=("axes fraction", "data"), xytext=(1.03, y),
                    textcoords=("axes fraction", "data"), va="center", ha="left", fontsize=7, annotation_clip=False,
                    arrowprops=dict(arrowstyle="-", linewidth=0.5, color="grey", shrinkA=0, shrinkB=0) if moved else None)


def calibration_heatmaps(df: pd.DataFrame, title: str = "") -> Figure | None:
    """The judge calibration (``v_judge_calibration`` rows) as one confusion-matrix heat map per
    (judge, case set): rows = true label, columns = verdict, colour = share of the row, each cell
    prints the count and the share. Returns None without calibration rows."""
    if df.empty:
        return None

    blocks = list(df.groupby(["judge", "case_set"], sort=True))
    fig, axes = plt.subplots(1, len(blocks), figsize=(3.8 * len(blocks) + 0.8, 3.6), squeeze=False, layout="constrained")
    image = None
    for ax, ((judge, case_set), block) in zip(axes[0], blocks):
        m = np.array(confusion(block), dtype=float)
        rows = m.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(rows > 0, m / rows, np.nan)
        cmap = matplotlib.colormaps[palette.SEQUENTIAL].with_extremes(bad="#d9d9d9")
        image = ax.imshow(np.ma.masked_invalid(share), cmap=cmap, vmin=0, vmax=1)
        for i in range(len(LABELS)):
            for j in range(len(LABELS)):
                sh = share[i, j]
                ax.text(j, i, f"{int(m[i, j])}\n{'' if np.isnan(sh) else f'{100 * sh:.0f}%'}", ha="center",
                        va="center", fontsize=8, color="black" if np.isnan(sh) else palette.text_color(cmap(sh)))
        ax.set_xticks(range(len(LABELS)), LABELS, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(LABELS)), LABELS, fontsize=8)
        ax.set_xlabel("verdict", fontsize=8)
        ax.set_ylabel("true label", fontsize=8)
        ax.set_title(f"{judge}\n({case_set})", fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=list(axes[0]), shrink=0.8, label="share of the true label")
    fig.suptitle(title or "Judge calibration: confusion matrices", fontsize=11)
    return fig


BREAKDOWN = [("correct_pct", "correct", palette.OUTCOME["correct"]),
             ("incorrect_pct", "incorrect", palette.OUTCOME["incorrect"]),
             ("incomplete_pct", "no answer", palette.OUTCOME["no answer"])]


def breakdown_bars(bd: pd.DataFrame, title: str = "") -> Figure | None:
    """Table 13 from ``v_judgment_breakdown`` rows of ONE (generator, judge): one panel per corpus,
    a stacked bar (correct / incorrect / no answer, %) per paradigm over all query types, with
    the share printed in each segment and N under the bar. Returns None without rows."""
    allrows = bd[bd["qtype"] == "all"]
    if allrows.empty:
        return None
    corpora = sorted(allrows["corpus"].unique())
    paradigms = paradigm_order(allrows["paradigm"].unique())
    ncols = min(len(corpora), 3)
    nrows = math.ceil(len(corpora) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(0.9 * len(paradigms) * ncols + 1.5, 3.6 * nrows + 0.4), squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(corpora):
            fig.delaxes(ax)
            continue
        part = allrows[allrows["corpus"] == corpora[k]].set_index("paradigm")
        x = np.arange(len(paradigms))
        bottom = np.zeros(len(paradigms))
        for col, lab, color in BREAKDOWN:
            vals = np.array([float(part.loc[p, col]) if p in part.index else 0.0 for p in paradigms])
            ax.bar(x, vals, 0.7, bottom=bottom, color=color, label=lab, edgecolor="white", linewidth=0.5)
            for xi, (b, v) in enumerate(zip(bottom, vals)):
                if v >= 8:
                    ax.text(xi, b + v / 2, f"{v:.0f}", ha="center", va="center", fontsize=7,
                            color=palette.text_color(color))
            bottom += vals
        labels = [f"{p}\nn={int(part.loc[p, 'n'])}" if p in part.index else f"{p}\n–" for p in paradigms]
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of judged runs", fontsize=8)
        ax.set_title(corpora[k], fontsize=10)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(title or "Judgment breakdown", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def _raw_label(raw: float) -> str:
    if abs(raw) >= 100:
        return f"{raw:,.0f}"
    if raw != 0 and abs(raw) < 0.01:
        return f"{raw:.2e}"
    return f"{raw:.3g}"


def corpus_profile(prof: pd.DataFrame, title: str = "") -> Figure | None:
    """Fig. 6 from ``v_corpus_profile``: one small panel per measured indicator (structural, then
    semantic) with one bar per corpus at its RAW value, printed on the bar. One corpus works; a
    negative value is drawn below the zero line; a missing value (NaN) is marked "n/a" at zero
    (an indicator no corpus has yet gets a panel of n/a). Returns None when no indicator has
    been measured at all."""
    cols = [(c, lab, kind) for kind, group in (("structural", STRUCTURAL), ("semantic", SEMANTIC))
            for c, lab in group if c in prof.columns]
    if prof.empty or not any(pd.to_numeric(prof[c], errors="coerce").notna().any() for c, _, _ in cols):
        return None
    prof = prof.sort_values("corpus").reset_index(drop=True)
    corpora = list(prof["corpus"])
    ncols = min(len(cols), 5)
    nrows = math.ceil(len(cols) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(2.2, 0.55 * len(corpora) + 1.2) * ncols, 2.6 * nrows + 0.8),
                             squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(cols):
            fig.delaxes(ax)
            continue
        c, lab, kind = cols[k]
        values = pd.to_numeric(prof[c], errors="coerce").to_numpy(float)
        x = np.arange(len(corpora))
        bars = ax.bar(x, np.nan_to_num(values), 0.7, color=[palette.color(i) for i in range(len(corpora))],
                      edgecolor="white", linewidth=0.5)
        for i, b in enumerate(bars):
            b.set_hatch(palette.hatch(i))
        finite = values[np.isfinite(values)]
        span = float(np.max(np.abs(finite))) if len(finite) else 0.0
        span = span if span > 0 else 1.0  # an all-zero (or all-n/a) panel gets a plain 0..1 axis, not a 1e-13 one
        lo = min(0.0, float(finite.min()) if len(finite) else 0.0)
        hi = max(0.0, float(finite.max()) if len(finite) else 0.0)
        for bar, raw in zip(bars, values):
            if np.isfinite(raw):
                ax.text(bar.get_x() + bar.get_width() / 2, raw, _raw_label(raw), ha="center",
                        va="bottom" if raw >= 0 else "top", fontsize=7)
            else:
                ax.text(bar.get_x() + bar.get_width() / 2, 0, "n/a", ha="center", va="bottom", fontsize=7,
                        color=palette.OKABE_ITO["vermillion"])
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylim(lo - 0.15 * span, hi + 0.2 * span)
        ax.set_xticks(x, corpora, rotation=30, ha="right", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)  # tick labels as the values, no offset
        ax.set_ylabel(f"{lab} (raw)", fontsize=7)
        ax.set_title(f"{lab} ({kind})", fontsize=8)
    fig.suptitle(title or "Corpus profile (raw indicator values)", fontsize=11)
    fig.tight_layout()
    return fig


STAR_DODGE = 0.08  # log10 step between router stars at one point (a 16-pt star spans ~0.07 decades)


def cost_quality(acc: pd.DataFrame, routers: pd.DataFrame | None = None, title: str = "") -> Figure | None:
    """Fig. 7: one panel per corpus; x = average tokens per query (log; with the amortised graph
    construction), y = % correct with its 95 % Wilson interval as an error bar.

    ``acc`` holds ``v_accuracy_by_type`` rows of one (generator, judge) (its 'all' rows are
    used); ``routers`` optional rows with columns corpus, label, avg_tokens, correct_rate (and
    optional ci_low, ci_high). Every point is labelled with its name; markers are hollow with
    distinct shapes and routers are drawn underneath, so no marker hides another. Returns None
    without data."""
    allrows = acc[acc["qtype"] == "all"]
    if allrows.empty:
        return None
    corpora = sorted(allrows["corpus"].unique())
    paradigms = paradigm_order(allrows["paradigm"].unique())
    ncols = min(len(corpora), 3)
    nrows = math.ceil(len(corpora) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 4.0 * nrows + 0.6), squeeze=False)
    router_labels = sorted(routers["label"].unique()) if routers is not None and not routers.empty else []
    for k, ax in enumerate(axes.flat):
        if k >= len(corpora):
            fig.delaxes(ax)
            continue
        corpus = corpora[k]
        part = allrows[allrows["corpus"] == corpus]
        points = []  # (x, y, label)
        star_at = []  # the routers' own positions, before any is moved aside
        for j, lab in enumerate(router_labels):
            r = routers[(routers["corpus"] == corpus) & (routers["label"] == lab)]
            r = r[r["avg_tokens"].notna() & r["correct_rate"].notna()]
            if r.empty:
                continue
            x, y = max(float(r["avg_tokens"].iloc[0]), 1.0), float(r["correct_rate"].iloc[0])
            err = None
            if "ci_low" in r.columns and _finite(r["ci_low"].iloc[0]):
                err = [[max(0.0, y - float(r["ci_low"].iloc[0]))], [max(0.0, float(r["ci_high"].iloc[0]) - y)]]
            # routers at (almost) the same point: each star moved right by a step, so none hides another
            same = sum(1 for (x2, y2) in star_at if abs(math.log10(x2) - math.log10(x)) < STAR_DODGE
                       and abs(y2 - y) < 2.0)
            star_at.append((x, y))
            x = x * 10 ** (STAR_DODGE * same)
            ax.errorbar(x, y, yerr=err, fmt="*", markersize=16, color=palette.color(len(paradigms) + j), alpha=0.5,
                        markeredgecolor="black", markeredgewidth=0.6, capsize=3, label=lab, zorder=2)
            points.append((x, y, lab))
        for i, p in enumerate(paradigms):
            r = part[part["paradigm"] == p]
            if r.empty:
                continue
            x, y = max(float(r["avg_tokens"].iloc[0]), 1.0), float(r["correct_pct"].iloc[0])
            err = None
            if "ci_low" in r.columns and _finite(r["ci_low"].iloc[0]):
                err = [[max(0.0, y - float(r["ci_low"].iloc[0]))], [max(0.0, float(r["ci_high"].iloc[0]) - y)]]
            ax.errorbar(x, y, yerr=err, fmt=MARKERS[i % len(MARKERS)], markersize=8, color=palette.color(i),
                        markerfacecolor="none", markeredgewidth=1.6, capsize=3, elinewidth=0.8, label=p, zorder=3)
            points.append((x, y, p))
        # Labels: offset alternately, and further for points that share (almost) a position.
        for idx, (x, y, lab) in enumerate(sorted(points, key=lambda t: (t[0], t[1]))):
            near = sum(1 for (x2, y2, _) in points[:] if abs(math.log10(x2) - math.log10(x)) < 0.05 and abs(y2 - y) < 4)
            dy = 8 + 7 * (idx % 3) + (5 if near > 1 else 0)
            ax.annotate(lab, (x, y), xytext=(6, dy if idx % 2 == 0 else -dy), textcoords="offset points", fontsize=7,
                        arrowprops=dict(arrowstyle="-", linewidth=0.5, color="grey"), zorder=5)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_tokens_label))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        xs = [x for x, _, _ in points]
        if xs:
            ax.set_xlim(min(xs) / 2.0, max(xs) * 2.5)
        ax.set_ylim(-8, 108)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(corpus, fontsize=10)
        ax.set_xlabel("tokens per query (log, construction amortised)", fontsize=8)
        if k % ncols == 0:
            ax.set_ylabel("% correct (95 % Wilson interval)", fontsize=8)
    handles: dict = {}
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(len(handles), 5),
               fontsize=8, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(title or "Cost vs. correctness", fontsize=11)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig
