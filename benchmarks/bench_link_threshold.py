"""Measure the embedding threshold of entity linking (``querygen.linking.thresholds``; issue #19).

Labelled name pairs from the 2WikiMultihopQA substitute corpus's passage titles:

* same entity, other surface form: a disambiguated title and its bare name
  ("Theodred II (Bishop of Elmham)" ~ "Theodred II");
* different entities that share a word (hard negatives: "Lothair I" / "Lothair II",
  "Ermengarde of Tours" / "Hugh of Tours"), the bare names of two distinct titles.

Pairs equal after :func:`ragrouter.querygen.linking.key` are left out (normalisation links
them already). For each threshold: recall on the positives and the false-link rate on the
hard negatives; the chosen threshold is the lowest whose false-link rate is ≤ ``--max-fpr``.
As in :func:`~ragrouter.querygen.linking.link_names`, a pair whose numbers, ordinals or roman
numerals differ (:func:`~ragrouter.querygen.linking.markers_agree`) is never linked.

    PYTHONPATH=. python benchmarks/bench_link_threshold.py --encoder all-MiniLM-L6-v2 --n 1000
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from ragrouter.querygen.linking import key, markers_agree

CORPUS = Path(__file__).resolve().parents[2] / "shared/data/musique/2wikimultihopqa_substitute/2wikimultihopqa_corpus.json"
_PAREN = re.compile(r"^(.+?)\s*\((.+)\)\s*$")


def pairs(n: int, seed: int = 0) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    titles = sorted({p["title"] for p in json.loads(CORPUS.read_text()) if p["title"]})
    rng = random.Random(seed)
    pos = []
    for t in titles:
        m = _PAREN.match(t)
        if m and key(m.group(1)) and key(m.group(1)) != key(t):
            pos.append((t, m.group(1)))
    bare = sorted({_PAREN.sub(r"\1", t).strip() for t in titles})
    by_word = defaultdict(list)
    for b in bare:
        for w in set(key(b).split()):
            if len(w) >= 4:
                by_word[w].append(b)
    neg = set()
    words = sorted(w for w, bs in by_word.items() if 2 <= len(bs) <= 50)
    rng.shuffle(words)
    for w in words:
        a, b = rng.sample(by_word[w], 2)
        if key(a) != key(b):
            neg.add((min(a, b), max(a, b)))
        if len(neg) >= n:
            break
    rng.shuffle(pos)
    return pos[:n], sorted(neg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--max-fpr", type=float, default=0.01)
    ap.add_argument("--json")
    args = ap.parse_args()
    from ragrouter.llm.encoder import get_encoder

    pos, neg = pairs(args.n)
    enc = get_encoder(args.encoder)
    names = sorted({x for p in pos + neg for x in p})
    vec = dict(zip(names, enc.encode(names)))

    def sims(ps):  # a pair whose markers differ is never linked (as in link_names)
        return np.array([float(vec[a] @ vec[b]) if markers_agree(a, b) else -1.0 for a, b in ps])

    sp, sn = sims(pos), sims(neg)
    rows = []
    for t in np.round(np.arange(0.60, 0.991, 0.02), 2):
        rows.append({"threshold": float(t), "recall": float((sp >= t).mean()), "false_link_rate": float((sn >= t).mean())})
    ok = [r for r in rows if r["false_link_rate"] <= args.max_fpr]
    chosen = ok[0]["threshold"] if ok else None
    print(f"{args.encoder}: {len(pos)} same-entity pairs, {len(neg)} hard different-entity pairs")
    print("threshold  recall  false-link rate")
    for r in rows:
        print(f"{r['threshold']:9.2f}  {r['recall']:6.3f}  {r['false_link_rate']:6.3f}")
    print(f"chosen (lowest with false-link rate <= {args.max_fpr}): {chosen}")
    examples = sorted(zip(sn, neg), reverse=True)[:5]
    print("closest different-entity pairs:", [(round(float(s), 3), a, b) for s, (a, b) in examples])
    if args.json:
        Path(args.json).write_text(json.dumps({"encoder": args.encoder, "rows": rows, "chosen": chosen,
                                               "n_pos": len(pos), "n_neg": len(neg)}))


if __name__ == "__main__":
    main()
