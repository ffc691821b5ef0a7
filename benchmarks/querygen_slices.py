"""The two corpora of issue #19's real query-generation passes, ingested into one store.

* ``wiki-qg``: a slice of the 2WikiMultihopQA substitute corpus — the passages whose title is
  an entity of the evidence triples of the first compositional questions (so bridges exist:
  "Lothair II" → mother "Ermengarde of Tours" → her date of death), ≥ ``--passages`` of them,
  in file order.
* ``medical-qg``: the 24-chunk medical slice of the main job (``demo.medical_slice``), without
  its questions (the passes generate their own).

    python benchmarks/querygen_slices.py --db duckdb:////tmp/qg/qg.duckdb --passages 150
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--passages", type=int, default=150)
    ap.add_argument("--medical-chunks", type=int, default=24)
    args = ap.parse_args()
    from ragrouter.demo import medical_slice

    out = Path("/tmp/qg/wiki-slice.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(wiki_passages(args.passages)))
    wiki = loaders.load("2wikimultihopqa", [out])
    med = medical_slice(DATA / "medical", args.medical_chunks, 0, 1.0)
    engine = eng.make_engine(args.db)
    migrate.upgrade(engine)
    with write_lock(engine), engine.begin() as conn:
        ingest_store.write_dataset(conn, "wiki-qg", "2wikimultihopqa", wiki, [])
        ingest_store.write_dataset(conn, "medical-qg", "graphrag-bench", Dataset(documents=med.documents,
                                                                                 questions=[]), [])
    print(f"wiki-qg: {len(wiki.documents)} passages; medical-qg: 1 document of {args.medical_chunks} chunks")


if __name__ == "__main__":
    main()
