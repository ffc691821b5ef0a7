"""Dataset loaders (paper §3.2, App. A.1): counts on real data and slices, and bad input."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from ragrouter.ingest.loaders import LOADERS, content_id, load
from ragrouter.ingest.records import Dataset, LoaderError

HERE = Path(__file__).resolve().parent / "data"
from tests.conftest import SHARED_DATA as DATA


def real(*parts):
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not found: {path}")
    return path


def jsonl(path):
    return [json.loads(line) for line in Path(path).open(encoding="utf-8") if line.strip()]


def write(path: Path, content) -> Path:
    """Write bytes, text, or a value as JSON (``.json``) / JSON lines (``.jsonl``)."""
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in content), encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def test_registry():
    assert set(LOADERS) == {"graphrag-bench", "musique", "quality", "squality", "cuad", "ragrouter",
                            "2wikimultihopqa", "jsonl", "files"}
    with pytest.raises(ValueError, match="unknown dataset format 'hotpot'"):
        load("hotpot", [HERE / "musique_slice.json"])
    with pytest.raises(ValueError, match="no input files"):
        load("ragrouter", [])


# --------------------------------------------------------------------------- real data


def test_medical_graphrag_bench_matches_the_paper():
    from ragrouter.llm import tokens

    corpus, questions = real("medical", "medical.json"), real("medical", "medical_questions.json")
    ds = load("graphrag-bench", [corpus, questions])
    assert len(ds.documents) == 1
    doc = ds.documents[0]
    assert (doc.external_id, doc.title, doc.meta) == ("Medical", "", {"corpus_name": "Medical"})
    assert len(doc.text) == 1_052_159
    assert tokens.count(doc.text) == 221_495  # paper Table 4
    assert len(ds.questions) == 1_896 == 2_062 - 166
    assert ds.qtype_counts() == {"factual": 1098, "reasoning": 509, "summary": 289}
    assert ds.dropped == {"creative_generation": 166}
    assert all(q.evidence and q.evidence[0].strip() for q in ds.questions)
    assert all(q.supporting_doc_ids == ["Medical"] and q.hops is None for q in ds.questions)
    q0 = ds.questions[0]
    assert q0.external_id == "Medical-73586ddc"
    assert q0.meta["question_type"] == "Fact Retrieval" and "evidence_relations" in q0.meta
    assert load("graphrag-bench", [questions, corpus]) == ds  # order of the paths is irrelevant


def test_medical_questions_are_the_ragrouter_ones():
    """Reference: the RAGRouter release's medical questions, matched by exact text and type."""
    ds = load("graphrag-bench", [real("medical", "medical_questions.json")])
    assert ds.documents == [] and len(ds.questions) == 1_896
    rr = load("ragrouter", [real("ragrouter_bench", f"all_{s}.jsonl") for s in ("train", "val", "test")])
    theirs = Counter((q.question, q.qtype) for q in rr.questions if q.meta["domain"] == "graphragBench_medical")
    ours = Counter((q.question, q.qtype) for q in ds.questions)
    assert sum(ours.values()) == 1_896 and ours == theirs
    # Without the corpus, no supporting document can be named.
    assert all(q.supporting_doc_ids == [] for q in ds.questions)


def test_ragrouter_release_question_counts():
    paths = [real("ragrouter_bench", f"all_{s}.jsonl") for s in ("train", "val", "test")]
    ds = load("ragrouter", paths)
    assert len(ds.questions) == 7_727 and ds.documents == []
    per = Counter((q.meta["domain"], q.meta["type"]) for q in ds.questions)
    expected = {"graphragBench_medical": (1098, 509, 289), "musique": (398, 2590, 368),
                "quality": (454, 461, 283), "ultraDomain_legal": (370, 526, 381)}  # paper Table 3
    for domain, (single, multi, summary) in expected.items():
        assert (per[domain, "single_hop"], per[domain, "multi_hop"], per[domain, "summary"]) == (
            single, multi, summary)
    assert ds.qtype_counts() == {"factual": 2320, "reasoning": 4086, "summary": 1321}


def test_musique_train100_real():
    records = json.loads(real("musique", "musique_train100.json").read_text())
    corpus_path = real("musique", "musique_train100_corpus.json")
    ds = load("musique", [real("musique", "musique_train100.json")])
    assert len(ds.questions) == 100 and len(ds.documents) == 1_890
    assert ds.dropped == {"duplicate_paragraph": 110}  # 2,000 paragraphs, 1,890 distinct
    # Reference: HippoRAG's corpus file is exactly the set of distinct paragraphs.
    hippo = json.loads(corpus_path.read_text())
    assert {(d.title, d.text) for d in ds.documents} == {(p["title"], p["text"]) for p in hippo}
    assert Counter(q.hops for q in ds.questions) == {2: 68, 3: 27, 4: 5}
    assert sum(len(q.supporting_doc_ids) for q in ds.questions) == sum(
        p["is_supporting"] for r in records for p in r["paragraphs"])
    merged = load("musique", [corpus_path, real("musique", "musique_train100.json")])
    assert {d.external_id for d in merged.documents} == {d.external_id for d in ds.documents}
    assert merged.questions == ds.questions
    assert merged.dropped == {"duplicate_paragraph": 2_000}


def test_squality_real():
    ds = load("squality", [real("quality", "squality_v1-3_txt", "train.jsonl"),
                           real("quality", "squality_v1-3_txt", "dev.jsonl")])
    assert (len(ds.documents), len(ds.questions)) == (75, 375)
    assert ds.qtype_counts() == {"factual": 0, "reasoning": 0, "summary": 375}
    assert sum(q.meta["question_verbatim"] == "What is the plot of the story?" for q in ds.questions) == 75
    assert all(len(q.meta["responses"]) == 4 for q in ds.questions)


def test_cuad_real():
    ds = load("cuad", [real("legal", "cuad_subset94", "clause_qa.jsonl"),
                       real("legal", "cuad_subset94", "contracts.json")])
    assert (len(ds.documents), len(ds.questions)) == (94, 1_445)
    assert len({q.meta["category"] for q in ds.questions}) == 41
    assert sum(q.meta.get("answer_from") == "evidence_spans" for q in ds.questions) == 30
    raw = json.loads(real("legal", "cuad_subset94", "contracts.json").read_text())
    assert [(d.external_id, d.text) for d in ds.documents] == [(c["doc_id"], c["text"]) for c in raw]


def test_2wikimultihopqa_real():
    base = ("musique", "2wikimultihopqa_substitute")
    ds = load("2wikimultihopqa", [real(*base, "2wikimultihopqa_questions.json"),
                                  real(*base, "2wikimultihopqa_corpus.json")])
    assert (len(ds.documents), len(ds.questions)) == (6_119, 1_000)
    assert Counter(q.meta["question_type"] for q in ds.questions) == {
        "compositional": 413, "comparison": 244, "bridge_comparison": 235, "inference": 108}


def test_graphrag_bench_novel_has_a_conflicting_duplicate_id():
    """The real novel questions reuse id Novel-55f0c0e2 for two different records."""
    with pytest.raises(LoaderError) as info:
        load("graphrag-bench", [real("quality", "graphragbench_novel", "novel_questions.json")])
    msg = str(info.value)
    assert "novel_questions.json: record [871] (id 'Novel-55f0c0e2')" in msg
    assert "duplicate question id" in msg and "record [329]" in msg
    corpus = load("graphrag-bench", [real("quality", "graphragbench_novel", "novel_corpus.json")])
    assert len(corpus.documents) == 20 and all(d.title == "" for d in corpus.documents)


# --------------------------------------------------------------------------- slices


def test_musique_slice():
    raw = json.loads((HERE / "musique_slice.json").read_text())
    ds = load("musique", [HERE / "musique_slice.json"])
    paras = [(p["title"], p["paragraph_text"]) for r in raw for p in r["paragraphs"]]
    assert len(ds.documents) == len(set(paras)) == 120
    assert [q.hops for q in ds.questions] == [2, 4, 2, 2, 2, 3]
    assert all(q.qtype == "reasoning" for q in ds.questions)
    for q, r in zip(ds.questions, raw):
        gold = [p for p in r["paragraphs"] if p["is_supporting"]]
        assert q.supporting_doc_ids == [content_id(p["title"], p["paragraph_text"]) for p in gold]
        assert q.evidence == [p["paragraph_text"] for p in gold]
        assert q.answer == r["answer"] and q.meta["answer_aliases"] == r["answer_aliases"]
    docs = {d.external_id: d for d in ds.documents}
    assert docs[ds.questions[0].supporting_doc_ids[0]].title == "Journal of Psychotherapy Integration"


def test_musique_unanswerable_is_a_question_marked_unanswerable(tmp_path):
    # MuSiQue-Full's answerable: false maps to Question.unanswerable (issue 30); it is no longer dropped
    raw = json.loads((HERE / "musique_slice.json").read_text())[:2]
    raw[1]["answerable"] = False
    ds = load("musique", [write(tmp_path / "m.jsonl", raw)])  # JSONL works too
    assert [(q.external_id, q.unanswerable) for q in ds.questions] == [(raw[0]["id"], False), (raw[1]["id"], True)]
    assert ds.questions[1].answer == "Insufficient information"
    assert ds.questions[1].meta["dataset_answer"] == raw[1]["answer"]
    paragraphs = {(p["title"], p["paragraph_text"]) for r in raw for p in r["paragraphs"]}
    assert len(ds.documents) == len(paragraphs) and "unanswerable" not in ds.dropped


def test_quality_example_flat_layout():
    ds = load("quality", [HERE / "quality_example.jsonl"])
    assert len(ds.documents) == 1 and len(ds.questions) == 5
    assert ds.dropped == {"duplicate_record": 1}  # the file holds the same line twice
    doc = ds.documents[0]
    assert (doc.external_id, doc.title, doc.meta["author"]) == ("52845", "The Girl in His Mind", "Young, Robert F.")
    assert doc.text.startswith("<!DOCTYPE html")
    raw = jsonl(HERE / "quality_example.jsonl")[0]
    for n, q in enumerate(ds.questions, 1):
        gold = raw[f"question{n}_gold_label"]
        assert q.answer == raw[f"question{n}option{gold}"] and q.meta["gold_label"] == gold
        assert q.qtype == "factual" and q.supporting_doc_ids == ["52845"]
    assert ds.questions[0].answer.startswith("Because Deirdre has fallen in love with Blake")
    assert ds.questions[3].answer == "a criminal that Blake is hunting"


def _quality_v1(raw, set_id, gold=True):
    """The example article in the official QuALITY v1 layout (nested ``questions``)."""
    qs = []
    for n in range(1, 6):
        q = {"question": raw[f"question{n}"], "question_unique_id": f"{set_id}_{n}",
             "options": [raw[f"question{n}option{k}"] for k in range(1, 5)], "difficult": n % 2}
        if gold:
            q["gold_label"] = raw[f"question{n}_gold_label"]
        qs.append(q)
    return {"article_id": raw["article_id"], "set_unique_id": set_id, "title": raw["title"],
            "author": raw["author"], "article": "".join(raw["article"]), "questions": qs}


def test_quality_official_v1_layout(tmp_path):
    raw = jsonl(HERE / "quality_example.jsonl")[0]
    path = write(tmp_path / "QuALITY.v1.0.1.htmlstripped.dev",  # no suffix, like the release
                 "\n".join(json.dumps(r) for r in (_quality_v1(raw, "S1"), _quality_v1(raw, "S2", gold=False))))
    ds = load("quality", [path])
    assert len(ds.documents) == 1 and [q.external_id for q in ds.questions] == [f"S1_{n}" for n in range(1, 6)]
    assert ds.dropped == {"no_gold_label": 5}
    flat = load("quality", [HERE / "quality_example.jsonl"])
    assert [q.answer for q in ds.questions] == [q.answer for q in flat.questions]
    assert ds.documents[0].text == flat.documents[0].text
    assert ds.questions[0].meta["difficult"] == 1


def test_quality_conflicts(tmp_path):
    raw = jsonl(HERE / "quality_example.jsonl")[0]
    a, b = _quality_v1(raw, "S1"), _quality_v1(raw, "S1")
    b["questions"][0]["gold_label"] = 1
    with pytest.raises(LoaderError, match=r"q\.jsonl: line 2 \(id 'S1'\): duplicate question-set id 'S1' "
                                          r"with different content \(first seen at .*q\.jsonl: line 1"):
        load("quality", [write(tmp_path / "q.jsonl", [a, b])])
    c = _quality_v1(raw, "S2")
    c["article"] += " changed"
    with pytest.raises(LoaderError, match=r"line 2 \(id 'S2'\): article_id '52845' has a different title or text than at .*q2\.jsonl: line 1"):
        load("quality", [write(tmp_path / "q2.jsonl", [a, c])])
    a["questions"][2]["gold_label"] = 5
    with pytest.raises(LoaderError, match=r"questions\[2\] \(id 'S1_3'\): question 'S1_3': gold_label 5 is not in 1\.\.4"):
        load("quality", [write(tmp_path / "q3.jsonl", [a])])


def test_squality_slice():
    raw = jsonl(HERE / "squality_slice.jsonl")
    ds = load("squality", [HERE / "squality_slice.jsonl"])
    assert [d.external_id for d in ds.documents] == ["63833", "63392"]
    assert all(d.title == "" and d.text for d in ds.documents)
    assert len(ds.questions) == 10 and ds.qtype_counts()["summary"] == 10
    q = ds.questions[0]
    assert q.external_id == "63833_q1" and q.meta["question_verbatim"] == "What is the plot of the story?"
    assert q.answer == raw[0]["questions"][0]["responses"][0]["response_text"]
    assert q.supporting_doc_ids == ["63833"] and len(q.meta["responses"]) == 4


def test_cuad_slice():
    ds = load("cuad", [HERE / "cuad_clause_qa_slice.jsonl", HERE / "cuad_contracts_slice.json"])
    raw = jsonl(HERE / "cuad_clause_qa_slice.jsonl")
    assert len(ds.documents) == 3 and len(ds.questions) == len(raw) == 14
    assert all(q.qtype == "factual" and q.supporting_doc_ids == [q.meta["doc_id"]] for q in ds.questions)
    blank = [q for q in ds.questions if q.meta.get("answer_from") == "evidence_spans"]
    assert len(blank) == sum(not r["answer"].strip() for r in raw) >= 1
    assert all(q.answer == "\n".join(q.evidence) for q in blank)
    q = ds.questions[0]
    assert q.external_id == f"{raw[0]['doc_id']}::{raw[0]['category']}" and q.evidence == raw[0]["evidence_spans"]


def test_cuad_question_for_unknown_contract(tmp_path):
    contracts = json.loads((HERE / "cuad_contracts_slice.json").read_text())[:1]
    qa = jsonl(HERE / "cuad_clause_qa_slice.jsonl")
    other = next(r for r in qa if r["doc_id"] != contracts[0]["doc_id"])
    with pytest.raises(LoaderError, match=r"qa\.jsonl: line 1 \(id '.*'\): supporting document id .* is not in the corpus"):
        load("cuad", [write(tmp_path / "c.json", contracts), write(tmp_path / "qa.jsonl", [other])])


def test_2wikimultihopqa_slice():
    ds = load("2wikimultihopqa", [HERE / "twowiki_corpus_slice.json", HERE / "twowiki_questions_slice.json"])
    assert (len(ds.documents), len(ds.questions)) == (40, 6)
    assert ds.documents[0].title == "Teutberga"
    q = ds.questions[0]
    assert q.qtype == "reasoning" and q.answer == "20 March 851"
    assert q.evidence == ["Lothair II | mother | Ermengarde of Tours",
                          "Ermengarde of Tours | date of death | 20 March 851"]


def test_ragrouter_slice_and_layouts(tmp_path):
    ds = load("ragrouter", [HERE / "ragrouter_questions_slice.jsonl"])
    assert len(ds.questions) == 30 and ds.qtype_counts() == {"factual": 11, "reasoning": 13, "summary": 6}
    assert ds.questions[0].meta == {"type": "multi_hop", "label": 1, "domain": "ultraDomain_legal"}
    corpus = [{"id": "d1", "title": "Teutberga", "text": "Teutberga was a queen."},
              {"id": 2, "context": "Lothair II was king."}]
    questions = [{"id": "q1", "question": "Who was Teutberga?", "answer": "A queen.", "type": "single_hop",
                  "supporting_doc_ids": ["d1"]},
                 {"id": "q2", "question": "Sum up.", "answer": "Royals.", "type": "summary", "evidence": "x"}]
    as_json = load("ragrouter", [write(tmp_path / "Corpus.json", corpus), write(tmp_path / "Question.json", questions)])
    as_jsonl = load("ragrouter", [write(tmp_path / "Question.jsonl", questions), write(tmp_path / "Corpus.jsonl", corpus)])
    assert as_json == as_jsonl
    assert [(d.external_id, d.title, d.text) for d in as_json.documents] == [
        ("d1", "Teutberga", "Teutberga was a queen."), ("2", "", "Lothair II was king.")]
    assert [q.qtype for q in as_json.questions] == ["factual", "summary"]
    assert as_json.questions[0].supporting_doc_ids == ["d1"] and as_json.questions[1].evidence == ["x"]
    questions[0]["supporting_doc_ids"] = ["d9"]
    with pytest.raises(LoaderError, match=r"Q2\.json: record \[0\] \(id 'q1'\): supporting document id 'd9'"):
        load("ragrouter", [write(tmp_path / "C2.json", corpus), write(tmp_path / "Q2.json", questions)])


def test_generic_jsonl(tmp_path):
    docs = write(tmp_path / "docs.jsonl", [{"id": "a", "text": "alpha"}, {"id": "b", "title": "B", "text": "beta"}])
    qs = write(tmp_path / "qs.jsonl", [{"id": "1", "question": "What?", "answer": "alpha", "type": "factual"}])
    ds = load("jsonl", [qs, docs])
    assert [d.external_id for d in ds.documents] == ["a", "b"] and ds.documents[1].title == "B"
    assert isinstance(ds, Dataset) and ds.questions[0].qtype == "factual"
    assert load("jsonl", [docs]).questions == []
    alone = load("jsonl", [qs])  # questions alone, for a corpus already in the store
    assert alone.documents == [] and [q.external_id for q in alone.questions] == ["1"]
    docs2 = write(tmp_path / "docs2.jsonl", [{"id": "c", "text": "gamma"}])
    with pytest.raises(LoaderError, match=r"docs\.jsonl, .*docs2\.jsonl: format 'jsonl' takes one documents file \(or none\), got 2"):
        load("jsonl", [docs, docs2])


# --------------------------------------------------------------------------- malformed input

DOC = {"id": "d1", "title": "T", "text": "some text"}
Q = {"id": "q1", "question": "What?", "answer": "That.", "type": "single_hop"}


def _bad_utf8_json(tmp_path):
    data = json.dumps([DOC, {"id": "d2", "text": "caf__"}]).encode().replace(b"caf__", b"caf\xe9!")
    bad = data.index(b"\xe9")
    return write(tmp_path / "corpus.json", data), f"byte offset {bad}"


def _bad_utf8_jsonl(tmp_path):
    lines = [json.dumps(DOC).encode(), json.dumps({"id": "d2", "text": "ok"}).encode(),
             b'{"id": "d3", "text": "bad \xff here"}']
    data = b"\n".join(lines) + b"\n"
    bad = data.index(b"\xff")
    return write(tmp_path / "corpus.jsonl", data), f"byte offset {bad}"


# (name, format, files as {name: content}, expected substrings of the message)
CASES = [
    ("not json", "ragrouter", {"corpus.json": "id,title,text\nd1,T,x\n"},
     ["corpus.json: line 1 column 1: not valid JSON"]),
    ("not json line", "jsonl", {"docs.jsonl": json.dumps(DOC) + "\n\n{oops\n"},
     ["docs.jsonl: line 3: not valid JSON at column 2"]),
    ("truncated json", "graphrag-bench", {"medical.json": '{"corpus_name": "M", "context": "abc'},
     ["medical.json: line 1 column", "not valid JSON"]),
    ("empty file", "ragrouter", {"Corpus.json": "  \n"}, ["Corpus.json: file is empty"]),
    ("empty array", "ragrouter", {"Corpus.json": "[]"}, ["Corpus.json: no records"]),
    ("not objects", "ragrouter", {"Corpus.json": '["a", "b"]'},
     ["Corpus.json: record [0]: expected a JSON object, got string"]),
    ("unclassifiable", "cuad", {"x.json": '[{"doc_id": "a", "body": "b"}]'},
     ["x.json: record [0] (id 'a'): cannot tell whether this is a corpus or a questions file",
      "keys ['body', 'doc_id']"]),
    ("missing text", "ragrouter", {"Corpus.jsonl": [DOC, {"id": "d2", "title": "x"}]},
     ["Corpus.jsonl: line 2 (id 'd2'): missing key 'text' (or 'context')"]),
    ("missing id", "ragrouter", {"Corpus.json": [DOC, {"text": "x"}]},
     ["Corpus.json: record [1]: missing key 'id'"]),
    ("missing answer", "ragrouter", {"Q.json": [Q, {**Q, "id": "q2", "answer": None}]},
     ["Q.json: record [1] (id 'q2'): key 'answer' must be a string, got null"]),
    ("missing question_type", "graphrag-bench",
     {"qs.json": [{"id": "m1", "question": "Q?", "answer": "A", "evidence": ""}]},
     ["qs.json: record [0] (id 'm1'): missing key 'question_type'"]),
    ("text wrong type", "ragrouter", {"Corpus.json": [DOC, {"id": "d2", "text": 42}]},
     ["Corpus.json: record [1] (id 'd2'): key 'text' must be a string, got number"]),
    ("id wrong type", "ragrouter", {"Corpus.json": [{"id": ["d1"], "text": "x"}]},
     ["Corpus.json: record [0]: key 'id' must be a string or an integer, got array"]),
    ("id boolean", "jsonl", {"d.jsonl": [{"id": True, "text": "x"}]},
     ["d.jsonl: line 1: key 'id' must be a string or an integer, got boolean"]),
    ("paragraphs wrong type", "musique",
     {"m.json": [{"id": "2hop__1_2", "question": "Q?", "answer": "A", "paragraphs": {}}]},
     ["m.json: record [0] (id '2hop__1_2'): key 'paragraphs' must be an array, got object"]),
    ("empty document", "ragrouter", {"Corpus.json": [DOC, {"id": "d2", "text": " \n\t "}]},
     ["Corpus.json: record [1] (id 'd2'): document text 'text' is empty"]),
    ("empty context", "graphrag-bench", {"c.json": {"corpus_name": "Medical", "context": ""}},
     ["c.json: top-level object (id 'Medical'): document text 'context' is empty"]),
    ("empty paragraph", "musique",
     {"m.json": [{"id": "2hop__1_2", "question": "Q?", "answer": "A", "paragraphs": [
         {"idx": 0, "title": "T", "paragraph_text": "p", "is_supporting": True},
         {"idx": 1, "title": "U", "paragraph_text": "", "is_supporting": False}]}]},
     ["m.json: record [0] (id '2hop__1_2') paragraphs[1]: paragraph text 'paragraph_text' is empty"]),
    ("duplicate document", "ragrouter", {"Corpus.json": [DOC, {"id": "d2", "text": "x"}, DOC]},
     ["Corpus.json: record [2] (id 'd1'): duplicate document id 'd1' (first seen at", "Corpus.json: record [0]"]),
    ("duplicate document across files", "ragrouter",
     {"A.jsonl": [DOC], "B.jsonl": [{"id": "d1", "text": "other"}]},
     ["B.jsonl: line 1 (id 'd1'): duplicate document id 'd1' (first seen at", "A.jsonl: line 1"]),
    ("duplicate question", "ragrouter", {"Q.jsonl": [Q, {**Q, "question": "Again?"}]},
     ["Q.jsonl: line 2 (id 'q1'): duplicate question id 'q1'"]),
    ("duplicate graphrag question", "graphrag-bench",
     {"qs.json": [{"id": "m1", "question": "Q?", "answer": "A", "question_type": "Creative Generation"},
                  {"id": "m1", "question": "Q?", "answer": "A", "question_type": "Fact Retrieval"}]},
     ["qs.json: record [1] (id 'm1'): duplicate question id 'm1'"]),
    ("duplicate corpus name", "graphrag-bench",
     {"c.json": [{"corpus_name": "N1", "context": "a"}, {"corpus_name": "N1", "context": "b"}]},
     ["c.json: record [1] (id 'N1'): duplicate document id 'N1'"]),
    ("unknown type", "ragrouter", {"Q.json": [Q, {**Q, "id": "q2", "type": "multi-hop"}]},
     ["Q.json: record [1] (id 'q2'): unknown question type 'multi-hop' in key 'type'"]),
    ("unknown graphrag type", "graphrag-bench",
     {"qs.json": [{"id": "m1", "question": "Q?", "answer": "A", "question_type": ""}]},
     ["qs.json: record [0] (id 'm1'): unknown question type '' in key 'question_type'",
      "'Contextual Summarize'"]),
    ("unknown 2wiki type", "2wikimultihopqa",
     {"q.json": [{"id": "w1", "question": "Q?", "answer": "A", "question_type": "bridge"}]},
     ["q.json: record [0] (id 'w1'): unknown question type 'bridge'"]),
    ("musique id without hops", "musique",
     {"m.json": [{"id": "q_123", "question": "Q?", "answer": "A", "paragraphs": []}]},
     ["m.json: record [0] (id 'q_123'): cannot read the hop count from id 'q_123'"]),
    ("squality no responses", "squality",
     {"s.jsonl": [{"metadata": {"passage_id": "7"}, "document": "story",
                   "questions": [{"question_text": "Plot?", "question_number": 1, "responses": []}]}]},
     ["s.jsonl: line 1 (id '7') questions[0] (id '7_q1'): no responses"]),
    ("lone surrogate", "ragrouter", {"Corpus.json": '[{"id": "d1", "text": "bad \\ud800 text"}]'},
     ["Corpus.json: record [0] (id 'd1'): key 'text' holds an unpaired surrogate at character 4"]),
]


@pytest.mark.parametrize("name,fmt,files,needles", CASES, ids=[c[0] for c in CASES])
def test_malformed_input(tmp_path, name, fmt, files, needles):
    paths = [write(tmp_path / fname, content) for fname, content in files.items()]
    with pytest.raises(LoaderError) as info:
        load(fmt, paths)
    msg = str(info.value)
    assert any(str(p) in msg for p in paths), msg  # names the file (full path)
    for needle in needles:
        assert needle in msg, msg
    assert "\n" not in msg  # one clear line


@pytest.mark.parametrize("maker,record", [(_bad_utf8_json, "record [1] (id 'd2')"), (_bad_utf8_jsonl, "line 3")])
def test_invalid_utf8_reports_byte_offset_and_record(tmp_path, maker, record):
    path, offset = maker(tmp_path)
    with pytest.raises(LoaderError) as info:
        load("ragrouter", [path])
    msg = str(info.value)
    assert msg.startswith(f"{path}: {record}: invalid UTF-8 at {offset}"), msg


def test_invalid_utf8_outside_a_string(tmp_path):
    data = b'[{"id": "d1", "text": "x"}]\xff'
    path = write(tmp_path / "c.json", data)
    with pytest.raises(LoaderError, match=r"c\.json: line 1: invalid UTF-8 at byte offset 27"):
        load("ragrouter", [path])


def test_binary_file(tmp_path):
    path = write(tmp_path / "image.json", b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(LoaderError, match=r"image\.json: line 1: invalid UTF-8 at byte offset 0"):
        load("graphrag-bench", [path])


def test_bom_and_missing_file(tmp_path):
    path = write(tmp_path / "Corpus.json", b"\xef\xbb\xbf" + json.dumps([DOC]).encode())
    assert load("ragrouter", [path]).documents[0].text == "some text"
    with pytest.raises(LoaderError, match=r"nope\.json: no such file"):
        load("ragrouter", [tmp_path / "nope.json"])


# ---------------------------------------------------------------------------------------------
# Self-contained questions (issue 15.3): qualified with their document's title by default


def test_cuad_questions_are_qualified_with_the_contract_title():
    paths = [real("legal", "cuad_subset94", "clause_qa.jsonl"), real("legal", "cuad_subset94", "contracts.json")]
    ds, verbatim = load("cuad", paths), load("cuad", paths, qualify_questions=False)
    titles = {c["doc_id"]: c["title"] for c in json.loads(paths[1].read_text())}
    assert [q.external_id for q in ds.questions] == [q.external_id for q in verbatim.questions]
    for q, v in zip(ds.questions, verbatim.questions):
        assert q.question == f'In the contract "{" ".join(titles[v.meta["doc_id"]].split())}": {v.question}'
        assert q.meta["question_verbatim"] == v.question and q.answer == v.answer
    name = [q for q in ds.questions if q.meta["category"] == "Document Name"]
    assert len(name) == 94 and len({q.question for q in name}) == 94  # one text per contract now
    # Verbatim, "The name of the contract" repeats with different answers; qualified, nothing repeats.
    from ragrouter.ingest.loaders import repeated_questions

    rep = dict((t, (n, a)) for t, n, a in repeated_questions(verbatim))
    n, answers = rep["The name of the contract"]
    assert n == 94 and answers == len({q.answer.strip() for q in verbatim.questions
                                       if q.meta["category"] == "Document Name"}) > 1
    assert repeated_questions(ds) == []


def test_squality_questions_are_qualified_with_the_story_title():
    ds = load("squality", [real("quality", "squality_v1-3_txt", "dev.jsonl")])
    plots = [q for q in ds.questions if q.meta["question_verbatim"] == "What is the plot of the story?"]
    assert len(plots) == 25 and len({q.question for q in plots}) == 25
    by_doc = {q.supporting_doc_ids[0]: q.question for q in plots}
    assert by_doc["63833"] == 'In the story "Jinx Ship To The Rescue": What is the plot of the story?'
    from ragrouter.ingest.loaders import repeated_questions, story_title

    assert repeated_questions(ds) == []
    assert story_title("\n\nProduced by Greg Weeks\nDistributed Proofreading Team at http://www.pgdp.net\n"
                       "Doorway to Kal-Jmar\nBy Stuart Fleming\nTwo men") == "Doorway to Kal-Jmar"
    verbatim = load("squality", [real("quality", "squality_v1-3_txt", "dev.jsonl")], qualify_questions=False)
    assert ("What is the plot of the story?", 25, 25) in repeated_questions(verbatim)


def test_ingest_warns_about_repeated_questions(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    args = [sys.executable, "cli.py", "--db", db, "ingest", "--corpus", "stories", "--format", "squality",
            str(HERE / "squality_slice.jsonl")]
    env = {**os.environ, "RAGROUTER_CONFIG": ""}
    subprocess.run([sys.executable, "cli.py", "--db", db, "db", "upgrade"], cwd=root, check=True, env=env,
                   capture_output=True)
    out = subprocess.run(args + ["--verbatim-questions"], cwd=root, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    warning = [ln for ln in out.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warning) == 1 and warning[0].startswith("warning: 2 question text(s) repeat with different "
                                                       "answers across the 2 documents (e.g. 'Describe the setting")
    assert "x 2 with 2 answers" in warning[0]
    assert "ingest without --verbatim-questions" in warning[0]
    out = subprocess.run(args[:6] + ["stories2"] + args[7:], cwd=root, capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr
