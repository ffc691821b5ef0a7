"""Do qualified questions find their own document? Naive retrieval before and after.

On a slice of the shared CUAD subset (the first 10 contracts and their clause questions) and
of SQuALITY dev (the first 10 stories and their 5 questions each): every document is chunked
as the chunk stage does (512 / 100 tokens), chunks and questions are embedded with MiniLM
(all-MiniLM-L6-v2, normalised), and each question retrieves its top-k chunks by cosine (no
similarity threshold: the share is about *which* chunks come first). The figure is the share
of retrieved chunks that come from the question's own document, with the question verbatim
and qualified with its document's title (the default of `ingest` now).

    .venv/bin/python benchmarks/bench_qualified_questions.py [--docs 10] [--k 10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def share(ds_verbatim, ds_qualified, docs: int, k: int, enc) -> dict:
    from ragrouter.corpus.chunking import chunk_text

    keep = [d.external_id for d in ds_verbatim.documents[:docs]]
    chunks, owner = [], []
    for d in ds_verbatim.documents[:docs]:
        for c in chunk_text(d.title, d.text, 512, 100):
            chunks.append(c.text)
            owner.append(d.external_id)
    cv = enc.encode(chunks)
    owner = np.array(owner)
    out = {"documents": docs, "chunks": len(chunks)}
    for name, ds in (("verbatim", ds_verbatim), ("qualified", ds_qualified)):
        qs = [q for q in ds.questions if q.supporting_doc_ids and q.supporting_doc_ids[0] in keep]
        qv = enc.encode([q.question for q in qs])
        sims = qv @ cv.T
        top = np.argsort(-sims, axis=1)[:, :k]
        own = [(owner[t] == q.supporting_doc_ids[0]).mean() for t, q in zip(top, qs)]
        out[name] = float(np.mean(own))
        out["questions"] = len(qs)
        out[f"{name}_top1"] = float(np.mean([owner[t[0]] == q.supporting_doc_ids[0] for t, q in zip(top, qs)]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    from ragrouter.ingest.loaders import load
    from ragrouter.llm.encoder import get_encoder
    from tests.conftest import SHARED_DATA

    enc = get_encoder("all-MiniLM-L6-v2")
    cuad = [SHARED_DATA / "legal" / "cuad_subset94" / "clause_qa.jsonl",
            SHARED_DATA / "legal" / "cuad_subset94" / "contracts.json"]
    squality = [SHARED_DATA / "quality" / "squality_v1-3_txt" / "dev.jsonl"]
    print(f"| corpus | documents | chunks | questions | own-document share of top-{args.k}, verbatim | "
          f"qualified | top-1 own document, verbatim | qualified |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, fmt, paths in (("CUAD", "cuad", cuad), ("SQuALITY dev", "squality", squality)):
        r = share(load(fmt, paths, qualify_questions=False), load(fmt, paths), args.docs, args.k, enc)
        print(f"| {name} | {r['documents']} | {r['chunks']} | {r['questions']} | {100 * r['verbatim']:.0f} % | "
              f"{100 * r['qualified']:.0f} % | {100 * r['verbatim_top1']:.0f} % | {100 * r['qualified_top1']:.0f} % |",
              flush=True)


if __name__ == "__main__":
    main()
