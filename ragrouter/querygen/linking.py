"""Entity linking for the bridge search (issue #19, item 2).

Extracted entity names rarely recur verbatim across documents ("lothair ii" in one passage,
"king lothair ii" or "lothair ii." in the next), so a bridge search over exact names finds
few or no chains. :func:`link_names` groups the names of a corpus into clusters, joining two
names when

* ``normalised`` — they are equal after :func:`key` (NFKC, case-folded, punctuation → space,
  a leading article dropped, a plural ``s`` of the last word dropped);
* ``alias`` — a triple states that one is an alias of the other (its relation, normalised,
  is one of :data:`ALIAS_RELATIONS`: "also known as", "alias", "abbreviation of", …);
* ``embedding`` — the cosine similarity of their embeddings (the ``embedder`` role, rows
  L2-normalised) is at least the embedder's threshold (``querygen.linking.thresholds``,
  measured per embedder; see benchmarks/README.md, issue #19), and their *markers* agree:
  the numbers, ordinals and roman numerals in them (:func:`markers`) must not differ when
  both have some (:func:`markers_agree`) — "Sir Thomas Wheate, 1st Baronet" and "…, 2nd
  Baronet" are 0.995 apart in MiniLM's space and still two people.

Clusters are the connected components of these links (union-find). Each cluster is named by
its most frequent surface form (ties: the shortest, then alphabetical), and every link keeps
its evidence: the two names, how they were linked and their similarity (1.0 for
``normalised``; the cosine for ``embedding``; ``None`` for ``alias``), so a chain can report
its weakest link (:meth:`Linking.evidence`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

ALIAS_RELATIONS = frozenset({
    "alias", "also known as", "is also known as", "known as", "is known as", "also called", "is also called",
    "called", "is called", "aka", "abbreviation", "abbreviation of", "is abbreviation of", "abbreviated as",
    "is abbreviated as", "acronym", "acronym of", "stands for", "synonym", "synonym of", "is synonym of",
    "same as", "is same as", "nickname", "nicknamed", "full name", "real name", "birth name", "born as",
})
"""Relations (normalised by :func:`key`) that state two names denote one entity."""

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)
_ARTICLE = re.compile(r"^(the|a|an) ")


def key(name: str) -> str:
    """The normalised form two names must share to be linked as ``normalised``."""
    text = unicodedata.normalize("NFKC", str(name or "")).casefold().replace("_", " ")
    text = _ARTICLE.sub("", _NON_WORD.sub(" ", text).strip())
    words = text.split()
    if words:
        last = words[-1]
        if len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is")):
            words[-1] = last[:-1]
    return " ".join(words)


_MARKER = re.compile(r"^(\d+(st|nd|rd|th)?|(xc|xl|l?x{0,3})(ix|iv|v?i{0,3}))$")


def markers(name: str) -> frozenset[str]:
    """Numbers, ordinals and roman numerals up to lxxxix of a name ('lothair ii' → {'ii'})."""
    return frozenset(w for w in key(name).split() if _MARKER.match(w))


def markers_agree(a: str, b: str) -> bool:
    """False when both names carry markers and they differ ('1st baronet' / '2nd baronet',
    'louis xiv' / 'louis xv'); a name without any ('night train' / 'night train 1990 film')
    agrees with every other."""
    ma, mb = markers(a), markers(b)
    return not (ma and mb and ma != mb)


@dataclass(frozen=True)
class Link:
    """Why two names are one entity."""

    a: str
    b: str
    how: str
    """'normalised', 'alias' or 'embedding'."""
    similarity: float | None

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "how": self.how, "similarity": self.similarity}


@dataclass
class Linking:
    """Clusters of names: ``cluster_of[name]`` is the cluster's display name."""

    cluster_of: dict[str, str]
    members: dict[str, list[str]]
    links: list[Link] = field(default_factory=list)
    threshold: float | None = None
    embedder: str | None = None
    _adj: dict[str, dict[str, Link]] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        adj: dict[str, dict[str, Link]] = defaultdict(dict)
        for ln in self.links:
            adj[ln.a][ln.b] = ln
            adj[ln.b][ln.a] = ln
        self._adj = dict(adj)

    def canonical(self, name: str) -> str:
        return self.cluster_of.get(name, name)

    def forms(self, cluster: str) -> list[str]:
        """Every surface form of a cluster (its name first)."""
        return self.members.get(cluster, [cluster])

    def evidence(self, a: str, b: str) -> dict:
        """How mention ``a`` links to mention ``b`` (same cluster): the path of links between
        them (breadth first, fewest links) and its weakest similarity."""
        if a == b:
            return {"mentions": [a, b], "how": "identical", "similarity": 1.0, "path": []}
        prev: dict[str, str | None] = {a: None}
        frontier = [a]
        while frontier and b not in prev:
            nxt = []
            for n in frontier:
                for m in sorted(self._adj.get(n, {})):
                    if m not in prev:
                        prev[m] = n
                        nxt.append(m)
            frontier = nxt
        if b not in prev:
            return {"mentions": [a, b], "how": "unlinked", "similarity": None, "path": []}
        path, cur = [], b
        while prev[cur] is not None:
            path.append(self._adj[prev[cur]][cur])
            cur = prev[cur]
        path.reverse()
        sims = [ln.similarity for ln in path if ln.similarity is not None]
        hows = sorted({ln.how for ln in path})
        return {"mentions": [a, b], "how": "+".join(hows), "similarity": min(sims) if sims else None,
                "path": [ln.as_dict() for ln in path]}


class _UnionFind:
    def __init__(self, items: Iterable[str]):
        self.parent = {x: x for x in items}

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[max(ra, rb)] = min(ra, rb)
        return True


Embed = Callable[[list[str]], np.ndarray]


def link_names(names: Iterable[str], triples: Iterable[tuple[str, str, str]] = (), *,
               embed: Embed | None = None, threshold: float | None = None, embedder: str | None = None,
               max_embedded: int = 5000, counts: Counter | None = None) -> Linking:
    """Cluster ``names`` (see the module docstring). ``triples`` are (subject, relation,
    object) for the alias links; ``embed`` maps names to L2-normalised rows and is used only
    with a ``threshold`` (and at most ``max_embedded`` distinct names, else it is skipped).
    ``counts`` (name → mentions) picks each cluster's display name."""
    names = sorted(set(names))
    counts = counts or Counter()
    uf = _UnionFind(names)
    links: list[Link] = []
    by_key: dict[str, list[str]] = defaultdict(list)
    for n in names:
        by_key[key(n)].append(n)
    for k, group in by_key.items():
        if not k:
            continue
        for other in group[1:]:
            uf.union(group[0], other)
            links.append(Link(group[0], other, "normalised", 1.0))
    present, aliased = set(names), set()
    for s, r, o in triples:
        if s in present and o in present and s != o and key(r) in ALIAS_RELATIONS:
            pair = (min(s, o), max(s, o))
            if pair not in aliased:
                aliased.add(pair)
                uf.union(s, o)
                links.append(Link(*pair, "alias", None))
    if embed is not None and threshold is not None and 1 < len(names) <= max_embedded:
        reps = sorted(by_key)  # one embedding per normalised key
        reps = [k for k in reps if k]
        vecs = np.asarray(embed([by_key[k][0] for k in reps]), dtype=np.float64)
        if len(vecs) == len(reps) and len(reps) > 1:
            sims = vecs @ vecs.T
            ii, jj = np.nonzero(np.triu(sims >= float(threshold), k=1))
            for i, j in zip(ii.tolist(), jj.tolist()):
                a, b = by_key[reps[i]][0], by_key[reps[j]][0]
                if not markers_agree(a, b):
                    continue
                uf.union(a, b)
                links.append(Link(a, b, "embedding", round(float(sims[i, j]), 4)))
    groups: dict[str, list[str]] = defaultdict(list)
    for n in names:
        groups[uf.find(n)].append(n)
    cluster_of, members = {}, {}
    for group in groups.values():
        name = min(group, key=lambda n: (-counts.get(n, 0), len(n), n))
        members[name] = [name] + sorted(n for n in group if n != name)
        for n in group:
            cluster_of[n] = name
    return Linking(cluster_of, members, links, threshold, embedder)
