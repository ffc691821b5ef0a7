"""Which relevance threshold suits an embedder: question-to-gold-chunk similarity on the medical corpus.

The paper's ``min_similarity`` 0.4 was set for OpenAI's text-embedding-3-small; MiniLM's cosine
similarities sit on another scale. GraphRAG-Bench medical questions carry their ``evidence``
(paraphrased sentences of the textbook), so their gold chunks are known: the chunks (512-token
windows, 100 overlap, cl100k — the chunk stage's own chunking) that hold an evidence sentence,
found lexically as the demo does (``ragrouter.corpus.slicing.evidence_in``: >= ``--overlap`` of the
sentence's content words inside one chunk; the best such chunk per sentence is its gold chunk).

For every (question, gold chunk) pair we take the cosine between the question's and the chunk's
embedding (both L2-normalised, as the embed stage and the retrievers use them) and report the
quantiles of that distribution; the threshold at which >= ``--pass-share`` (90 %) of gold chunks
pass is its (1 - pass-share) quantile, rounded *down* to two decimals. We also report how many
chunks per question clear a threshold (what a low threshold lets in) and the share of gold chunks
that clear the paper's 0.4.

    python benchmarks/bench_min_similarity.py                       # MiniLM, every medical question
    python benchmarks/bench_min_similarity.py --limit 500 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragrouter.corpus.chunking import chunk_text  # noqa: E402
from ragrouter.corpus.demo import default_data_dir  # noqa: E402
from ragrouter.corpus.slicing import _words  # noqa: E402
from ragrouter.ingest import loaders  # noqa: E402


def gold_chunks(evidence, chunk_words: list[set[str]], overlap: float) -> list[int]:
    """Index of the best-overlapping chunk of every evidence sentence that has one (>= overlap)."""
    sentences = evidence if isinstance(evidence, list) else [evidence or ""]
    sentences = [s for e in sentences for s in re.split(r";\s+", e or "") if s.strip()]
    out: list[int] = []
    for sent in sentences:
        words = _words(sent)
        if not words:
            continue
        shares = [len(words & cw) / len(words) for cw in chunk_words]
        best = int(np.argmax(shares))
        if shares[best] >= overlap and best not in out:
            out.append(best)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="folder with medical.json, medical_questions.json")
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2", help="local encoder name (ragrouter.llm.encoder)")
    ap.add_argument("--overlap", type=float, default=0.75, help="evidence-in-chunk word overlap (demo's value)")
    ap.add_argument("--pass-share", type=float, default=0.90, help="share of gold chunks that must pass")
    ap.add_argument("--limit", type=int, default=0, help="first N questions only (0: all)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = ap.parse_args(argv)

    from ragrouter.llm.encoder import get_encoder

    data = args.data or default_data_dir()
    t0 = time.perf_counter()
    full = loaders.load("graphrag-bench", [data / "medical.json", data / "medical_questions.json"])
    doc = full.documents[0]
    chunks = chunk_text(doc.title or "", doc.text, window=512, overlap=100)
    chunk_words = [_words(c.text) for c in chunks]
    questions = [q for q in full.questions if q.evidence]
    if args.limit:
        questions = questions[: args.limit]
    pairs: list[tuple[int, int]] = []
    with_gold = 0
    for qi, q in enumerate(questions):
        g = gold_chunks(q.evidence, chunk_words, args.overlap)
        with_gold += bool(g)
        pairs += [(qi, c) for c in g]
    print(f"{len(chunks)} chunks, {len(questions)} questions, {len(pairs)} gold pairs "
          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    enc = get_encoder(args.encoder)
    t1 = time.perf_counter()
    cvec = enc.encode([c.text for c in chunks])
    print(f"chunks encoded ({time.perf_counter() - t1:.0f} s)", file=sys.stderr, flush=True)
    qvec = enc.encode([q.question for q in questions])
    t2 = time.perf_counter()
    sims_all = qvec @ cvec.T
    gold = np.asarray([sims_all[qi, c] for qi, c in pairs], dtype=np.float64)
    rank_of_gold = [int((sims_all[qi] > sims_all[qi, c]).sum()) + 1 for qi, c in pairs]
    qs = {f"p{p:02d}": float(np.quantile(gold, p / 100)) for p in (5, 10, 20, 50)}
    raw = float(np.quantile(gold, 1.0 - args.pass_share))
    threshold = math.floor(raw * 100) / 100
    per_q = {t: float((sims_all >= t).sum(axis=1).mean()) for t in (threshold, 0.3, 0.4)}
    out = {
        "encoder": args.encoder,
        "chunks": len(chunks),
        "questions": len(questions),
        "questions_with_gold_chunk": with_gold,
        "gold_pairs": len(pairs),
        "gold_similarity_mean": float(gold.mean()),
        "gold_similarity_quantiles": qs,
        "pass_share": args.pass_share,
        "threshold_raw": raw,
        "threshold": threshold,
        "share_passing_threshold": float((gold >= threshold).mean()),
        "share_passing_0.4": float((gold >= 0.4).mean()),
        "chunks_per_question_passing": {str(k): v for k, v in per_q.items()},
        "median_rank_of_gold_chunk": float(np.median(rank_of_gold)),
        "seconds_load": round(t1 - t0, 1),
        "seconds_encode": round(t2 - t1, 1),
    }
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
