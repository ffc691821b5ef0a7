"""The paper's figures with matplotlib (Agg backend): each function takes view rows and returns
a :class:`matplotlib.figure.Figure`; :func:`save` writes it as PNG and closes it.

* :func:`accuracy_heatmaps` — Fig. 4: one panel per paradigm, rows = query types, columns =
  corpora, colour = % correct, ``*`` on the best paradigm of each (type, corpus) cell.
* :func:`corpus_profile` — Fig. 6: structural and semantic indicators per corpus as bars
  normalised by each indicator's largest value (raw values printed on the bars).
* :func:`cost_quality` — Fig. 7: average tokens per query (log x) against % correct, one
  panel per corpus, a point per paradigm, plus router points when there are router scores.
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


def save(fig: Figure, path: Path, dpi: int = 110) -> Path:
    """Write ``fig`` as PNG and release it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, facecolor="white", bbox_inches="tight")  # long titles are not clipped
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
    for r in acc.itertuples(index=False):
        cube[paradigms.index(r.paradigm), qtypes.index(r.qtype), corpora.index(r.corpus)] = r.correct_pct
    with np.errstate(all="ignore"):
        best = np.nanmax(np.where(np.isnan(cube), -np.inf, cube), axis=0)
    ncols = min(len(paradigms), 3)
    nrows = math.ceil(len(paradigms) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.0 + 1.3 * len(corpora) * ncols + 0.8, 0.6 + 1.0 * len(qtypes) * nrows + 0.6),
                             squeeze=False, layout="constrained")
    cmap = matplotlib.colormaps["YlGn"].with_extremes(bad="#d9d9d9")
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
                    text = f"{v:.1f}" + ("*" if v == best[i, j] and v > 0 else "")
                ax.text(j, i, text, ha="center", va="center", fontsize=8,
                        color="white" if (not np.isnan(v) and v > 65) else "black")
        ax.set_title(paradigms[k], fontsize=10)
        ax.set_xticks(range(len(corpora)), corpora, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(qtypes)), qtypes if k % ncols == 0 else [""] * len(qtypes), fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=[a for a in axes.flat if a in fig.axes], shrink=0.8,
                     label="% correct")
    fig.suptitle(title or "Accuracy by paradigm, query type and corpus (* = best paradigm)", fontsize=11)
    return fig


def corpus_profile(prof: pd.DataFrame, title: str = "") -> Figure | None:
    """Fig. 6 from ``v_corpus_profile``: two panels (structural, semantic) of grouped bars, one
    bar per corpus, each indicator divided by its largest absolute value across corpora.
    Returns None when no indicator has been measured."""
    groups = [(name, [(c, lab) for c, lab in cols if c in prof.columns and prof[c].notna().any()])
              for name, cols in (("Structural (knowledge graph)", STRUCTURAL), ("Semantic (embedding space)", SEMANTIC))]
    groups = [(n, cols) for n, cols in groups if cols]
    if prof.empty or not groups:
        return None
    prof = prof.sort_values("corpus").reset_index(drop=True)
    corpora = list(prof["corpus"])
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4.2), squeeze=False)
    colors = matplotlib.colormaps["tab10"]
    width = 0.8 / max(len(corpora), 1)
    for ax, (name, cols) in zip(axes[0], groups):
        x = np.arange(len(cols))
        for i, corpus in enumerate(corpora):
            heights, raws = [], []
            for c, _ in cols:
                values = pd.to_numeric(prof[c], errors="coerce").to_numpy(float)
                scale = np.nanmax(np.abs(values)) if np.isfinite(values).any() else np.nan
                v = values[i]
                heights.append(v / scale if np.isfinite(v) and scale > 0 else 0.0)
                raws.append(v)
            bars = ax.bar(x + (i - (len(corpora) - 1) / 2) * width, heights, width, label=corpus, color=colors(i % 10))
            for bar, raw in zip(bars, raws):
                if np.isfinite(raw):
                    label = f"{raw:,.0f}" if abs(raw) >= 100 else f"{raw:.2g}" if abs(raw) < 0.01 else f"{raw:.2f}"
                    ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.02, label, ha="center",
                            va="bottom", fontsize=6, rotation=90)
        ax.set_xticks(x, [lab for _, lab in cols], rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.35)
        ax.set_ylabel("value / max over corpora")
        ax.set_title(name, fontsize=10)
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.suptitle(title or "Corpus profile", fontsize=11)
    fig.tight_layout()
    return fig


def cost_quality(acc: pd.DataFrame, routers: pd.DataFrame | None = None, title: str = "") -> Figure | None:
    """Fig. 7: one panel per corpus; x = average tokens per query (log), y = % correct.

    ``acc`` holds ``v_accuracy_by_type`` rows of one (generator, judge) (its 'all' rows are
    used); ``routers`` optional rows with columns corpus, label, avg_tokens, correct_rate (one
    point per label and corpus, drawn as stars). Returns None without data."""
    allrows = acc[acc["qtype"] == "all"]
    if allrows.empty:
        return None
    corpora = sorted(allrows["corpus"].unique())
    paradigms = paradigm_order(allrows["paradigm"].unique())
    ncols = min(len(corpora), 4)
    nrows = math.ceil(len(corpora) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.2 * nrows + 0.5), squeeze=False)
    colors = matplotlib.colormaps["tab10"]
    router_labels = sorted(routers["label"].unique()) if routers is not None and not routers.empty else []
    for k, ax in enumerate(axes.flat):
        if k >= len(corpora):
            fig.delaxes(ax)
            continue
        corpus = corpora[k]
        part = allrows[allrows["corpus"] == corpus]
        for i, p in enumerate(paradigms):
            r = part[part["paradigm"] == p]
            if r.empty:
                continue
            ax.scatter(max(float(r["avg_tokens"].iloc[0]), 1.0), float(r["correct_pct"].iloc[0]), s=55,
                       marker=MARKERS[i % len(MARKERS)], color=colors(i % 10), label=p, zorder=3)
        for j, lab in enumerate(router_labels):
            r = routers[(routers["corpus"] == corpus) & (routers["label"] == lab)]
            r = r[r["avg_tokens"].notna() & r["correct_rate"].notna()]
            if r.empty:
                continue
            ax.scatter(max(float(r["avg_tokens"].iloc[0]), 1.0), float(r["correct_rate"].iloc[0]), s=140, marker="*",
                       color=colors((len(paradigms) + j) % 10), edgecolor="black", linewidth=0.6, label=lab, zorder=4)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_tokens_label))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_ylim(-3, 103)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(corpus, fontsize=10)
        ax.set_xlabel("tokens per query (log)", fontsize=8)
        if k % ncols == 0:
            ax.set_ylabel("% correct", fontsize=8)
    handles: dict = {}
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(len(handles), 6),
               fontsize=8, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(title or "Cost vs. correctness", fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig
