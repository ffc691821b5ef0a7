"""The type centroids of labelled questions in a sentence encoder's space. The rule that reads
a question's type from them (wording cues first, then the nearest centroid) is
:func:`ragrouter.qtype_guess.guess`, shared by ``ask``, ``serve`` and the self-contained router
model (:mod:`ragrouter.routers.promotion`)."""

from __future__ import annotations

import numpy as np


def type_centroids(rows: list[tuple[str, str]], encoder) -> dict[str, np.ndarray]:
    """{query type: mean embedding} of ``rows`` = (query type, question) pairs."""
    types = sorted({r[0] for r in rows})
    vecs = np.asarray(encoder.encode([r[1] for r in rows]), dtype=np.float64)
    return {t: vecs[[r[0] == t for r in rows]].mean(axis=0) for t in types}
