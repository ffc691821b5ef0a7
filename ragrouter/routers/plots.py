"""PNG figures for router runs (matplotlib, Agg backend): confusion matrix and cost–quality plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ragrouter import palette  # noqa: E402
from ragrouter.routers.evaluate import quality_frontier  # noqa: E402


def confusion_png(cm: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Counts with row-normalised shading (rows: true label, columns: predicted)."""
    path = Path(path)
    values = cm.to_numpy(dtype=float)
    share = values / np.maximum(values.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(1.1 * len(cm.columns) + 2.5, 0.9 * len(cm.index) + 2))
    cmap = matplotlib.colormaps[palette.SEQUENTIAL]
    ax.imshow(share, cmap=cmap, vmin=0, vmax=1)
    ax.set_xticks(range(len(cm.columns)), labels=cm.columns, rotation=40, ha="right")
    ax.set_yticks(range(len(cm.index)), labels=cm.index)
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            ax.text(j, i, f"{int(values[i, j])}", ha="center", va="center",
                    color=palette.text_color(cmap(share[i, j])), fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true label")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def cost_quality_png(points: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Fixed paradigms, the router (one point per λ, joined) and the λ-oracle; tokens on a log axis.

    ``points`` has the columns of :func:`~ragrouter.routers.evaluate.cost_quality_curve`."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(8.0, 4.6))
    fixed = points[points["kind"] == "fixed"]
    ax.scatter(fixed["avg_tokens"], fixed["correct_rate"], marker="s", color="tab:gray", label="fixed paradigms")
    for _, r in fixed.iterrows():
        ax.annotate(r["strategy"], (r["avg_tokens"], r["correct_rate"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    if len(fixed):
        front = quality_frontier(fixed["avg_tokens"], fixed["correct_rate"])
        ax.plot(front[:, 0], front[:, 1], color="tab:gray", lw=0.8, ls=":", label="fixed frontier")
    for kind, style in (("oracle", dict(color=palette.OKABE_ITO["orange"], marker="^")),
                        ("router", dict(color=palette.OKABE_ITO["blue"], marker="o"))):
        sub = points[points["kind"] == kind].sort_values("avg_tokens")
        if len(sub):
            name = sub["strategy"].iloc[0]
            ax.plot(sub["avg_tokens"], sub["correct_rate"], lw=1.2, label=f"{name} (λ sweep)" if len(sub) > 1 else name, **style)
            if len(sub) > 1:
                for _, r in sub.iterrows():
                    ax.annotate(f"λ={r['lam']:g}", (r["avg_tokens"], r["correct_rate"]), textcoords="offset points",
                                xytext=(3, -9), fontsize=6, color=style["color"])
    if (points["avg_tokens"] > 0).all():
        ax.set_xscale("log")
    ax.set_xlabel("tokens per query")
    ax.set_ylabel("correct rate (LLM judge)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
