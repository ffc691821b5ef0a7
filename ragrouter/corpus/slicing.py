"""A slice of a corpus: part of its documents and exactly the questions whose evidence lies inside.

A slice keeps the first ``docs`` documents (a random ``docs`` with ``seed``), or the documents
that the first ``chunks`` chunks come from, or the first ``tokens`` tokens of the documents
(the last document cut, as the chunk stage would cut it), and the questions whose evidence
lies inside the slice. A question's evidence is what its record says, at the finest grain it
says it:

* **sentences** (evidence text): every evidence sentence has at least ``evidence_overlap`` of
  its content words (4+ letters) inside one chunk of the slice — one of its supporting
  documents' chunks where it names them (the demo's test: GraphRAG-Bench evidence is
  paraphrased, not quoted);
* **chunks** (a generated question's source chunks): every chunk lies inside the kept part of
  its document;
* **documents** (supporting document ids only): every document is kept whole — a cut document
  may have lost the passage.

A question with none of these ("no evidence recorded") is never kept: nothing says the slice
can answer it. :class:`Dataset.dropped` says how many questions each reason dropped
(:data:`REASONS`); ``per_type`` caps the kept questions per type (the first ``per_type`` that
qualify, in stored order, or in a seeded random order with ``seed``).

:func:`requirements` says, for the budget planner (:mod:`ragrouter.decisions.budget`), the
smallest prefix of documents and of chunks that keeps each question.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace

from ragrouter.corpus.chunking import chunk_text, combine
from ragrouter.ingest.records import QTYPES, Dataset, Document, Question
from ragrouter.llm import tokens

_WORD = re.compile(r"[a-z][a-z0-9-]{3,}")

REASONS = {
    "evidence_outside": "evidence outside the slice",
    "document_cut": "only its document is recorded as evidence and the slice cuts that document",
    "no_evidence": "no evidence recorded",
    "over_quota": "over --queries-per-type",
}
"""Why a question was left out of a slice (the keys of ``Dataset.dropped``), in words."""

CHUNK_EVIDENCE = "source_chunks"
"""Question meta key of chunk evidence: ``[[document id, first token, end token], …]`` (a
generated question's source chunks, in ``title ⊕ text`` tokens; :func:`stored_dataset`)."""


def _words(t: str) -> set[str]:
    return set(_WORD.findall(t.lower()))


def _sentences(evidence) -> list[set[str]]:
    if isinstance(evidence, str):
        evidence = [evidence]
    sents = [s for e in evidence for s in re.split(r";\s+", str(e)) if s.strip()]
    return [w for w in (_words(s) for s in sents) if w] if sents else []


def evidence_in(evidence, chunk_words: list[set[str]], overlap: float) -> bool:
    """Every evidence sentence has ≥ ``overlap`` of its content words (4+ letters) inside
    one chunk."""
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


def _matches(words: set[str], cw: set[str], overlap: float) -> bool:
    return len(words & cw) / len(words) >= overlap


@dataclass
class _Kept:
    """The documents of a slice: id in the source → id in the slice, and the source tokens
    (``title ⊕ text``) each keeps (None: whole)."""

    documents: list[Document]
    renamed: dict[str, str]
    tokens: dict[str, int | None]


def _cut_documents(ds: Dataset, docs, chunks, tokens_, rng, window, overlap_tokens, doc_ids=None) -> _Kept:
    kept: list[Document] = []
    renamed: dict[str, str] = {}
    kept_tokens: dict[str, int | None] = {}
    if doc_ids is not None:
        wanted = set(doc_ids)
        for d in ds.documents:
            if d.external_id in wanted:
                kept.append(d)
                renamed[d.external_id] = d.external_id
                kept_tokens[d.external_id] = None
        return _Kept(kept, renamed, kept_tokens)
    if docs is not None:
        pool = list(ds.documents)
        if rng is not None:
            pool = rng.sample(pool, min(docs, len(pool)))
            order = {d.external_id: i for i, d in enumerate(ds.documents)}
            pool.sort(key=lambda d: order[d.external_id])
        for d in pool[:docs]:
            kept.append(d)
            renamed[d.external_id] = d.external_id
            kept_tokens[d.external_id] = None
        return _Kept(kept, renamed, kept_tokens)
    enc = tokens.encoding()
    stride = window - overlap_tokens
    left = chunks if chunks is not None else tokens_
    unit = "chunks" if chunks is not None else "tokens"
    for d in ds.documents:
        if left <= 0:
            break
        if unit == "chunks":
            have = len(chunk_text(d.title, d.text, window, overlap_tokens))
        else:
            have = len(enc.encode(combine(d.title, d.text), disallowed_special=()))
        if have <= left:
            kept.append(d)
            renamed[d.external_id] = d.external_id
            kept_tokens[d.external_id] = None
            left -= have
            continue
        ids = enc.encode(d.text, disallowed_special=())
        end = min(len(ids), stride * (left - 1) + window) if unit == "chunks" else min(len(ids), left)
        cut = Document(external_id=f"{d.external_id}[:{left}{unit}]", title=d.title, text=enc.decode(ids[:end]),
                       meta={**d.meta, "slice_tokens": end, "source_tokens": len(ids)})
        kept.append(cut)
        renamed[d.external_id] = cut.external_id
        head = len(enc.encode(combine(d.title, "x"), disallowed_special=())) - 1 if d.title.strip() else 0
        kept_tokens[d.external_id] = head + end
        left = 0
    return _Kept(kept, renamed, kept_tokens)


def _why_not(q: Question, kept: _Kept, chunk_words: dict[str, list[set[str]]], all_words: list[set[str]],
             overlap: float) -> str | None:
    """Why the slice cannot keep ``q`` (a :data:`REASONS` key), None when it keeps it."""
    sup = list(q.supporting_doc_ids)
    spans = (q.meta or {}).get(CHUNK_EVIDENCE) or []
    if sup and not all(s in kept.renamed for s in sup):
        return "evidence_outside"
    if q.evidence:
        words = [w for s in sup for w in chunk_words[kept.renamed[s]]] if sup else all_words
        return None if evidence_in(q.evidence, words, overlap) else "evidence_outside"
    if spans:
        for doc, _start, end in spans:
            if doc not in kept.renamed:
                return "evidence_outside"
            limit = kept.tokens[doc]
            if limit is not None and int(end) > limit:
                return "evidence_outside"
        return None
    if not sup:
        return "no_evidence"
    if any(kept.tokens[s] is not None for s in sup):
        return "document_cut"
    return None


def slice_dataset(ds: Dataset, *, docs: int | None = None, chunks: int | None = None, tokens: int | None = None,
                  per_type: int | None = None, seed: int | None = None, window: int = 512, overlap_tokens: int = 100,
                  evidence_overlap: float = 0.75, doc_ids: list[str] | None = None) -> Dataset:
    """The slice of ``ds`` (see the module doc). Exactly one of ``docs`` / ``chunks`` /
    ``tokens`` / ``doc_ids`` (these documents, whole, in stored order). ``dropped``: reason
    (:data:`REASONS`) → questions left out for it."""
    given = [(n, v) for n, v in (("docs", docs), ("chunks", chunks), ("tokens", tokens), ("doc", doc_ids))
             if v is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of --docs N, --chunks N, --tokens N or --doc ID (repeatable)")
    name, n = given[0]
    if name == "doc":
        known = {d.external_id for d in ds.documents}
        missing = [d for d in doc_ids if d not in known]
        if missing or not doc_ids:
            raise ValueError(f"--doc {missing[0]!r}: no such document in the corpus" if missing
                             else "--doc: name at least one document")
    elif n < 1:
        raise ValueError(f"--{name} must be at least 1 (got {n})")
    if per_type is not None and per_type < 0:  # 0: the documents without their questions
        raise ValueError(f"--queries-per-type must be at least 0 (got {per_type})")
    rng = random.Random(seed) if seed is not None else None  # one generator: documents, then questions
    kept = _cut_documents(ds, docs, chunks, tokens, rng, window, overlap_tokens, doc_ids)
    chunk_words = {d.external_id: [_words(c.text) for c in chunk_text(d.title, d.text, window, overlap_tokens)]
                   for d in kept.documents}
    all_words = [w for ws in chunk_words.values() for w in ws]
    questions = list(ds.questions)
    if rng is not None:
        rng.shuffle(questions)
    picked: list[Question] = []
    counts = dict.fromkeys(QTYPES, 0)
    dropped = dict.fromkeys(REASONS, 0)
    for q in questions:
        why = _why_not(q, kept, chunk_words, all_words, evidence_overlap)
        if why is None and per_type is not None and counts.get(q.qtype, 0) >= per_type:
            why = "over_quota"
        if why is not None:
            dropped[why] += 1
            continue
        meta = q.meta
        spans = (meta or {}).get(CHUNK_EVIDENCE)
        if spans:
            meta = {**meta, CHUNK_EVIDENCE: [[kept.renamed[d], a, b] for d, a, b in spans]}
        picked.append(replace(q, supporting_doc_ids=[kept.renamed[s] for s in q.supporting_doc_ids], meta=meta))
        counts[q.qtype] = counts.get(q.qtype, 0) + 1
    return Dataset(documents=kept.documents, questions=picked, dropped={k: v for k, v in dropped.items() if v})


def describe_drops(dropped: dict[str, int]) -> str:
    """``"evidence outside the slice: 20, no evidence recorded: 3"`` (largest first)."""
    return ", ".join(f"{REASONS.get(k, k)}: {v}" for k, v in sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0])))


# ------------------------------------------------------------------------ prefixes for a budget


@dataclass
class Requirements:
    """What the prefixes of a corpus (in stored order) keep: per document its chunks, and per
    question its type and the smallest ``--docs`` and ``--chunks`` prefix that keeps it (None:
    none does)."""

    doc_chunks: list[int]
    qtypes: list[str]
    need_docs: list[int | None]
    need_chunks: list[int | None]
    chunk_texts: list[str]
    """Every chunk's text in stored order (what extraction of a prefix sends)."""
    need_sets: list[frozenset[int] | None] = field(default_factory=list)
    """Per question, the documents (stored positions) a slice of whole documents must keep for
    it: its supporting documents and those holding its evidence (None: none keeps it)."""
    chunk_doc: list[int] = field(default_factory=list)
    """Per chunk, the stored position of its document."""

    def kept(self, *, docs: int | None = None, chunks: int | None = None) -> dict[str, int]:
        """Questions per type that the prefix keeps (before any per-type cap)."""
        need = self.need_docs if docs is not None else self.need_chunks
        bound = docs if docs is not None else chunks
        out = dict.fromkeys(QTYPES, 0)
        for t, n in zip(self.qtypes, need):
            if n is not None and n <= bound:
                out[t] = out.get(t, 0) + 1
        return out


def requirements(ds: Dataset, window: int = 512, overlap_tokens: int = 100,
                 evidence_overlap: float = 0.75) -> Requirements:
    """The smallest prefix of documents and of chunks that keeps each question of ``ds``, by
    the rules of :func:`slice_dataset` on whole chunks of the source (a cut document's last
    chunk is shorter than the source's: the slice itself decides at the margin)."""
    doc_index = {d.external_id: i for i, d in enumerate(ds.documents)}
    doc_chunks, first, spans_of = [], [], []
    words: list[set[str]] = []
    texts: list[str] = []
    owner: list[int] = []
    for i, d in enumerate(ds.documents):
        cs = chunk_text(d.title, d.text, window, overlap_tokens)
        first.append(len(words))
        doc_chunks.append(len(cs))
        spans_of.append([c.token_end for c in cs])
        for c in cs:
            texts.append(c.text)
            words.append(_words(c.text))
            owner.append(i)
    total_before = first  # chunks before document i
    need_docs: list[int | None] = []
    need_chunks: list[int | None] = []
    need_sets: list[frozenset[int] | None] = []

    def earliest(sent: set[str], among: list[int] | None) -> int | None:
        """Global position of the first chunk (of the documents ``among``) holding the sentence."""
        docs = sorted(among) if among is not None else range(len(ds.documents))
        for i in docs:
            for k in range(first[i], first[i] + doc_chunks[i]):
                if _matches(sent, words[k], evidence_overlap):
                    return k
        return None

    for q in ds.questions:
        sup = [doc_index.get(s) for s in q.supporting_doc_ids]
        spans = (q.meta or {}).get(CHUNK_EVIDENCE) or []
        if any(s is None for s in sup):
            need_docs.append(None)
            need_chunks.append(None)
            need_sets.append(None)
            continue
        last_sup = max(sup) + 1 if sup else 0
        starts_sup = max((total_before[s] + 1 for s in sup), default=0)  # a cut document is kept too
        if q.evidence:
            sents = _sentences(q.evidence)
            if not sents:
                need_docs.append(None)
                need_chunks.append(None)
                need_sets.append(None)
                continue
            pos = [earliest(s, sup or None) for s in sents]
            if any(p is None for p in pos):
                need_docs.append(None)
                need_chunks.append(None)
                need_sets.append(None)
                continue
            need_docs.append(max([last_sup] + [owner[p] + 1 for p in pos]))
            need_chunks.append(max([starts_sup] + [p + 1 for p in pos]))
            need_sets.append(frozenset(sup) | frozenset(owner[p] for p in pos))
        elif spans:
            idx = [doc_index.get(d) for d, _a, _b in spans]
            if any(i is None for i in idx):
                need_docs.append(None)
                need_chunks.append(None)
                need_sets.append(None)
                continue
            need_docs.append(max(i + 1 for i in idx))
            need_sets.append(frozenset(sup) | frozenset(idx))
            pos = []
            for i, (_d, _a, end) in zip(idx, spans):
                k = next((j for j, e in enumerate(spans_of[i]) if e >= int(end)), doc_chunks[i] - 1)
                pos.append(first[i] + k + 1)
            need_chunks.append(max(pos))
        elif sup:
            need_docs.append(last_sup)
            need_chunks.append(max(total_before[s] + doc_chunks[s] for s in sup))
            need_sets.append(frozenset(sup))
        else:
            need_docs.append(None)
            need_chunks.append(None)
            need_sets.append(None)
    return Requirements(doc_chunks, [q.qtype for q in ds.questions], need_docs, need_chunks, texts, need_sets, owner)
