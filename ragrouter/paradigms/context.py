"""Rank fusion, the token-budget packer and the context formatter (paper App. B.2).

* :func:`rrf_fuse` — Reciprocal Rank Fusion (eq. 9): ``RRF(d) = Σ_r 1 / (k + rank_r(d))`` with
  1-based ranks; a list is de-duplicated first (a repeated chunk keeps its first, best rank
  and does not push the chunks after it down);
  the fused list is sorted by score (ties: earlier first appearance in the lists, in the
  order the lists are given) and has no duplicates.
* :func:`pack` — takes chunks in rank order while the running total of their token counts
  stays within the budget and **stops** at the first chunk that would exceed it (the paper
  "truncates the sequence"; a smaller chunk further down the list is *not* used to fill the
  gap, so the context is always a prefix of the ranking).
* :func:`format_context` — the text that goes into the generation prompt: an optional
  "Knowledge graph facts" block (one ``subject | relation | object`` line per triple, used by
  the graph paradigm) followed by the passages, numbered ``[1]``, ``[2]``, … in rank order and
  separated by blank lines.
* :func:`build_fact_context` — GraphRAG's context (Algorithm 4, phase 3): the retrieved
  triples in rank order, each with its *source sentences* (:func:`source_sentences`), filled
  **greedily** into the budget: a triple whose block does not fit is skipped and later, smaller
  ones still fill the remaining budget (Algorithm 4 breaks out of one triple's sentence loop,
  then goes on with the next triple).
* :func:`build_context` — the same stop-at-the-first-misfit packing, measured on the *whole*
  formatted context (facts, numbering and separators included) in exact cl100k tokens, so the
  text the generator sees is within the budget; that count is what runs store as
  ``context_tokens``. The budget bounds the context, not the prompt around it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from ragrouter.common.sentences import split_sentences
from ragrouter.llm import tokens

FACTS_HEADER = "Knowledge graph facts:"
SOURCED_FACTS_HEADER = "Knowledge graph facts and their source sentences:"
MAX_SOURCE_SENTENCES = 3  # per triple: the best-matching sentences of its source chunk
PASSAGES_HEADER = "Passages:"


def rrf_fuse(ranked_lists: Sequence[Sequence[int]], k: int) -> list[tuple[int, float]]:
    """Fuse ranked lists of ids with Reciprocal Rank Fusion; returns ``[(id, score)]`` best first."""
    if k < 0:
        raise ValueError(f"retrieval.rrf_k must be >= 0, got {k}")
    scores: dict[int, float] = {}
    first_seen: dict[int, int] = {}
    position = 0
    for ranked in ranked_lists:
        for rank, item in enumerate(dict.fromkeys(ranked), start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            if item not in first_seen:
                first_seen[item] = position
                position += 1
    return sorted(scores.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


def pack(chunk_ids: Sequence[int], token_counts: Sequence[int] | Mapping[int, int], budget: int, overhead: int = 0) -> list[int]:
    """Chunk ids in rank order whose token counts (each plus ``overhead``) fit ``budget``.

    ``token_counts`` is either parallel to ``chunk_ids`` or a mapping id → count. Duplicate ids
    are taken once. Stops at the first chunk that would exceed the budget.
    """
    if budget < 0:
        raise ValueError(f"retrieval.token_budget must be >= 0, got {budget}")
    if not isinstance(token_counts, Mapping) and len(token_counts) != len(chunk_ids):
        raise ValueError(f"pack: {len(chunk_ids)} chunk ids but {len(token_counts)} token counts")
    out: list[int] = []
    seen: set[int] = set()
    used = 0
    for i, cid in enumerate(chunk_ids):
        if cid in seen:
            continue
        n = (token_counts[cid] if isinstance(token_counts, Mapping) else token_counts[i]) + overhead
        if used + n > budget:
            break
        seen.add(cid)
        out.append(cid)
        used += n
    return out


@dataclass(frozen=True)
class Fact:
    """One knowledge-graph triple as it appears in the context, with its source chunk."""

    subject: str
    relation: str
    object: str
    chunk_id: int

    def line(self) -> str:
        return " | ".join(" ".join(str(x).split()) for x in (self.subject, self.relation, self.object))


def format_context(passages: Sequence[str], facts: Iterable[Fact] = ()) -> str:
    """The context text: optional facts block, then numbered passages (empty string if none)."""
    parts: list[str] = []
    fact_lines = [f.line() for f in facts]
    if fact_lines:
        parts.append(FACTS_HEADER + "\n" + "\n".join(fact_lines))
    if passages:
        body = "\n\n".join(f"[{i}] {text.strip()}" for i, text in enumerate(passages, start=1))
        parts.append((PASSAGES_HEADER + "\n" + body) if fact_lines else body)
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- exact token counts
#
# cl100k_base splits text into pieces with a regex before BPE, and no token crosses a piece
# boundary. In the context format every passage block starts at "[" after a newline, the text
# after "[n]" starts at a space, and every fact line starts after a newline — all of them
# piece boundaries. So the count of the whole context is the sum of the counts of its parts:
#
#   count(context) = [facts: count(FACTS_HEADER + "\n") + Σ count(line + "\n") over all lines but
#                     the last + count(last line + "\n\n") + count(PASSAGES_HEADER + "\n")]
#                  + Σ_{i<n} (count("[i]") + count(" " + text_i + "\n\n")) + count("[n]") + count(" " + text_n)
#
# (tests check this against tokens.count of the formatted text on real corpus text). Passage
# parts are cached per chunk by the corpus index, so packing never re-tokenises a context.


@functools.lru_cache(maxsize=65536)
def _count(text: str) -> int:
    return tokens.count(text)


def passage_counts(text: str) -> tuple[int, int]:
    """(tokens of the passage's part when another passage follows, when it is the last)."""
    body = " " + text.strip()
    return tokens.count(body + "\n\n"), tokens.count(body)


class PassageCounter:
    """Thread-safe cache of :func:`passage_counts` per chunk id over a text mapping."""

    def __init__(self, texts: Mapping[int, str]):
        self.texts = texts
        self._cache: dict[int, tuple[int, int]] = {}

    def __call__(self, chunk_id: int) -> tuple[int, int]:
        hit = self._cache.get(chunk_id)
        if hit is None:
            hit = self._cache[chunk_id] = passage_counts(self.texts[chunk_id])  # benign race: same value
        return hit


@dataclass
class Context:
    """A packed, formatted context: what the generator sees and what the run stores."""

    chunk_ids: list[int] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    text: str = ""
    tokens: int = 0


def build_context(
    ranked_chunk_ids: Sequence[int],
    texts: Mapping[int, str],
    budget: int,
    facts: Sequence[Fact] = (),
    counts: Callable[[int], tuple[int, int]] | None = None,
) -> Context:
    """The longest prefix of ``ranked_chunk_ids`` whose formatted context — numbered passages,
    preceded by the fact lines of those chunks when ``facts`` are given — has at most
    ``budget`` cl100k tokens; stops at the first chunk that does not fit (see :func:`pack`).

    ``counts``: chunk id → :func:`passage_counts` (e.g. the corpus index's cached
    ``passage_counts``); default: computed here. ``Context.tokens`` is the exact cl100k count
    of ``Context.text``.
    """
    if budget < 0:
        raise ValueError(f"retrieval.token_budget must be >= 0, got {budget}")
    counts = counts or PassageCounter(texts)
    ranked = list(dict.fromkeys(ranked_chunk_ids))
    fact_ix: dict[int, list[int]] = {}
    for i, fact in enumerate(facts):
        fact_ix.setdefault(fact.chunk_id, []).append(i)
    lines = [f.line() for f in facts]
    header = _count(FACTS_HEADER + "\n") + _count(PASSAGES_HEADER + "\n") if facts else 0

    chosen: list[int] = []
    closed = 0  # tokens of the chosen passages, each counted as followed by another one
    fact_sum = 0  # Σ count(line + "\n") over chosen facts
    last_fact = -1  # index of the last chosen fact in ``facts`` order
    total = 0
    for cid in ranked:
        sep, end = counts(cid)
        n = len(chosen) + 1
        mine = fact_ix.get(cid, ())
        f_sum = fact_sum + sum(_count(lines[i] + "\n") for i in mine)
        f_last = max([last_fact, *mine])
        facts_cost = 0 if f_last < 0 else header + f_sum - _count(lines[f_last] + "\n") + _count(lines[f_last] + "\n\n")
        candidate = closed + _count(f"[{n}]") + end + facts_cost
        if candidate > budget:
            break
        chosen.append(cid)
        closed += _count(f"[{n}]") + sep
        fact_sum, last_fact, total = f_sum, f_last, candidate
    kept = set(chosen)
    chosen_facts = [f for f in facts if f.chunk_id in kept]
    text = format_context([texts[c] for c in chosen], chosen_facts)
    return Context(chunk_ids=chosen, facts=chosen_facts, text=text, tokens=total)


# --------------------------------------------------------------------------- GraphRAG: triples + source sentences
#
# The paper's TripletSourceMap maps a triple to the sentences it was extracted from. Our extractor
# returns triples per chunk, without sentence offsets, so a triple's source sentences are found in
# its source chunk: the sentences that mention both its subject and its object, else those that
# mention one of them (a name is mentioned when it occurs case-insensitively as whole words, or
# when every content word (3+ letters) of it occurs in the sentence), at most MAX_SOURCE_SENTENCES, in text
# order. A triple none of whose names occurs in its chunk gets no sentence (its fact line alone).

_WORD_RE = re.compile(r"\w{3,}", re.UNICODE)


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _whole(haystack: str, name: str) -> bool:
    """Whether ``name`` occurs in ``haystack`` with no word character on either side (the
    pattern ``(?<!\\w)name(?!\\w)``, without compiling one per name)."""
    start = haystack.find(name)
    while start >= 0:
        end = start + len(name)
        if (start == 0 or not _word_char(haystack[start - 1])) and (end == len(haystack)
                                                                    or not _word_char(haystack[end])):
            return True
        start = haystack.find(name, start + 1)
    return False


@functools.lru_cache(maxsize=65536)
def _matcher(name: str) -> Callable[[str, set[str]], bool]:
    """``(casefolded sentence, its words) -> bool``: does the sentence mention ``name``?
    Memoised per name; the cheap test runs first (all content words present), then the
    whole-word substring search."""
    name = " ".join(name.casefold().split())
    if not name:
        return lambda cf, words: False
    content = frozenset(_WORD_RE.findall(name))
    return lambda cf, words: bool(content and content <= words) or _whole(cf, name)


class SentenceSplitter:
    """Thread-safe cache of the sentences of each chunk (the evaluation's sentence splitter)
    and of each triple's source sentences in it (:meth:`sources`)."""

    def __init__(self, texts: Mapping[int, str]):
        self.texts = texts
        self._cache: dict[int, list[tuple[str, str, set[str]]]] = {}
        self._sources: dict[tuple[int, str, str], list[str]] = {}

    def __call__(self, chunk_id: int) -> list[tuple[str, str, set[str]]]:
        hit = self._cache.get(chunk_id)
        if hit is None:
            sents = [" ".join(x.split()) for x in split_sentences(self.texts[chunk_id])]
            hit = [(x, x.casefold(), set(_WORD_RE.findall(x.casefold()))) for x in sents if x]
            self._cache[chunk_id] = hit  # benign race: same value
        return hit

    def sources(self, fact: Fact) -> list[str]:
        """:func:`source_sentences` of ``fact`` in its chunk, memoised (the same triple is
        retrieved for many queries of a corpus)."""
        key = (fact.chunk_id, fact.subject, fact.object)
        hit = self._sources.get(key)
        if hit is None:
            hit = self._sources[key] = source_sentences(fact, self(fact.chunk_id))  # benign race
        return hit


def source_sentences(fact: Fact, sentences: Sequence[tuple[str, str, set[str]]]) -> list[str]:
    """The sentences of ``fact``'s source chunk that state it (see the comment above)."""
    subject, obj = _matcher(fact.subject), _matcher(fact.object)
    scored = []
    for i, (text, cf, words) in enumerate(sentences):
        score = subject(cf, words) + obj(cf, words)
        if score:
            scored.append((score, i, text))
    if not scored:
        return []
    best = max(sc for sc, _, _ in scored)
    return [t for sc, _, t in scored if sc == best][:MAX_SOURCE_SENTENCES]


def _fact_block(n: int, fact: Fact, new_sentences: Sequence[str]) -> str:
    block = f"[{n}] {fact.line()}"
    if new_sentences:
        block += "\n" + " ".join(new_sentences)
    return block


@dataclass
class FactContext(Context):
    """A GraphRAG context: what entered, and how many triples were skipped for the budget."""

    sentences: int = 0
    skipped: int = 0


def build_fact_context(
    facts: Sequence[Fact],
    texts: Mapping[int, str],
    budget: int,
    sentences_of: Callable[[int], Sequence[tuple[str, str, set[str]]]] | None = None,
) -> FactContext:
    """GraphRAG's context: numbered triples, each followed by its source sentences not already in
    the context, taken in rank order and filled **greedily** into ``budget`` cl100k tokens — a
    triple whose block does not fit is skipped, the next ones are still tried.

    ``sentences_of``: chunk id → cached sentences (the corpus index's ``sentences``); default:
    split here. ``tokens`` is the exact cl100k count of ``text`` (≤ ``budget``); ``chunk_ids``
    are the source chunks of the triples that entered, in order of first use.
    """
    if budget < 0:
        raise ValueError(f"retrieval.token_budget must be >= 0, got {budget}")
    sentences_of = sentences_of or SentenceSplitter(texts)
    sources = getattr(sentences_of, "sources", None) or (lambda f: source_sentences(f, sentences_of(f.chunk_id)))
    header = _count(SOURCED_FACTS_HEADER + "\n")
    blocks: list[str] = []
    chosen: list[Fact] = []
    per_block: list[int] = []  # source sentences each chosen block adds
    used_sentences: set[str] = set()
    skipped = 0
    total = 0
    for fact in facts:
        sents = [x for x in sources(fact) if x not in used_sentences]
        block = _fact_block(len(blocks) + 1, fact, sents)
        cost = _count(block + "\n") + (0 if blocks else header)
        if total + cost > budget:
            skipped += 1
            continue
        blocks.append(block)
        chosen.append(fact)
        per_block.append(len(sents))
        used_sentences.update(sents)
        total += cost
    text = (SOURCED_FACTS_HEADER + "\n" + "\n".join(blocks)) if blocks else ""
    exact = tokens.count(text) if text else 0
    while exact > budget and blocks:  # the sum of parts is an estimate; the text itself must fit
        blocks.pop()
        chosen.pop()
        per_block.pop()
        skipped += 1
        text = (SOURCED_FACTS_HEADER + "\n" + "\n".join(blocks)) if blocks else ""
        exact = tokens.count(text) if text else 0
    return FactContext(chunk_ids=list(dict.fromkeys(f.chunk_id for f in chosen)), facts=chosen, text=text,
                       tokens=exact, sentences=sum(per_block), skipped=skipped)
