"""A question's type (factual / reasoning / summary) without a model call: the nearest type
centroid of labelled questions in a sentence encoder's space (cosine). ``ask``, ``serve`` and
the self-contained router model (:mod:`ragrouter.routers.promotion`) share this one rule."""

from __future__ import annotations

import numpy as np


def type_centroids(rows: list[tuple[str, str]], encoder) -> dict[str, np.ndarray]:
    """{query type: mean embedding} of ``rows`` = (query type, question) pairs."""
    types = sorted({r[0] for r in rows})
    vecs = np.asarray(encoder.encode([r[1] for r in rows]), dtype=np.float64)
    return {t: vecs[[r[0] == t for r in rows]].mean(axis=0) for t in types}


def nearest_type(centroids: dict[str, np.ndarray], q: np.ndarray) -> str:
    """The type whose centroid is most similar to the question's embedding ``q`` (ties: the
    first type by name)."""
    best, best_sim = None, -2.0
    for t in sorted(centroids):
        c = np.asarray(centroids[t], dtype=np.float64)
        sim = float(c @ q / (np.linalg.norm(c) + 1e-12))
        if sim > best_sim:
            best, best_sim = t, sim
    return str(best)
