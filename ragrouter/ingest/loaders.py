"""Dataset loaders: dataset files → :class:`~ragrouter.ingest.records.Dataset`.

``LOADERS`` maps a format name to a function ``(paths) -> Dataset``. Every loader takes the
files of one dataset in any order and decides **by content** which file is the corpus and
which holds the questions: it looks at the first record of each file (a JSON object, the first
element of a JSON array, or the first line of a JSONL file). Corpus files are processed before
question files, each group in the order given, so the result does not depend on the order of
the paths (only the order of documents within several corpus files does).

Reading: a file whose name ends in ``.jsonl``/``.ndjson``/``.jsonlines`` is streamed line by
line; any other file is read once and parsed as JSON, and if that fails with "extra data" while
its first line is a JSON value on its own, it is taken as JSONL (QuALITY's official files have
no suffix). A UTF-8 byte-order mark is accepted. Anything malformed raises one
:class:`~ragrouter.ingest.records.LoaderError` naming the file, the record and the problem:
invalid UTF-8 (with the byte offset), text that is not JSON, missing keys, wrong types, empty
documents, unpaired surrogates, duplicate document or question ids, unknown question types.

Formats (see each loader's docstring for the details and decisions):

=================  =========================================================================
graphrag-bench     GraphRAG-Bench corpus ``{corpus_name, context}`` (or a list) + questions
musique            MuSiQue records with ``paragraphs`` (+ optional HippoRAG ``{title,text}``)
quality            QuALITY jsonl (official v1 nested ``questions`` or the flat example layout)
squality           SQuALITY jsonl ``{metadata, document, questions[responses]}``
cuad               ``contracts.json`` + ``clause_qa.jsonl`` of the shared CUAD subset
ragrouter          the paper's release: ``Corpus.json`` + ``Question.json`` (JSON or JSONL)
2wikimultihopqa    HippoRAG ``{title,text}`` corpus + 2WikiMultihopQA typed questions
jsonl              one JSONL of documents ``{id,title?,text}`` + optionally one of questions
files              .txt/.md/.html/.pdf/.docx files and folders + CSV/JSONL questions (ingest/files.py)
=================  =========================================================================

A question whose corpus does not answer it is marked ``unanswerable`` (``Question.unanswerable``,
stored as ``queries.unanswerable``): the ``unanswerable: true`` key of the ``ragrouter`` and
``jsonl`` formats (``answer`` may then be left out), MuSiQue's ``answerable: false``.

How files are read (JSON or JSONL, record by record) is in :mod:`ragrouter.ingest.reading`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ragrouter.ingest import files
from ragrouter.ingest.reading import (
    JSONL_SUFFIXES,
    _Builder,
    _by_keys,
    _classify,
    _evidence,
    _qtype,
    _Rec,
    _Source,
    content_id,
)
from ragrouter.ingest.records import UNANSWERABLE_GOLD, Dataset, Document, LoaderError, Question

__all__ = [
    "CUAD_QTYPE", "GRAPHRAG_DROPPED", "GRAPHRAG_QTYPES", "JSONL_SUFFIXES", "LOADERS", "QUALITY_QTYPE",
    "RAGROUTER_QTYPES", "SQUALITY_QTYPE", "TWOWIKI_QTYPES", "content_id", "load", "load_2wikimultihopqa",
    "load_cuad", "load_graphrag_bench", "load_jsonl", "load_musique", "load_quality", "load_ragrouter",
    "load_squality", "QUALIFIED", "qualify", "repeated_questions", "story_title",
]

#: GraphRAG-Bench ``question_type`` → query type; Creative Generation is dropped (paper §3.2).
GRAPHRAG_QTYPES = {
    "Fact Retrieval": "factual",
    "Complex Reasoning": "reasoning",
    "Contextual Summarize": "summary",
}
GRAPHRAG_DROPPED = {"Creative Generation": "creative_generation"}

#: RAGRouter-Bench ``type`` → query type. Our own names are accepted too.
RAGROUTER_QTYPES = {
    "single_hop": "factual",
    "multi_hop": "reasoning",
    "summary": "summary",
    "factual": "factual",
    "reasoning": "reasoning",
}

#: 2WikiMultihopQA question types; all of them need several facts, so all are 'reasoning'.
TWOWIKI_QTYPES = {
    "compositional": "reasoning",
    "comparison": "reasoning",
    "bridge_comparison": "reasoning",
    "inference": "reasoning",
}

#: QuALITY multiple-choice questions ask about one article: 'factual' (single document).
QUALITY_QTYPE = "factual"

#: SQuALITY: every question ("What is the plot of the story?" and the four character/setting
#: questions) is answered by 4 human reference summaries of 76-493 words written over the whole
#: story — question-focused summarisation by construction — so all are 'summary'.
SQUALITY_QTYPE = "summary"

#: CUAD clause questions ask for spans of one contract: 'factual'.
CUAD_QTYPE = "factual"

_HOPS = re.compile(r"(?:^|_)(\d+)hop")


# --------------------------------------------------------------------------- formats


def load_graphrag_bench(paths: list[Path]) -> Dataset:
    """GraphRAG-Bench (``medical.json`` + ``medical_questions.json``; also the novel split).

    Corpus file: one object ``{corpus_name, context}`` or a list of them. Each is ONE document
    with id ``corpus_name``, an EMPTY title (GraphRAG-Bench names the corpus, not its
    documents; the name is kept in ``meta['corpus_name']``) and text ``context``.
    Questions file: a list of ``{id, question, answer, question_type, evidence, source, …}``;
    Fact Retrieval → factual, Complex Reasoning → reasoning, Contextual Summarize → summary,
    Creative Generation is dropped (``dropped['creative_generation']``, as in the paper).
    ``evidence`` (string or list) is kept; ``supporting_doc_ids`` is ``[source]`` when
    ``source`` names a loaded corpus document, else empty. Other keys go to ``meta``.
    A file is a corpus if its first record has ``context``/``corpus_name``, questions if it
    has ``question``.
    """
    corpora, qfiles = _classify(paths, _by_keys(("context", "corpus_name"), ("question",)),
                                "'context'/'corpus_name' (corpus) or 'question' (questions)")
    b = _Builder()
    for src in corpora:
        for rec in src:
            name = rec.ident("corpus_name")
            text = rec.string("context", nonempty=True, what="document text 'context'")
            meta = {"corpus_name": name, **rec.rest("corpus_name", "context")}
            b.document(rec, Document(name, "", text, meta))
    for src in qfiles:
        for rec in src:
            qid = rec.ident("id")
            question = rec.string("question", nonempty=True)
            answer = rec.string("answer", nonempty=True)
            qtype = _qtype(rec, "question_type", GRAPHRAG_QTYPES, GRAPHRAG_DROPPED)
            evidence = _evidence(rec, "evidence")
            source = rec.string("source", required=False)
            if qtype is None:
                b.q_ids.add(rec, qid)
                b.dropped[GRAPHRAG_DROPPED[rec.d["question_type"]]] += 1
                continue
            supporting = [source] if source and source in b.doc_ids else []
            meta = rec.rest("id", "question", "answer", "evidence")
            b.question(rec, Question(qid, question, answer, qtype, None, supporting, evidence, meta))
    return b.result()


def _hipporag_passage(rec: _Rec, b: _Builder) -> None:
    """A ``{title, text}`` passage of a HippoRAG corpus file (content-hash id, deduplicated)."""
    title = rec.string("title")
    text = rec.string("text", nonempty=True, what="document text 'text'")
    b.paragraph(rec, title, text, rec.rest("title", "text"))


def load_musique(paths: list[Path]) -> Dataset:
    """MuSiQue records ``{id, paragraphs[{idx,title,paragraph_text,is_supporting}], question,
    answer, answerable, question_decomposition?, answer_aliases?}`` (JSON list or JSONL).

    Documents are the paragraphs, deduplicated by (title, text) (repeats are counted in
    ``dropped['duplicate_paragraph']``); a paragraph's id is :func:`content_id` of it.
    Questions are 'reasoning' with ``hops`` read from the id prefix (``2hop__…`` → 2,
    ``3hop1__…`` → 3); ``supporting_doc_ids``/``evidence`` are the ids/texts of the
    ``is_supporting`` paragraphs. Unanswerable records (``answerable: false``, MuSiQue-Full) are
    questions marked unanswerable (``Question.unanswerable``): gold "Insufficient information",
    the twin's answer kept as ``meta['dataset_answer']``, their paragraphs in the corpus. A HippoRAG corpus file of
    ``{title, text}`` passages may be given too; it is merged into the same deduplicated corpus.
    """
    corpora, qfiles = _classify(paths, _by_keys(("text",), ("paragraphs", "question")),
                                "'paragraphs' (MuSiQue records) or 'title'+'text' (corpus)")
    b = _Builder()
    for src in corpora:
        for rec in src:
            _hipporag_passage(rec, b)
    for src in qfiles:
        for rec in src:
            qid = rec.ident("id")
            m = _HOPS.search(qid)
            if not m:
                raise rec.error(f"cannot read the hop count from id {qid!r} "
                                "(expected a prefix like '2hop__' or '3hop1__')")
            question = rec.string("question", nonempty=True)
            answer = rec.string("answer", nonempty=True)
            answerable = rec.get("answerable", bool, required=False, default=True)
            paragraphs = rec.get("paragraphs", list)
            supporting, evidence = [], []
            for j in range(len(paragraphs)):
                p = rec.child("paragraphs", j)
                p.get("idx", int, required=False)
                title = p.string("title")
                text = p.string("paragraph_text", nonempty=True, what="paragraph text 'paragraph_text'")
                is_sup = p.get("is_supporting", bool, required=False, default=False)
                did = b.paragraph(p, title, text)
                if is_sup and did not in supporting:
                    supporting.append(did)
                    evidence.append(text)
            meta = rec.rest("id", "question", "answer", "answerable", "paragraphs")
            if not answerable:  # MuSiQue-Full's twin: its paragraphs lack a supporting one
                meta["dataset_answer"] = answer  # the answerable twin's answer, not this question's
                answer = UNANSWERABLE_GOLD
            b.question(rec, Question(qid, question, answer, "reasoning", int(m.group(1)),
                                     supporting, evidence, meta, not answerable))
    return b.result()


def _quality_questions(rec: _Rec, set_id: str) -> Iterator[tuple[_Rec | None, str, str, list[str], int | None, dict]]:
    """Yield (record for errors, question id, question, options, gold label, meta) per question."""
    if "questions" in rec.d:  # official QuALITY v1.x layout
        rec.get("questions", list)
        for n in range(len(rec.d["questions"])):
            q = rec.child("questions", n)
            qid = str(q.get("question_unique_id", (str, int), required=False, default=f"{set_id}_q{n + 1}"))
            q.rid = qid
            question = q.string("question", nonempty=True)
            options = q.strings("options")
            gold = q.get("gold_label", int, required=False)
            meta = q.rest("question", "options", "gold_label", "question_unique_id")
            yield q, qid, question, options, gold, meta
        return
    if "question1" not in rec.d:
        raise rec.error("missing key 'questions' (official layout) or 'question1' (flat layout)")
    n = 1
    while f"question{n}" in rec.d:
        key = f"question{n}"
        question = rec.string(key, nonempty=True)
        options, k = [], 1
        while f"{key}option{k}" in rec.d:
            options.append(rec.string(f"{key}option{k}"))
            k += 1
        gold = rec.get(f"{key}_gold_label", int, required=False)
        meta = {k2[len(key) + 1:]: v for k2, v in rec.d.items()
                if k2.startswith(key + "_") and k2 != f"{key}_gold_label"}
        yield None, f"{set_id}_q{n}", question, options, gold, meta
        n += 1


def load_quality(paths: list[Path]) -> Dataset:
    """QuALITY jsonl: one record per (article, question set).

    Accepts the official v1 layout (``questions: [{question, options, gold_label,
    question_unique_id, …}]``, ``set_unique_id``) and the flat layout of
    ``official_quality_example.jsonl`` (``question1``, ``question1option1``…,
    ``question1_gold_label``, ``unique_id``; its ``article`` is a list of HTML lines, joined
    as they are — no HTML stripping). Documents: one per ``article_id`` (title, article text;
    the same article in several records must have the same text). Questions: 'factual'
    (:data:`QUALITY_QTYPE`), answer = the text of the gold option (``gold_label`` is 1-based);
    options and gold label in ``meta``; questions without a gold label (test split) are dropped
    (``dropped['no_gold_label']``). A record repeated verbatim (same set id, same content) is
    skipped (``dropped['duplicate_record']``); the same set id with other content is an error.
    Every file is a questions-and-articles file (no separate corpus).
    """
    paths = list(paths)
    if not paths:
        raise ValueError("no input files given")
    b = _Builder()
    articles: dict[str, tuple[str, str, str]] = {}
    sets: dict[str, tuple[str, str]] = {}
    for path in paths:
        for rec in _Source(path):
            set_key = "set_unique_id" if "set_unique_id" in rec.d else "unique_id"
            set_id = rec.ident(set_key)
            digest = hashlib.sha1(json.dumps(rec.d, sort_keys=True, ensure_ascii=False,
                                             default=str).encode("utf-8", "surrogatepass")).hexdigest()
            if set_id in sets:
                if sets[set_id][0] == digest:
                    b.dropped["duplicate_record"] += 1
                    continue
                raise rec.error(f"duplicate question-set id {set_id!r} with different content "
                                f"(first seen at {sets[set_id][1]})")
            sets[set_id] = (digest, rec.at)
            article_id = str(rec.get("article_id", (str, int)))
            title = rec.string("title", required=False)
            if isinstance(rec.d.get("article"), list):  # example layout: the HTML, line by line
                rec.strings("article")
                rec.d["article"] = "".join(rec.d["article"])
            text = rec.string("article", nonempty=True, what="document text 'article'")
            if article_id in articles:
                if articles[article_id][:2] != (title, text):
                    raise rec.error(f"article_id {article_id!r} has a different title or text than at "
                                    f"{articles[article_id][2]}")
            else:
                articles[article_id] = (title, text, rec.at)
                meta = {k: rec.d[k] for k in ("author", "year", "source", "topic", "url", "license")
                        if k in rec.d}
                b.document(rec, Document(article_id, title, text, meta))
            for qrec, qid, question, options, gold, meta in _quality_questions(rec, set_id):
                err = qrec or rec
                if not options:
                    raise err.error(f"question {qid!r} has no options")
                if gold is None:
                    b.q_ids.add(err, qid)
                    b.dropped["no_gold_label"] += 1
                    continue
                if not 1 <= gold <= len(options):
                    raise err.error(f"question {qid!r}: gold_label {gold} is not in 1..{len(options)}")
                meta = {"options": options, "gold_label": gold, "article_id": article_id,
                        "set_unique_id": set_id, **meta}
                b.question(err, Question(qid, question, options[gold - 1], QUALITY_QTYPE, None,
                                         [article_id], [], meta))
    return b.result()


def load_squality(paths: list[Path]) -> Dataset:
    """SQuALITY jsonl ``{metadata{passage_id,uid,license}, document, questions[{question_text,
    question_number, responses[{response_text,…}]}]}``.

    One document per story (id ``passage_id``, empty title: SQuALITY gives none; the text opens
    with the story's title anyway). Question id ``<passage_id>_q<question_number>``; answer =
    the first response; all reference responses in ``meta['responses']``. All questions are
    'summary' (:data:`SQUALITY_QTYPE` explains why). Every file is a stories-and-questions file.
    """
    paths = list(paths)
    if not paths:
        raise ValueError("no input files given")
    b = _Builder()
    for path in paths:
        for rec in _Source(path):
            rec.get("metadata", dict)
            md = rec.child("metadata")
            pid = md.ident("passage_id")
            rec.rid = pid
            text = rec.string("document", nonempty=True, what="document text 'document'")
            b.document(rec, Document(pid, "", text, md.rest("passage_id")))
            rec.get("questions", list)
            for n in range(len(rec.d["questions"])):
                q = rec.child("questions", n)
                number = q.get("question_number", int)
                qid = q.rid = f"{pid}_q{number}"
                question = q.string("question_text", nonempty=True)
                q.get("responses", list)
                responses = []
                for j in range(len(q.d["responses"])):
                    r = q.child("responses", j)
                    responses.append(r.string("response_text", nonempty=True))
                if not responses:
                    raise q.error("no responses (no reference answer)")
                meta = {"question_number": number, "responses": responses,
                        **q.rest("question_text", "question_number", "responses")}
                b.question(q, Question(qid, question, responses[0], SQUALITY_QTYPE, None,
                                       [pid], [], meta))
    return b.result()


def load_cuad(paths: list[Path]) -> Dataset:
    """The shared CUAD subset: ``contracts.json`` ``[{doc_id, title, text, …}]`` and
    ``clause_qa.jsonl`` ``{doc_id, category, question, answer_format, answer, evidence_spans}``.

    Documents: id ``doc_id``. Questions: 'factual', id ``<doc_id>::<category>``, the question
    text verbatim (CUAD's category description), ``supporting_doc_ids = [doc_id]`` (which must be
    in the corpus when one is given), ``evidence`` = the annotated spans. Where CUAD left the
    normalised ``answer`` blank (30 of 1,445 records, mostly dates), the answer is the annotated
    spans joined by newlines — CUAD's own QA task answers with those spans — and
    ``meta['answer_from'] = 'evidence_spans'`` says so.
    A file is the corpus if its first record has ``text``, questions if it has ``question``.
    """
    corpora, qfiles = _classify(paths, _by_keys(("text",), ("question",)),
                                "'text' (contracts) or 'question' (clause QA)")
    b = _Builder()
    for src in corpora:
        for rec in src:
            did = rec.ident("doc_id")
            title = rec.string("title", required=False)
            text = rec.string("text", nonempty=True, what="document text 'text'")
            b.document(rec, Document(did, title, text, rec.rest("doc_id", "title", "text")))
    for src in qfiles:
        for rec in src:
            did = rec.string("doc_id", nonempty=True)
            category = rec.string("category", nonempty=True)
            qid = rec.rid = f"{did}::{category}"
            question = rec.string("question", nonempty=True)
            answer = rec.string("answer")
            evidence = rec.strings("evidence_spans", required=False)
            b.check_supporting(rec, [did])
            meta = {"doc_id": did, **rec.rest("doc_id", "question", "answer", "evidence_spans")}
            if not answer.strip():  # CUAD left the normalised answer blank: the spans answer it
                answer = "\n".join(s for s in evidence if s.strip())
                if not answer:
                    raise rec.error("'answer' and 'evidence_spans' are both empty")
                meta["answer_from"] = "evidence_spans"
            b.question(rec, Question(qid, question, answer, CUAD_QTYPE, None, [did], evidence, meta))
    return b.result()


def _generic_document(rec: _Rec, b: _Builder) -> None:
    did = rec.ident("id")
    title = rec.string("title", required=False)
    key = "text" if "text" in rec.d or "context" not in rec.d else "context"
    if key not in rec.d:
        raise rec.error("missing key 'text' (or 'context')")
    text = rec.string(key, nonempty=True, what=f"document text {key!r}")
    b.document(rec, Document(did, title, text, rec.rest("id", "title", "text", "context")))


def _generic_question(rec: _Rec, b: _Builder) -> None:
    qid = rec.ident("id")
    question = rec.string("question", nonempty=True)
    unanswerable = rec.get("unanswerable", bool, required=False, default=False)
    # a question marked unanswerable may leave out its answer: its gold is then the refusal
    answer = rec.string("answer", nonempty=not unanswerable, required=not unanswerable)
    if unanswerable and not answer.strip():
        answer = UNANSWERABLE_GOLD
    qtype = _qtype(rec, "type", RAGROUTER_QTYPES)
    hops = rec.count("hops")  # 1..100 reasoning hops
    supporting = rec.strings("supporting_doc_ids", required=False)
    evidence = _evidence(rec, "evidence")
    b.check_supporting(rec, supporting)
    meta = rec.rest("id", "question", "answer", "hops", "supporting_doc_ids", "evidence", "unanswerable")
    b.question(rec, Question(qid, question, answer, qtype, hops, supporting, evidence, meta, unanswerable))


_GENERIC = (_by_keys(("text", "context"), ("question",)),
            "'text'/'context' (documents) or 'question' (questions)")


def load_ragrouter(paths: list[Path]) -> Dataset:
    """The paper's release: ``Corpus.json`` ``[{id, title?, text | context}]`` and
    ``Question.json`` ``[{id, question, answer, type, …}]`` (JSON arrays or JSONL; any number of
    each, e.g. the ``all_{train,val,test}.jsonl`` splits alone).

    ``type``: single_hop → factual, multi_hop → reasoning, summary → summary (our own names are
    accepted as well). Optional ``hops``, ``supporting_doc_ids`` (checked against the corpus
    when one is given), ``evidence`` and ``unanswerable`` (true: the corpus does not answer the
    question, a refusal is the correct answer; ``answer`` may then be left out and reads
    "Insufficient information"); other keys (``label``, ``domain``…) go to ``meta``.
    """
    corpora, qfiles = _classify(paths, *_GENERIC)
    b = _Builder()
    for src in corpora:
        for rec in src:
            _generic_document(rec, b)
    for src in qfiles:
        for rec in src:
            _generic_question(rec, b)
    return b.result()


def load_jsonl(paths: list[Path]) -> Dataset:
    """Generic: one JSONL file of documents ``{id, title?, text}`` and optionally one JSONL file
    of questions ``{id, question, answer, type, unanswerable?}`` (types and the ``unanswerable``
    key as in :func:`load_ragrouter`); the questions file alone adds questions to a corpus
    already in the store."""
    paths = list(paths)
    corpora, qfiles = _classify(paths, *_GENERIC)
    if len(corpora) > 1:  # none: questions alone, for a corpus already in the store
        raise LoaderError(", ".join(str(s.path) for s in corpora), None,
                          f"format 'jsonl' takes one documents file (or none), got {len(corpora)}")
    if len(qfiles) > 1:
        raise LoaderError(", ".join(str(s.path) for s in qfiles), None,
                          "format 'jsonl' takes at most one questions file")
    b = _Builder()
    for src in corpora:
        for rec in src:
            _generic_document(rec, b)
    for src in qfiles:
        for rec in src:
            _generic_question(rec, b)
    return b.result()


def load_2wikimultihopqa(paths: list[Path]) -> Dataset:
    """HippoRAG-style 2WikiMultihopQA: corpus ``[{title, text}]`` + questions ``[{id,
    question, answer, question_type, evidence, …}]``.

    Passages get :func:`content_id` ids and are deduplicated by (title, text). All four
    question types (compositional, comparison, bridge_comparison, inference) are 'reasoning';
    ``evidence`` triples become ``"subject | relation | object"`` strings; ``hops`` is None and
    ``supporting_doc_ids`` empty (this release links questions to triples, not passages).
    """
    corpora, qfiles = _classify(paths, _by_keys(("text",), ("question",)),
                                "'title'+'text' (corpus) or 'question' (questions)")
    b = _Builder()
    for src in corpora:
        for rec in src:
            _hipporag_passage(rec, b)
    for src in qfiles:
        for rec in src:
            qid = rec.ident("id")
            question = rec.string("question", nonempty=True)
            answer = rec.string("answer", nonempty=True)
            qtype = _qtype(rec, "question_type", TWOWIKI_QTYPES)
            evidence = _evidence(rec, "evidence")
            meta = rec.rest("id", "question", "answer", "evidence")
            b.question(rec, Question(qid, question, answer, qtype, None, [], evidence, meta))
    return b.result()


LOADERS: dict[str, Callable[[list[Path]], Dataset]] = {
    "graphrag-bench": load_graphrag_bench,
    "musique": load_musique,
    "quality": load_quality,
    "squality": load_squality,
    "cuad": load_cuad,
    "ragrouter": load_ragrouter,
    "2wikimultihopqa": load_2wikimultihopqa,
    "jsonl": load_jsonl,
    "files": files.load,
}


# --------------------------------------------------------------------------- self-contained questions

QUALIFIED: dict[str, str] = {"cuad": "contract", "squality": "story", "quality": "story"}
"""Formats whose questions are asked of one document, and what that document is called.

Their question texts repeat across documents (CUAD: "The name of the contract" for every
contract; SQuALITY: "What is the plot of the story?" for every story), so neither a
retriever nor a cache can tell which document is meant. :func:`load` qualifies them with
the document's title by default: ``In the contract "<title>": The name of the contract``."""

_BYLINE = re.compile(r"^by\s+\S", re.I)
_BOILERPLATE = re.compile(r"^(produced by|distributed proofreading|\[transcriber|e-text prepared|this etext)", re.I)


def story_title(text: str) -> str:
    """The title of a Gutenberg story: the line before its byline ("By ALFRED COPPEL, JR."),
    else its first line that is not producer boilerplate; "" when there is none."""
    lines = [ln.strip() for ln in text.strip().splitlines()[:40] if ln.strip()]
    lines = [ln for ln in lines if not _BOILERPLATE.match(ln) and not ln.lower().startswith("http")]
    for i, line in enumerate(lines[:12]):
        if _BYLINE.match(line) and i > 0:
            return lines[i - 1][:200]
    return lines[0][:200] if lines else ""


def document_title(doc: Document, noun: str) -> str:
    if doc.title.strip():
        return " ".join(doc.title.split())
    if noun == "story":
        return story_title(doc.text)
    return doc.external_id


def qualify(dataset: Dataset, noun: str) -> Dataset:
    """Questions of one document prefixed with its title (``In the <noun> "<title>": …``);
    the verbatim text is kept in ``meta['question_verbatim']``. Questions that do not name
    exactly one document of the dataset stay as they are."""
    from dataclasses import replace

    titles = {d.external_id: document_title(d, noun) for d in dataset.documents}
    out = []
    for q in dataset.questions:
        docs = list(dict.fromkeys(q.supporting_doc_ids))
        title = titles.get(docs[0]) if len(docs) == 1 else None
        if not title:
            out.append(q)
            continue
        out.append(replace(q, question=f'In the {noun} "{title}": {q.question}',
                           meta={**q.meta, "question_verbatim": q.question}))
    return replace(dataset, questions=out)


def repeated_questions(dataset: Dataset) -> list[tuple[str, int, int]]:
    """(question text, times, distinct answers) for texts asked more than once with
    different answers — in a corpus of several documents, such a question does not say which
    document it is about. Most repeated first."""
    if len(dataset.documents) < 2:
        return []
    answers: dict[str, list[str]] = {}
    for q in dataset.questions:
        answers.setdefault(" ".join(q.question.split()).lower(), []).append(q.answer.strip())
    first = {}
    for q in dataset.questions:
        first.setdefault(" ".join(q.question.split()).lower(), q.question)
    out = [(first[k], len(v), len(set(v))) for k, v in answers.items() if len(v) > 1 and len(set(v)) > 1]
    return sorted(out, key=lambda r: (-r[1], r[0]))


def load(fmt: str, paths: Iterable[str | Path], qualify_questions: bool = True) -> Dataset:
    """Load ``paths`` with the loader registered as ``fmt``. Questions of the formats in
    :data:`QUALIFIED` are qualified with their document's title unless
    ``qualify_questions`` is False."""
    try:
        loader = LOADERS[fmt]
    except KeyError:
        raise ValueError(f"unknown dataset format {fmt!r} (known: {', '.join(LOADERS)})") from None
    dataset = loader([Path(p) for p in paths])
    if qualify_questions and fmt in QUALIFIED:
        dataset = qualify(dataset, QUALIFIED[fmt])
    return dataset
