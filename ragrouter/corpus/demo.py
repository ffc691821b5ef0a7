"""The main job's data: a slice of the medical corpus with questions it can answer.

The embedded default runs a 0.5B model on 2 CPU cores, so `make run` works on the first
``demo.chunks`` chunks of the GraphRAG-Bench medical textbook (one document of 221,495
tokens, 538 chunks) and on questions whose evidence lies in that slice. GraphRAG-Bench
evidence is paraphrased, not quoted, so "lies in the slice" is tested lexically: every
evidence sentence must have at least ``demo.evidence_overlap`` of its content words (4+
letters) inside one single chunk of the slice. Questions are taken in file order, balanced
over the three query types (``demo.per_type`` each). This is the rule of ``cli.py corpus
slice SOURCE NEW --chunks N --queries-per-type K`` (one function for both).
"""

from __future__ import annotations

import os
from pathlib import Path

from ragrouter.corpus.slicing import slice_dataset
from ragrouter.ingest import loaders
from ragrouter.ingest.records import Dataset
from ragrouter.paths import REPO_ROOT


def default_data_dir() -> Path:
    """$RAGROUTER_SHARED_DATA/medical, else ../shared/data/medical beside the repository, else
    the workplace's /work/shared/data/medical."""
    env = os.environ.get("RAGROUTER_SHARED_DATA")
    if env:
        return Path(env) / "medical"
    for base in (REPO_ROOT.parent / "shared" / "data", Path("/work/shared/data")):
        if (base / "medical" / "medical.json").exists():
            return (base / "medical").resolve()
    return (REPO_ROOT.parent / "shared" / "data" / "medical").resolve()


def medical_slice(data_dir: Path, n_chunks: int, per_type: int, overlap: float,
                  window: int = 512, overlap_tokens: int = 100) -> Dataset:
    """The first ``n_chunks`` chunks of the medical textbook and ``per_type`` questions per
    type: ``corpus slice``'s rule (:func:`ragrouter.corpus.slicing.slice_dataset`) applied to
    the medical files."""
    full = loaders.load("graphrag-bench", [data_dir / "medical.json", data_dir / "medical_questions.json"])
    return slice_dataset(full, chunks=n_chunks, per_type=per_type, window=window, overlap_tokens=overlap_tokens,
                         evidence_overlap=overlap)
