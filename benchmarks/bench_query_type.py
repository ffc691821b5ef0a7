"""How often the query-type guess of ``ask`` / ``serve`` is right, per type.

Data: the typed questions of the shared corpora (``$RAGROUTER_SHARED_DATA`` or
``../shared/data``; see its README) — RAGRouter-Bench's four domains (medical, musique,
quality, legal: single_hop / multi_hop / summary → factual / reasoning / summary) and
GraphRAG-Bench novel (Fact Retrieval / Complex Reasoning / Contextual Summarize) — up to
``--per-cell`` questions per (domain, type), seeded; and the 40 held-out user-style questions
of ``benchmarks/data/query_type_heldout.jsonl`` (written for this benchmark: questions a user
asks of their own filings, manuals, contracts and novels; never used to make centroids).

A **store** is ``k`` labelled questions per type of one domain (k = 3: the demo's slice; 10;
100). Each guess is measured in two settings, averaged over the five domains and
``--repeats`` draws of the store:

* **unseen corpus**: the store domain's other questions; the reference centroids (rules+blend)
  are made from the four *other* domains only (leave one domain out);
* **held-out questions**: the 40 user-style questions; reference centroids from all five.

Guesses: ``store`` — the nearest centroid of the store's questions (the guess before this
benchmark); ``rules+store`` — the cues of :func:`ragrouter.answering.question_type.rule_type`, else that
centroid; ``rules+blend`` — the cues, else the store's centroids blended with the reference
(:func:`ragrouter.answering.question_type.blend`), what ``ask`` ships. ``--write-reference`` writes
:mod:`ragrouter.answering.type_reference` (reference centroids from all five domains, and the k = 10
figures ``ask`` prints).

    python benchmarks/bench_query_type.py                      # the table (about 3 minutes on 2 cores)
    python benchmarks/bench_query_type.py --write-reference    # and the shipped reference
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ragrouter.answering import question_type as qg  # noqa: E402

TYPES = qg.TYPES
MAP = {"single_hop": "factual", "multi_hop": "reasoning", "summary": "summary", "Fact Retrieval": "factual",
       "Complex Reasoning": "reasoning", "Contextual Summarize": "summary"}
DOMAINS = ["medical", "musique", "quality", "legal", "novel"]
HELDOUT = REPO / "benchmarks" / "data" / "query_type_heldout.jsonl"
REFERENCE = REPO / "ragrouter" / "answering" / "type_reference.py"


def shared_data() -> Path:
    env = os.environ.get("RAGROUTER_SHARED_DATA")
    for base in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data", Path("/work/shared/data")]:
        if (base / "ragrouter_bench").exists():
            return base
    raise SystemExit("shared data not found: set RAGROUTER_SHARED_DATA")


def load(per_cell: int, seed: int) -> list[tuple[str, str, str]]:
    """(domain, type, question) rows: the sample of the shared corpora, then the held-out ones."""
    data = shared_data()
    rows = []
    for name in ("all_train.jsonl", "all_val.jsonl", "all_test.jsonl"):
        for line in open(data / "ragrouter_bench" / name, encoding="utf-8"):
            r = json.loads(line)
            dom = r["domain"].replace("graphragBench_", "").replace("ultraDomain_", "")
            rows.append((dom, MAP[r["type"]], r["question"]))
    for x in json.load(open(data / "quality" / "graphragbench_novel" / "novel_questions.json", encoding="utf-8")):
        if x["question_type"] in MAP:
            rows.append(("novel", MAP[x["question_type"]], x["question"]))
    by = collections.defaultdict(list)
    for r in rows:
        by[(r[0], r[1])].append(r)
    rng = random.Random(seed)
    out = []
    for key in sorted(by):
        cell = by[key]
        rng.shuffle(cell)
        out += cell[:per_cell]
    for line in open(HELDOUT, encoding="utf-8"):
        r = json.loads(line)
        out.append(("heldout", r["type"], r["question"]))
    return out


def encode(texts: list[str], encoder_name: str, cache: Path | None) -> np.ndarray:
    key = hashlib.sha256(("\x1f".join(texts) + encoder_name).encode()).hexdigest()[:16]
    if cache is not None and cache.exists():
        got = np.load(cache)
        if str(got["key"]) == key:
            return got["vecs"]
    from ragrouter.llm.encoder import get_encoder

    vecs = np.asarray(get_encoder(encoder_name).encode(texts), dtype=np.float64)
    if cache is not None:
        np.savez(cache, key=key, vecs=vecs)
    return vecs


def centroids(vecs, types, idx) -> dict[str, tuple[np.ndarray, int]]:
    return {t: (vecs[idx][types[idx] == t].mean(axis=0), int((types[idx] == t).sum())) for t in TYPES}


def evaluate(rows, vecs, ks=(3, 10, 100), repeats: int = 8, seed: int = 0) -> dict:
    """{method: {k: {setting: {type: share right}}}} (see the module doc)."""
    dom = np.array([r[0] for r in rows])
    types = np.array([r[1] for r in rows])
    cues = [qg.rule_type(r[2]) for r in rows]
    held = np.where(dom == "heldout")[0]
    every = np.where(dom != "heldout")[0]
    ref_all = {t: c for t, (c, _) in centroids(vecs, types, every).items()}
    rng = np.random.default_rng(seed)
    got = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for k in ks:
        for d in DOMAINS:
            ref_lodo = {t: c for t, (c, _) in centroids(vecs, types, np.where((dom != d) & (dom != "heldout"))[0]).items()}
            for _ in range(repeats if k < 100 else max(1, repeats // 4)):
                idx = np.where(dom == d)[0].copy()
                rng.shuffle(idx)
                store_idx = np.concatenate([idx[types[idx] == t][:k] for t in TYPES])
                test = np.setdiff1d(idx, store_idx)
                store = centroids(vecs, types, store_idx)
                plain = {t: c for t, (c, _) in store.items()}
                for setting, ix, ref in (("unseen", test, ref_lodo), ("heldout", held, ref_all)):
                    blended = qg.blend(store, ref)
                    for method in ("store", "rules+store", "rules+blend"):
                        cents = plain if method != "rules+blend" else blended
                        pred = []
                        for i in ix:
                            if method == "store":
                                pred.append(qg.nearest(cents, vecs[i]))
                            else:
                                pred.append(cues[i] if cues[i] is not None else qg.nearest(cents, vecs[i]))
                        pred = np.array(pred)
                        for t in TYPES:
                            sel = types[ix] == t
                            if sel.any():
                                got[method][k][setting + ":" + t].append(float((pred[sel] == t).mean()))
    out: dict = {}
    for method, by_k in got.items():
        out[method] = {}
        for k, cells in by_k.items():
            res = {"unseen": {}, "heldout": {}}
            for key, vals in cells.items():
                setting, t = key.split(":")
                res[setting][t] = round(float(np.mean(vals)), 3)
            out[method][k] = res
    return out


def cue_precision(rows) -> dict[str, tuple[float, float]]:
    """Per domain: (share of questions a cue fires on, share of those it types right)."""
    out = {}
    for d in DOMAINS + ["heldout"]:
        mine = [(qg.rule_type(q), t) for dd, t, q in rows if dd == d]
        fired = [(c, t) for c, t in mine if c is not None]
        out[d] = (len(fired) / max(1, len(mine)), sum(c == t for c, t in fired) / max(1, len(fired)))
    return out


def write_reference(rows, vecs, encoder_name: str, results: dict, per_cell: int, seed: int) -> None:
    dom = np.array([r[0] for r in rows])
    types = np.array([r[1] for r in rows])
    every = np.where(dom != "heldout")[0]
    cents = {t: [round(float(x), 4) for x in c] for t, (c, _) in centroids(vecs, types, every).items()}
    measured = {m: results[m][10] for m in ("rules+blend", "rules+store", "store")}
    lines = ['"""Reference type centroids and the measured accuracy of the query-type guess.',
             "",
             "Written by ``python benchmarks/bench_query_type.py --write-reference`` (do not edit): the mean",
             f"{encoder_name} embedding of each type's questions in the shared corpora (RAGRouter-Bench's",
             f"medical, musique, quality and legal questions and GraphRAG-Bench novel's; {per_cell} per domain",
             f"and type, seed {seed}), and what the benchmark measured of the guesses for a store of 10",
             "labelled questions per type: the share right per type on an unseen corpus' questions",
             "(reference made without that corpus) and on the 40 held-out user-style questions.",
             '"""', "", f"ENCODER = {encoder_name!r}", "", f"MEASURED = {json.dumps(measured, indent=4)}", "",
             "CENTROIDS = {"]
    for t in TYPES:
        lines.append(f"    {t!r}: [")
        for i in range(0, len(cents[t]), 10):
            lines.append("        " + ", ".join(repr(x) for x in cents[t][i:i + 10]) + ",")
        lines.append("    ],")
    lines.append("}")
    REFERENCE.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-cell", type=int, default=200, help="questions per (domain, type) (default 200)")
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2")
    ap.add_argument("--cache", type=Path, help="an .npz file keeping the embeddings between runs")
    ap.add_argument("--write-reference", action="store_true", help=f"write {REFERENCE.relative_to(REPO)}")
    args = ap.parse_args(argv)
    rows = load(args.per_cell, args.seed)
    vecs = encode([r[2] for r in rows], args.encoder, args.cache)
    print(f"{len(rows)} questions: " + ", ".join(f"{d} {n}" for d, n in collections.Counter(r[0] for r in rows).items()))
    print("cues (share fired, share right when fired): " + ", ".join(
        f"{d} {a:.2f}/{b:.2f}" for d, (a, b) in cue_precision(rows).items()))
    results = evaluate(rows, vecs, repeats=args.repeats, seed=args.seed)
    print(f"\n{'guess':12s} {'k':>4s}  {'unseen corpus: factual reasoning summary macro':46s}  "
          "held-out questions: factual reasoning summary macro")
    for method in ("store", "rules+store", "rules+blend"):
        for k, res in results[method].items():
            cells = []
            for setting in ("unseen", "heldout"):
                accs = [res[setting][t] for t in TYPES]
                cells.append(" ".join(f"{a:8.2f}" for a in accs) + f" {np.mean(accs):6.2f}")
            print(f"{method:12s} {k:4d}  {cells[0]:46s}  {cells[1]}")
    if args.write_reference:
        write_reference(rows, vecs, args.encoder, results, args.per_cell, args.seed)
        print(f"wrote {REFERENCE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
