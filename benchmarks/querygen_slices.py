"""The two corpora of issue #19's real query-generation passes, ingested into one store.

* ``wiki-qg``: a slice of the 2WikiMultihopQA substitute corpus — the passages whose title is
  an entity of the evidence triples of the first compositional questions (so bridges exist:
  "Lothair II" → mother "Ermengarde of Tours" → her date of death), ≥ ``--passages`` of them,
  in file order.
* ``wiki-qg2`` (``--chain-passages``): the first ``--passages`` of those, then the passages of
  three-hop *title paths* A → B → C of the whole corpus (A's text writes B's title, B's writes
  C's, A's does not write C's; B and C written by at most ``--max-indegree`` passages each; every
  title written as the corpus spells it, so a proper name, not a lower-case word that happens
  to be a title), disjoint, in corpus order, until ``--chain-passages`` more are picked. The
  compositional picks alone hold 2 such paths among 150 passages, so a three-hop walk over
  them mostly went through type-like hubs ("film director", "actor").
* ``medical-qg``: the 24-chunk medical slice of the main job (``demo.medical_slice``), without
  its questions (the passes generate their own).

    python benchmarks/querygen_slices.py --db duckdb:////tmp/qg/qg.duckdb --passages 150
    python benchmarks/querygen_slices.py --db duckdb:////tmp/qg/qg.duckdb --passages 75 --chain-passages 75
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.db.engine import write_lock
from ragrouter.ingest import loaders
from ragrouter.ingest import store as ingest_store
from ragrouter.ingest.records import Dataset

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
WIKI = DATA / "musique" / "2wikimultihopqa_substitute"


def wiki_passages(n: int) -> list[dict]:
    corpus = json.loads((WIKI / "2wikimultihopqa_corpus.json").read_text())
    questions = json.loads((WIKI / "2wikimultihopqa_questions.json").read_text())
    by_title: dict[str, list[dict]] = {}
    for p in corpus:
        by_title.setdefault(p["title"].casefold(), []).append(p)
    picked, seen = [], set()
    for q in questions:
        if q.get("question_type") != "compositional":
            continue
        titles = [t[0] for t in q["evidence"]] + [t[2] for t in q["evidence"]]
        found = [p for t in titles for p in by_title.get(t.casefold(), [])]
        if len({p["title"] for p in found}) < 2:
            continue  # the chain's passages are not in the corpus
        for p in found:
            key = (p["title"], p["text"])
            if key not in seen:
                seen.add(key)
                picked.append(p)
        if len(picked) >= n:
            break
    return picked


def title_paths(corpus: list[dict], max_indegree: int = 5) -> list[tuple[int, int, int]]:
    """Three-hop title paths (indices into ``corpus``) in corpus order; see the module docstring."""
    by_title: dict[str, list[int]] = {}
    for i, p in enumerate(corpus):
        if len(p["title"]) >= 5:
            by_title.setdefault(p["title"], []).append(i)
    first: dict[str, list[str]] = {}
    for t in by_title:
        first.setdefault(t.split()[0], []).append(t)
    writes: dict[int, set[str]] = {}
    for i, p in enumerate(corpus):
        text = " ".join(p["text"].split())
        found = {t for w in set(re.findall(r"[\w'.-]+", text)) for t in first.get(w, ())
                 if t != p["title"] and re.search(rf"(?<!\w){re.escape(t)}(?!\w)", text)}
        writes[i] = found
    indegree = Counter(t for ts in writes.values() for t in ts)
    paths = []
    for a, ts in writes.items():
        for tb in sorted(ts):
            if indegree[tb] > max_indegree:
                continue
            for b in by_title[tb]:
                for tc in sorted(writes[b]):
                    if tc in ts or tc == corpus[a]["title"] or indegree[tc] > max_indegree:
                        continue
                    paths.extend((a, b, c) for c in by_title[tc])
    return paths


def wiki_chain_passages(n: int, base: list[dict], max_indegree: int = 5) -> list[dict]:
    """``base`` then the passages of disjoint three-hop title paths until ``n`` more."""
    corpus = json.loads((WIKI / "2wikimultihopqa_corpus.json").read_text())
    seen = {(p["title"], p["text"]) for p in base}
    picked = list(base)
    for path in title_paths(corpus, max_indegree):
        ps = [corpus[i] for i in path]
        if any((p["title"], p["text"]) in seen for p in ps):
            continue
        if len(picked) + 3 > len(base) + n:
            break
        for p in ps:
            seen.add((p["title"], p["text"]))
            picked.append(p)
    return picked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--passages", type=int, default=150)
    ap.add_argument("--chain-passages", type=int, default=0,
                    help="build wiki-qg2: the first --passages picks, then this many passages of three-hop title paths")
    ap.add_argument("--max-indegree", type=int, default=5)
    ap.add_argument("--medical-chunks", type=int, default=24)
    args = ap.parse_args()
    from ragrouter.corpus.demo import medical_slice

    name = "wiki-qg2" if args.chain_passages else "wiki-qg"
    passages = wiki_passages(args.passages)
    if args.chain_passages:
        passages = wiki_chain_passages(args.chain_passages, passages, args.max_indegree)
    out = Path(f"/tmp/qg/{name}-slice.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(passages))
    wiki = loaders.load("2wikimultihopqa", [out])
    med = medical_slice(DATA / "medical", args.medical_chunks, 0, 1.0)
    engine = eng.make_engine(args.db)
    migrate.upgrade(engine)
    with write_lock(engine), engine.begin() as conn:  # each write inserts only what is new
        ingest_store.write_dataset(conn, name, "2wikimultihopqa", wiki, [])
        ingest_store.write_dataset(conn, "medical-qg", "graphrag-bench", Dataset(documents=med.documents,
                                                                                 questions=[]), [])
    print(f"{name}: {len(wiki.documents)} passages; medical-qg: 1 document of {args.medical_chunks} chunks")


if __name__ == "__main__":
    main()
