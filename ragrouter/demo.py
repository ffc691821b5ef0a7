"""The main job's data: a slice of the medical corpus with questions it can answer.

The embedded default runs a 0.5B model on 2 CPU cores, so `make run` works on the first
``demo.chunks`` chunks of the GraphRAG-Bench medical textbook (one document of 221,495
tokens, 538 chunks) and on questions whose evidence lies in that slice. GraphRAG-Bench
evidence is paraphrased, not quoted, so "lies in the slice" is tested lexically: every
evidence sentence must have at least ``demo.evidence_overlap`` of its content words (4+
letters) inside one single chunk of the slice. Questions are taken in file order, balanced
over the three query types (``demo.per_type`` each).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from ragrouter.corpus.chunking import chunk_text
from ragrouter.ingest import loaders
from ragrouter.ingest.records import QTYPES, Dataset, Document
from ragrouter.llm import tokens
from ragrouter.paths import REPO_ROOT

_WORD = re.compile(r"[a-z][a-z0-9-]{3,}")


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


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def evidence_in(evidence: list[str] | str, chunk_words: list[set[str]], overlap: float) -> bool:
    """Every evidence sentence has ≥ ``overlap`` of its content words inside one chunk."""
    if isinstance(evidence, str):
        evidence = [evidence]
    sentences = [s for e in evidence for s in re.split(r";\s+", e) if s.strip()]
    if not sentences:
        return False
    for sent in sentences:
        words = _words(sent)
        if not words:
            continue
        if not any(len(words & cw) / len(words) >= overlap for cw in chunk_words):
            return False
    return True


def medical_slice(data_dir: Path, n_chunks: int, per_type: int, overlap: float,
                  window: int = 512, overlap_tokens: int = 100) -> Dataset:
    """The first ``n_chunks`` chunks of the medical textbook and ``per_type`` questions per type."""
    full = loaders.load("graphrag-bench", [data_dir / "medical.json", data_dir / "medical_questions.json"])
    doc = full.documents[0]
    enc = tokens.encoding()
    ids = enc.encode(doc.text, disallowed_special=())
    stride = window - overlap_tokens
    end = min(len(ids), stride * (n_chunks - 1) + window)
    text = enc.decode(ids[:end])
    chunk_words = [_words(c.text) for c in chunk_text(doc.title, text, window, overlap_tokens)]
    sliced = Document(external_id=f"{doc.external_id}[:{n_chunks}chunks]", title=doc.title, text=text,
                      meta={**doc.meta, "slice_tokens": end, "source_tokens": len(ids)})
    picked, counts = [], dict.fromkeys(QTYPES, 0)
    for q in full.questions:
        if counts[q.qtype] >= per_type:
            continue
        if evidence_in(q.evidence, chunk_words, overlap):
            picked.append(replace(q, supporting_doc_ids=[sliced.external_id] if q.supporting_doc_ids else []))
            counts[q.qtype] += 1
    return Dataset(documents=[sliced], questions=picked, dropped={"outside_slice_or_over_quota":
                                                                  len(full.questions) - len(picked)})
