"""Regenerate the fixture slices in this folder from the shared real data (run once by hand).

    python tests/data/make_fixtures.py [/path/to/shared/data]

Every fixture is the first records of a real file (or, for CUAD, three whole real contracts
and all of their clause rows), written back in the file's own layout.
"""

import json
import shutil
import sys
from pathlib import Path

SRC = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[3] / "shared" / "data")
OUT = Path(__file__).resolve().parent


def dump_json(name, value):
    (OUT / name).write_text(json.dumps(value, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def dump_jsonl(name, rows):
    with (OUT / name).open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def jsonl(path):
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


# MuSiQue: the first 6 train records (hop types 2hop, 4hop1, 2hop, 2hop, 2hop, 3hop1).
dump_json("musique_slice.json", json.loads((SRC / "musique/musique_train100.json").read_text())[:6])

# QuALITY: the official example file as it is (2 identical lines, flat layout, HTML article).
shutil.copyfile(SRC / "quality/official_quality_example.jsonl", OUT / "quality_example.jsonl")

# SQuALITY: the first 2 dev stories with their 5 questions each.
dump_jsonl("squality_slice.jsonl", jsonl(SRC / "quality/squality_v1-3_txt/dev.jsonl")[:2])

# CUAD: the two shortest contracts plus the shortest one with a blank normalised answer.
contracts = json.loads((SRC / "legal/cuad_subset94/contracts.json").read_text())
qa = jsonl(SRC / "legal/cuad_subset94/clause_qa.jsonl")
blank = {q["doc_id"] for q in qa if not q["answer"].strip()}
by_len = sorted(contracts, key=lambda c: len(c["text"]))
keep = by_len[:2] + [next(c for c in by_len if c["doc_id"] in blank)]
ids = {c["doc_id"] for c in keep}
dump_json("cuad_contracts_slice.json", keep)
dump_jsonl("cuad_clause_qa_slice.jsonl", [q for q in qa if q["doc_id"] in ids])

# 2WikiMultihopQA (HippoRAG corpus + typed questions): first 40 passages, first 6 questions.
two = SRC / "musique/2wikimultihopqa_substitute"
dump_json("twowiki_corpus_slice.json", json.loads((two / "2wikimultihopqa_corpus.json").read_text())[:40])
dump_json("twowiki_questions_slice.json", json.loads((two / "2wikimultihopqa_questions.json").read_text())[:6])

# RAGRouter-Bench questions: the first 30 validation rows (no corpus is available).
dump_jsonl("ragrouter_questions_slice.jsonl", jsonl(SRC / "ragrouter_bench/all_val.jsonl")[:30])
