"""Where generated questions come from: chunks, bridge-entity chains and PageRank-sampled
ego-graphs (paper App. A.2, Algorithm 2 phase 1).

Everything here is pure: a :class:`CorpusGraph` is built from chunk metadata and extracted
triples, and the samplers take a seeded ``random.Random``, so a unit's draw depends only on
its seed and the store's contents.

Walk units
    Reasoning chains and summary sources are sets of distinct *walk units*. The paper walks
    over **documents**; a corpus of a single long document (the medical textbook) has no
    second document to hop to, so there the unit is the **chunk**. In chunk mode two chunks
    of one document whose token spans overlap (the 100-token chunk overlap) count as the
    same source: they share text, so an entity "linking" them links nothing. A chain or a
    summary never holds two overlapping chunks. :func:`choose_walk_unit` picks the unit for
    ``walk_unit: auto``: documents when the corpus has at least as many documents as the
    longest chain needs, else chunks — and **mixed** when some of its documents are long
    (more than ``querygen.long_document_chunks`` chunks): a short document is one unit, each
    chunk of a long document is a unit of its own, so walks run over chunks inside long
    documents as well as over documents. A mixed unit of a short document is named by its
    first chunk id.

Entity linking
    With a :class:`~ragrouter.querygen.linking.Linking`, mentions are grouped by their
    cluster (names equal after normalisation, linked through an alias triple, or close in the
    embedder's space): the cluster is the entity, its surface forms per unit are kept
    (``surface``) and :meth:`CorpusGraph.link_evidence` reports, for each bridge of a chain,
    the two mentions it joins and their similarity.

Bridge entities
    The entities of a unit are the subjects and objects of the triples extracted from its
    chunks. An entity's *spread* is the number of units that name it: those it was extracted
    from and, when the chunk texts are given, those whose text contains one of its surface
    forms (:func:`~ragrouter.querygen.checks.contains_phrase`, on word boundaries). The
    extractor misses mentions — a 0.5B model took "singer" from 2 of the 14 2Wiki passages
    that say it — so extracted units alone made type-like words look as specific as a name.
    An entity is a *candidate bridge* when it was extracted from at least two units and its
    spread is at most ``max(2, bridge_max_share × units)`` (an entity named everywhere —
    "patient", "treatment" — links everything and so bridges nothing), and when its name has
    a word that is not a stop word (:data:`~ragrouter.querygen.checks.STOP_WORDS`: an
    extracted "the" or "and" is no entity) and does not start (but for an article) or end with
    one ("and director" is a fragment), and when it is no value (:func:`is_value`: a number,
    year or date — many units share one, so "who was born the year X died" has many answers,
    and dates a day apart embed as twins). With texts, a bridge joins two units only when **both
    texts write it**: the 0.5B extractor gave "surgery" to two 2Wiki passages that never say
    the word, and a description or question built on such a link has nothing to stand on.

k-hop chain
    Units ``u1 … uk`` (pairwise distinct, non-overlapping) and bridges ``b1 … b(k-1)`` with
    ``b_i`` in the entities of ``u_i`` and ``u_(i+1)`` and named by **no other unit of the chain**
    (neither extracted from it nor in its text)
    (the object of a :func:`taxonomic` triple — "X | is a type of | film" — is not counted as
    mentioned: a class bridges nothing),
    so the chain cannot be cut short through a bridge, and no bridge's name containing
    another's ("skin cancer" / "basal cell skin cancer": a question about the longer one
    always names the shorter one, so reverse substitution could never hide both). Chains are directed: the answer comes
    from the last unit. :func:`find_chain` samples one by random walk: a uniform start among
    units with a step, then a bridge of the current unit drawn with weight 1 / (its spread − 1),
    then uniformly one of the units it leads to — restarting
    up to ``attempts`` times; if every walk dead-ends it enumerates chains exhaustively (up to
    ``budget`` expansions) and picks one uniformly, or raises :class:`NoCandidate` saying that
    no chain exists (or none was found within the budget). The weight undoes a hub's pull: a
    uniform draw over (bridge, next unit) steps picks a bridge in proportion to its units, so
    type-like entities ("film director", "singer" in 10 of 149 2Wiki passages) made most
    chains, while a named bridge ("Albert S. Rogell", 2 passages) — the kind a multi-hop
    question needs — was rarely drawn; with the weight each reachable unit through a bridge is
    as likely as through any other bridge of the current unit of the same specificity, and a
    bridge in d other units is d times less likely than one in a single other unit.
    The reasoning units of one type and corpus take *distinct* chains when the chains can be
    enumerated within the budget (:meth:`CorpusGraph.chain_order`: every chain, in a seeded
    order drawn without replacement with weight ∏ 1 / (spread(b) − 1) over its bridges; unit
    i takes chain i): independent walks on a 150-passage 2Wiki slice gave 3 of 8 three-hop
    units the same chain.

Summary entity
    Drawn by :mod:`ragrouter.querygen.summaries` over the same graph.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


from ragrouter.querygen.checks import STOP_WORDS, normalise

WALK_UNITS = ("document", "chunk", "mixed")

_TAXONOMIC = re.compile(r"^(?:is|are|was|were)(?: an?| the)?(?: (?:type|kind|sort|form|member|instance)s?(?: of)?)?"
                        r"(?: an?| the)?(?: person)?$")


def taxonomic(relation: str) -> bool:
    """Whether a triple only says what class its subject belongs to ("is a type of", "is a",
    "was an", "is a person"): its object is a class ("film", "drama film", "actor"), not an
    entity a question can hop through, and "What is a type of film?" asks nothing."""
    return bool(_TAXONOMIC.match(" ".join(str(relation).casefold().split())))


class NoCandidate(RuntimeError):
    """The corpus offers nothing to sample for this unit (no chain, no eligible entity)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ChunkInfo:
    """What the samplers need to know about a chunk (its text is loaded on demand)."""

    id: int
    document_id: int
    document_external_id: str
    token_start: int
    token_end: int


@dataclass(frozen=True)
class Chain:
    """A k-hop chain: ``units[i]`` and ``units[i+1]`` are linked by ``bridges[i]``."""

    units: tuple[int, ...]
    bridges: tuple[str, ...]

    @property
    def hops(self) -> int:
        return len(self.units)


def choose_walk_unit(setting: str, n_documents: int, max_hops: int, n_long: int = 0) -> str:
    """'document', 'chunk' or 'mixed' for a ``walk_unit`` setting ('auto' or one of those);
    ``n_long`` = documents longer than ``querygen.long_document_chunks`` chunks."""
    if setting in WALK_UNITS:
        return setting
    if setting != "auto":
        raise ValueError(f"querygen.walk_unit must be auto, document, chunk or mixed (got {setting!r})")
    if n_documents < max(2, int(max_hops)):
        return "chunk"
    return "mixed" if n_long else "document"


@dataclass
class CorpusGraph:
    """Chunks, walk units and entity mentions of one corpus (see the module docstring)."""

    chunks: dict[int, ChunkInfo]
    walk_unit: str
    bridge_max_share: float = 0.5
    linking: Any = None
    """A :class:`~ragrouter.querygen.linking.Linking` (``None``: exact names)."""
    unit_of: dict[int, int] = field(init=False)
    chunk_units: frozenset[int] = field(init=False, default=frozenset())
    """Mixed mode: the units that are chunks of a long document (the others are documents)."""
    surface: dict[str, dict[int, Counter]] = field(init=False, default_factory=dict)
    """entity (cluster) → unit → Counter(surface form as extracted)."""
    mentions: dict[str, dict[int, Counter]] = field(init=False)
    """entity → unit → Counter(chunk id → triples of that chunk naming the entity)."""
    entities_of: dict[int, frozenset[str]] = field(init=False)
    units: list[int] = field(init=False)
    bridges: frozenset[str] = field(init=False)
    triples: list[tuple[str, str, str, int]] = field(init=False)
    written_in: dict[str, frozenset[int]] | None = field(init=False, default=None)
    """entity → the units whose text names it (``None`` when no texts were given; computed for
    the entities extracted from ≥ 2 units)."""
    chunk_facts: dict[int, list[tuple[str, str, str, str, str]]] = field(init=False, default_factory=dict)
    """chunk id → its triples as (subject, relation, object) as extracted, then the two
    canonical names: what the stepwise strategy anchors its answers and descriptions on."""
    memo: dict = field(init=False, default_factory=dict, repr=False)
    """Derived values computed once per graph (eligible summary entities)."""

    @classmethod
    def build(cls, chunks: Iterable[ChunkInfo], triples: Iterable[tuple[str, str, str, int]],
              walk_unit: str, bridge_max_share: float = 0.5, linking=None,
              long_document_chunks: int = 3, texts: Mapping[int, str] | None = None) -> CorpusGraph:
        """``texts``: chunk id → text, for the spread of each entity (module docstring);
        ``None``: extracted mentions only."""
        if walk_unit not in WALK_UNITS:
            raise ValueError(f"walk unit must be one of {', '.join(WALK_UNITS)} (got {walk_unit!r})")
        if not 0 < float(bridge_max_share) <= 1:
            raise ValueError(f"querygen.bridge_max_share must be in (0, 1] (got {bridge_max_share!r})")
        g = cls({c.id: c for c in chunks}, walk_unit, float(bridge_max_share), linking)
        if walk_unit == "mixed":
            by_doc: dict[int, list[int]] = defaultdict(list)
            for cid, c in g.chunks.items():
                by_doc[c.document_id].append(cid)
            g.unit_of, chunk_units = {}, set()
            for ids in by_doc.values():
                long = len(ids) > int(long_document_chunks)
                for cid in ids:
                    g.unit_of[cid] = cid if long else min(ids)
                if long:
                    chunk_units.update(ids)
            g.chunk_units = frozenset(chunk_units)
        else:
            g.unit_of = {cid: (c.document_id if walk_unit == "document" else cid) for cid, c in g.chunks.items()}
        canon = linking.canonical if linking is not None else (lambda n: n)
        mentions: dict[str, dict[int, Counter]] = defaultdict(lambda: defaultdict(Counter))
        surface: dict[str, dict[int, Counter]] = defaultdict(lambda: defaultdict(Counter))
        kept = []
        facts: dict[int, list[tuple[str, str, str, str, str]]] = defaultdict(list)
        for s, r, o, cid in triples:
            cid = int(cid)
            if cid not in g.unit_of:
                continue  # a chunk of another chunker
            cs, co = canon(s), canon(o)
            kept.append((cs, r, co, cid))
            facts[cid].append((s, r, o, cs, co))
            u = g.unit_of[cid]
            for name in ({cs} if taxonomic(r) else {cs, co}):  # a class is no bridge
                mentions[name][u][cid] += 1
            surface[cs][u][s] += 1
            surface[co][u][o] += 1
        g.surface = {e: dict(by_unit) for e, by_unit in surface.items()}
        g.triples = kept
        g.chunk_facts = dict(facts)
        g.mentions = {e: dict(by_unit) for e, by_unit in mentions.items()}
        ents: dict[int, set[str]] = defaultdict(set)
        for e, by_unit in g.mentions.items():
            for u in by_unit:
                ents[u].add(e)
        g.entities_of = {u: frozenset(v) for u, v in ents.items()}
        g.units = sorted(g.entities_of)
        if texts is not None:
            g.written_in = _written_in(g, texts)
        cap = max(2, int(g.bridge_max_share * len(g.units)))
        g.bridges = frozenset(e for e, by_unit in g.mentions.items()
                              if len(by_unit) >= 2 and g.spread(e) <= cap and _is_name(e) and not is_value(e))
        return g

    def chain_order(self, hops: int, type_seed: int, budget: int = 200_000) -> list[Chain] | None:
        """Every k-hop chain in one seeded order drawn without replacement, each next chain
        with probability ∝ the product of its bridges' walk weights 1 / (spread − 1)
        (:func:`weighted_order`): unit ``i`` of a type takes chain ``i``, so no two units of
        a run share a chain. ``None`` when the chains are too many to enumerate within
        ``budget`` (a large corpus: independent walks then rarely meet). Cached per graph."""
        key = ("chain_order", hops, type_seed, budget)
        if key not in self.memo:
            try:
                every = list(iter_chains(self, hops, budget))
            except NoCandidate:
                self.memo[key] = None
            else:
                weights = [math.prod(1.0 / max(1, self.spread(b) - 1) for b in c.bridges) for c in every]
                self.memo[key] = weighted_order(every, weights, random.Random(type_seed))
        return self.memo[key]

    def spread(self, entity: str) -> int:
        """How many units name ``entity`` (module docstring)."""
        extracted = self.mentions.get(entity, {})
        if self.written_in is None:
            return len(extracted)
        return len(set(extracted) | self.written_in.get(entity, frozenset()))

    def names(self, unit: int, entity: str) -> bool:
        """Whether ``unit`` names ``entity``: extracted from it, or in its text."""
        return entity in self.entities_of.get(unit, ()) or (
            self.written_in is not None and unit in self.written_in.get(entity, ()))

    def written(self, unit: int, entity: str) -> bool:
        """Whether the text of ``unit`` names ``entity`` (always true without texts)."""
        return self.written_in is None or unit in self.written_in.get(entity, ())

    # ------------------------------------------------------------------ units
    def unit_chunks(self, unit: int) -> list[int]:
        """Chunk ids of a walk unit, ascending."""
        return sorted(c for c, u in self.unit_of.items() if u == unit)

    def overlaps(self, u: int, v: int) -> bool:
        """Whether two walk units are the same source (same unit, or overlapping chunks)."""
        if u == v:
            return True
        if self.walk_unit == "document" or (self.walk_unit == "mixed"
                                            and not (u in self.chunk_units and v in self.chunk_units)):
            return False
        a, b = self.chunks[u], self.chunks[v]
        return a.document_id == b.document_id and a.token_start < b.token_end and b.token_start < a.token_end

    def compatible(self, v: int, chain: Iterable[int]) -> bool:
        return not any(self.overlaps(v, w) for w in chain)

    def document_ids(self, chunk_ids: Iterable[int]) -> list[str]:
        """External ids of the documents of ``chunk_ids``, in first-seen order."""
        return list(dict.fromkeys(self.chunks[c].document_external_id for c in chunk_ids))

    # ------------------------------------------------------------------ chains
    def steps(self, chain: list[int], bridges: list[str]) -> list[tuple[str, int]]:
        """The (bridge, next unit) steps that extend a partial chain, in a stable order."""
        cur = chain[-1]
        out = []
        for b in sorted(self.entities_of.get(cur, ()) & self.bridges):
            if b in bridges or any(self.names(w, b) for w in chain[:-1]) or not self.written(cur, b):
                continue
            if any(_nested(b, pb) for pb in bridges):
                continue
            for v in sorted(self.mentions[b]):
                if not self.compatible(v, chain) or not self.written(v, b):
                    continue
                if any(self.names(v, pb) for pb in bridges):
                    continue
                out.append((b, v))
        return out

    def chain_chunks(self, chain: Chain, max_chunks_per_hop: int = 2) -> list[list[int]]:
        """The chunks that carry each hop: in document mode the unit's chunk(s) naming its
        bridge entities (one naming all of them when there is one), else the chunk itself."""
        out = []
        for i, u in enumerate(chain.units):
            if self.walk_unit == "chunk" or u in self.chunk_units:
                out.append([u])
                continue
            wanted = [b for b in (chain.bridges[i - 1] if i > 0 else None,
                                  chain.bridges[i] if i < len(chain.bridges) else None) if b]
            per = [set(self.mentions[b][u]) for b in wanted]
            both = sorted(set.intersection(*per)) if per else []
            if both:
                picked = [max(both, key=lambda c: (sum(self.mentions[b][u][c] for b in wanted), -c))]
            else:
                picked = sorted({min(p) for p in per})
            out.append(picked[:max(1, int(max_chunks_per_hop))])
        return out


    def forms(self, entity: str, units: Iterable[int] | None = None) -> list[str]:
        """Surface forms of an entity (in ``units`` only, when given), most frequent first;
        with a linking, every member of its cluster when ``units`` is ``None``."""
        if units is None and self.linking is not None:
            return list(self.linking.forms(entity))
        c: Counter = Counter()
        for u, forms in self.surface.get(entity, {}).items():
            if units is None or u in units:
                c.update(forms)
        out = [f for f, _ in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))]
        return out or [entity]

    def facts(self, chunk_ids: Iterable[int]) -> list[tuple[str, str, str, str, str]]:
        """The triples of ``chunk_ids`` in chunk order: (subject, relation, object, canonical
        subject, canonical object)."""
        return [f for c in chunk_ids for f in self.chunk_facts.get(int(c), [])]

    def link_evidence(self, chain: Chain) -> list[dict]:
        """Per bridge: the units it joins, its mention in each, how the two mentions were
        linked and their similarity (the chain is as strong as its weakest link)."""
        out = []
        for i, b in enumerate(chain.bridges):
            u, v = chain.units[i], chain.units[i + 1]
            a, z = self.forms(b, [u])[0], self.forms(b, [v])[0]
            if self.linking is not None:
                ev = self.linking.evidence(a, z)
            else:
                ev = {"mentions": [a, z], "how": "identical", "similarity": 1.0, "path": []}
            out.append({"bridge": b, "units": [u, v], **ev})
        return out


def _is_name(entity: str) -> bool:
    """Whether an extracted name can be a bridge: it has a word that is not a stop word, and it
    neither starts with a stop word other than an article nor ends with one ("and director",
    "screenwriter of": fragments of a phrase, not names)."""
    words = normalise(entity).split()
    if not set(words) - STOP_WORDS:
        return False
    return words[0] not in STOP_WORDS - _ARTICLES and words[-1] not in STOP_WORDS


_ARTICLES = frozenset({"the", "a", "an"})

_MONTHS = frozenset("january february march april may june july august september october november december "
                    "jan feb mar apr jun jul aug sep sept oct nov dec".split())
_ERAS = frozenset({"bc", "bce", "ad", "ce", "th", "st", "nd", "rd", "s"})


def is_value(entity: str) -> bool:
    """Whether an extracted name is a value — a number, a year or a date ("1966", "10 january
    1960", "1990s") — rather than an entity: many units share a value, so "who was born the
    year X died" has many answers, and two dates a day apart embed as near twins (a 2Wiki
    chain linked "10 January 1960" to "10 April 1960"). A value is no bridge."""
    words = normalise(entity).split()
    if not words or not any(any(ch.isdigit() for ch in w) for w in words):
        return False
    return all(w.isdigit() or w in _MONTHS or w in _ERAS or (w[:-1].isdigit() and w[-1] == "s")
               or (w[:-2].isdigit() and w[-2:] in _ERAS) for w in words)


def _written_in(graph: CorpusGraph, texts: Mapping[int, str]) -> dict[str, frozenset[int]]:
    """Entity → units whose normalised text contains one of its normalised surface forms (or
    its name) on word boundaries, for the entities extracted from ≥ 2 units. A word → units
    index narrows each form to the units holding all its words before the substring test."""
    by_unit: dict[int, list[int]] = defaultdict(list)
    for cid, u in graph.unit_of.items():
        by_unit[u].append(cid)
    unit_text = {u: f" {normalise(' '.join(texts.get(c, '') for c in sorted(cids)))} "
                 for u, cids in by_unit.items()}
    word_units: dict[str, set[int]] = defaultdict(set)
    for u, t in unit_text.items():
        for w in set(t.split()):
            word_units[w].add(u)
    out: dict[str, frozenset[int]] = {}
    for e, extracted in graph.mentions.items():
        if len(extracted) < 2:
            continue
        found: set[int] = set()
        forms = {normalise(e)} | {normalise(f) for forms in graph.surface.get(e, {}).values() for f in forms}
        for form in forms:
            words = form.split()
            if not words:
                continue
            cand = set.intersection(*(word_units.get(w, set()) for w in words))
            found.update(u for u in cand - found if f" {form} " in unit_text[u])
        out[e] = frozenset(found)
    return out


def _nested(a: str, b: str) -> bool:
    """Whether one entity name contains the other as whole words ('skin cancer' in 'basal cell
    skin cancer'): a question about the longer one always names the shorter one."""
    a, b = f" {' '.join(a.split())} ", f" {' '.join(b.split())} "
    return a in b or b in a


def iter_chains(graph: CorpusGraph, hops: int, budget: int = 200_000) -> Iterator[Chain]:
    """Every k-hop chain, depth first in a stable order. Raises :class:`NoCandidate`
    ('budget') if more than ``budget`` partial chains would have to be expanded."""
    _check_hops(hops)
    expanded = 0

    def extend(chain: list[int], bridges: list[str]) -> Iterator[Chain]:
        nonlocal expanded
        if len(chain) == hops:
            yield Chain(tuple(chain), tuple(bridges))
            return
        expanded += 1
        if expanded > budget:
            raise NoCandidate("budget", f"more than {budget} partial {hops}-hop chains to expand")
        for b, v in graph.steps(chain, bridges):
            yield from extend(chain + [v], bridges + [b])

    for u in graph.units:
        yield from extend([u], [])


def find_chain(graph: CorpusGraph, hops: int, rng: random.Random, attempts: int = 200,
               budget: int = 200_000) -> Chain:
    """A k-hop chain by seeded random walk (exhaustive fallback); see the module docstring."""
    _check_hops(hops)
    starts = [u for u in graph.units if graph.steps([u], [])]
    if starts:
        for _ in range(max(1, int(attempts))):
            chain, bridges = [rng.choice(starts)], []
            while len(chain) < hops:
                steps = graph.steps(chain, bridges)
                if not steps:
                    break
                b, v = _weighted_step(graph, steps, rng)
                chain.append(v)
                bridges.append(b)
            if len(chain) == hops:
                return Chain(tuple(chain), tuple(bridges))
    try:
        every = list(iter_chains(graph, hops, budget))
    except NoCandidate as exc:
        raise NoCandidate("no_chain", f"no {hops}-hop chain found: {attempts} random walks dead-ended and "
                                      f"the exhaustive search stopped ({exc})") from None
    if not every:
        raise NoCandidate("no_chain", f"no {hops}-hop chain of {graph.walk_unit}s linked by bridge entities "
                                      f"exists ({len(graph.units)} {graph.walk_unit}s with entities, "
                                      f"{len(graph.bridges)} candidate bridge entities)")
    return rng.choice(every)


def _weighted_step(graph: CorpusGraph, steps: list[tuple[str, int]], rng: random.Random) -> tuple[str, int]:
    """One walk step: a bridge among those of ``steps`` with weight 1 / (its spread − 1), then
    uniformly one of the units it leads to (see the module docstring)."""
    by_bridge: dict[str, list[int]] = defaultdict(list)
    for b, v in steps:
        by_bridge[b].append(v)
    names = sorted(by_bridge)
    weights = [1.0 / max(1, graph.spread(b) - 1) for b in names]
    b = rng.choices(names, weights=weights, k=1)[0]
    return b, rng.choice(by_bridge[b])


def _check_hops(hops: int) -> None:
    if not isinstance(hops, int) or hops < 2:
        raise ValueError(f"a reasoning chain needs at least 2 hops (got {hops!r})")


def weighted_order(items: list, weights: list[float], rng: random.Random) -> list:
    """``items`` in a random order drawn without replacement, each next item with probability
    ∝ its weight among those left (Efraimidis–Spirakis keys ``log(u) / w``, largest first).
    Items of weight ≤ 0 are left out. The first item is thus distributed ∝ weight."""
    keyed = []
    for i, w in enumerate(weights):
        u = 1.0 - rng.random()  # (0, 1]
        if w > 0:
            keyed.append((math.log(u) / w, i))
    keyed.sort(key=lambda k: (-k[0], k[1]))
    return [items[i] for _, i in keyed]
