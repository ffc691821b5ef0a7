"""Plain records produced by the dataset loaders (paper §3.2, App. A.1).

A loader turns dataset files into a :class:`Dataset`: the corpus documents, the questions
asked over them, and counts of what was deliberately left out (``dropped``). Ids are the
dataset's own ("external") ids as strings; the store assigns its own keys on ingest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: The three query types of the paper (Table 1): single-hop facts, multi-hop reasoning and
#: summaries. RAGRouter's ``single_hop``/``multi_hop``/``summary`` map onto these.
QTYPES = ("factual", "reasoning", "summary")

UNANSWERABLE_GOLD = "Insufficient information"
"""The gold answer of a question marked unanswerable whose record gives none (a refusal, so
the judge's refusal rule reads it as one)."""


@dataclass
class Document:
    """One corpus document ``d = (title, text)`` of Algorithm 1."""

    external_id: str
    """The dataset's id for the document (or a content hash where the dataset has none)."""
    title: str
    """Title, ``""`` when the dataset gives none (e.g. GraphRAG-Bench corpora)."""
    text: str
    """The document body; never empty or whitespace-only."""
    meta: dict = field(default_factory=dict)
    """Everything else the dataset says about the document (JSON-serialisable)."""


@dataclass
class Question:
    """One dataset question with its gold answer."""

    external_id: str
    question: str
    answer: str
    qtype: str
    """'factual' | 'reasoning' | 'summary' (see :data:`QTYPES`)."""
    hops: int | None = None
    """Number of reasoning hops where the dataset states it (MuSiQue id prefix), else None."""
    supporting_doc_ids: list[str] = field(default_factory=list)
    """External ids of the documents that support the answer, where the dataset says."""
    evidence: list[str] = field(default_factory=list)
    """Gold evidence text (quoted passages, spans or triples), where the dataset gives it."""
    meta: dict = field(default_factory=dict)
    """Everything else: the dataset's original question type, options, aliases, …"""
    unanswerable: bool = False
    """The honest answer is a refusal: the corpus does not answer the question (the
    ``unanswerable`` key of the jsonl and ragrouter formats; MuSiQue's ``answerable: false``).
    A refusal is then the correct answer, any other answer a hallucination."""


@dataclass
class Dataset:
    """What a loader returns."""

    documents: list[Document]
    questions: list[Question]
    dropped: dict[str, int] = field(default_factory=dict)
    """Reason → number of records skipped on purpose (e.g. ``creative_generation``)."""

    def qtype_counts(self) -> dict[str, int]:
        """Number of questions per query type, every type of :data:`QTYPES` present."""
        counts = dict.fromkeys(QTYPES, 0)
        for q in self.questions:
            counts[q.qtype] += 1
        return counts


class LoaderError(ValueError):
    """A dataset file is malformed.

    The message always has the form ``FILE: RECORD: PROBLEM`` (``FILE: PROBLEM`` only when
    the problem concerns the file as a whole, e.g. it is empty). ``RECORD`` is
    ``record [i]`` (0-based index in a JSON array), ``line n`` (1-based line of a JSONL
    file) or ``top-level object``, followed by ``(id '…')`` once the record's id is known.
    """

    def __init__(self, file: str | Path, record: str | None, problem: str):
        self.file = str(file)
        self.record = record
        self.problem = problem
        where = f"{self.file}: {record}: " if record else f"{self.file}: "
        super().__init__(where + problem)
