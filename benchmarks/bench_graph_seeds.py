"""Graph seeds that are not hubs (issue 30 item 2): distinct graph contexts and evidence hits with
the PPR restart weighted by seed similarity (the paper's eq. 7) and by node specificity (HippoRAG).

On a corpus where every question names the same person, that person's node is a seed of every
query; weighted by similarity alone it takes a large share of the walk's restart mass, so PPR and
the triple order (ties on similarity go to the endpoint with more PPR mass) return its
neighbourhood whatever was asked. ``retrieval.seed_weighting: specificity`` divides a seed's
weight by the number of chunks its triples come from.

Two corpora, each retrieved with the real :class:`~ragrouter.paradigms.retrievers.GraphRetriever`
under both weightings (nothing else changes), and a third row, ``restart-only``: specificity in
the restart vector alone, the triple order left as the paper's (what the restart weights alone do):

* ``person``: constructed chat logs, one chunk per event; ``maya`` is named in every chunk and
  every question, ``sam`` in every other chunk and in those chunks' questions; each question asks
  about one event (its gold chunk) by the friend and the place it names.
* ``medical``: the first ``--chunks`` chunks of the GraphRAG-Bench medical textbook and every
  question whose evidence lies in them (``corpus slice``'s rule, ``ragrouter.corpus.demo.medical_slice``);
  gold chunks found lexically as in ``bench_min_similarity.py`` (:func:`gold_chunks`). The graph is built without an
  LLM: a term vocabulary (1–3-word runs of content words that occur at least twice in the slice),
  terms found left to right in each sentence (longest first), and one triple per pair of
  neighbouring terms in a sentence (relation: the words between them). A hub here is a generic
  term ("cancer", "treatment").
* ``--db URL --store-corpus NAME``: a corpus as a run left it in a store, read only (its
  LLM-extracted graph, its accepted questions, and as their entities the ones each question's
  latest graph run recorded: :func:`store_corpus`), instead of the two above.

Query entities come from a scripted endpoint: the vocabulary terms written in the question (an
extractor that never misses a name; none found: the whole question, the retriever's fallback).
Names and questions are embedded with all-MiniLM-L6-v2 (``--hashed``: one random vector per
name, so only exact names link). Figures per corpus and weighting: the share of questions whose
top-``--k`` chunks (the retriever's ranked list) no other question has, the number of distinct
top-k sets, the evidence hit rate (a gold chunk in the top k; and in the packed GraphRAG
context, 8,000 tokens), the restart mass on hub seeds (nodes in >= 25 % of the chunks).

    .venv/bin/python benchmarks/bench_graph_seeds.py                    # both corpora
    .venv/bin/python benchmarks/bench_graph_seeds.py --corpus person --hashed --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragrouter.config import Config  # noqa: E402
from ragrouter.paradigms.context import SentenceSplitter, build_fact_context  # noqa: E402
from ragrouter.paradigms.index import CorpusIndex  # noqa: E402
from ragrouter.paradigms.retrievers import GraphRetriever  # noqa: E402
from ragrouter.paradigms.settings import SEED_WEIGHTINGS, Settings  # noqa: E402

HUB_SHARE = 0.25  # a node whose triples come from >= this share of the chunks is a hub
_TOKEN = re.compile(r"[a-z][a-z0-9'\-]*")
STOP = frozenset("""a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each either else even ever every
few for from further had has have having he her here hers herself him himself his how however i if in into
is it its itself just least less like may me might more most much must my myself no nor not now of off
often on once one only or other others our ours ourselves out over own per rather same several she should
since so some such than that the their theirs them themselves then there these they this those through
thus to too under until up upon us very via was we well were what when where whether which while who whom
whose why will with within without would yet you your yours yourself yourselves called called known
include includes including usually many used use uses using often sometimes within""".split())


# --------------------------------------------------------------------------- corpora
@dataclasses.dataclass
class Corpus:
    name: str
    chunks: list[str]
    triples: list[tuple[str, str, str, int]]  # (subject, relation, object, chunk position)
    questions: list[tuple[str, list[str], set[int]]]  # (text, entities named, gold chunk positions)
    vocabulary: dict[tuple[str, ...], str] = dataclasses.field(default_factory=dict)


FRIENDS = """tom priya lena omar jonas keiko rafael ines marek chloe dmitri amara bruno hana felix zara
       luca noor tariq elise ravi sofia kwame mila anton yara hugo leila viktor nia oskar rosa emeka
       ingrid pablo saskia idris freya mateo alina""".split()
PLACES = ["blue cafe", "city library", "harbour market", "north park", "rowing club", "old cinema",
          "night bakery", "train station", "climbing gym", "art museum", "jazz bar", "flower shop"]
TOPICS = """a broken bicycle|a job offer in lisbon|a lost passport|a new puppy|a wedding speech|a tax refund|
a chess tournament|a leaking roof|a piano recital|a camping trip|a vegan recipe|a marathon plan|a film script|
a stolen laptop|a garden shed|a pottery class|a birthday cake|a moving van|a surf lesson|a podcast idea|
a bee hive|a night shift|a car loan|a language exam|a violin repair|a hiking map|a poetry reading|a yoga retreat|
a board game|a rent increase|a tennis match|a kite festival|a book club|a vintage camera|a sailing course|
a fishing rod|a dentist visit|a cooking contest|a museum pass|a phone contract|a solar panel|a ski holiday|
a dance class|a wine tasting|a paper lantern|a chemistry exam|a road trip|a charity run|a dog sitter|
a jazz record|a wood stove|a science fair|a fencing lesson|a concert ticket|a flat viewing|a family reunion|
a knitting pattern|a radio show|a cycling tour|a glass vase""".replace("\n", "").split("|")


def person_corpus(n_chunks: int = 60) -> Corpus:
    """Chat logs about ``maya`` (every chunk) and ``sam`` (every other chunk); see the module doc."""
    if n_chunks > len(TOPICS):
        raise SystemExit(f"--person-chunks: at most {len(TOPICS)}")
    chunks, triples, questions = [], [], []
    for i in range(n_chunks):
        friend, place, topic = FRIENDS[i % len(FRIENDS)], PLACES[(i * 5) % len(PLACES)], TOPICS[i]
        with_sam = i % 2 == 0
        text = (f"Chat log {i + 1}. Maya wrote that she met {friend.title()} at the {place}. Maya and "
                f"{friend.title()} talked about {topic} for most of the evening. {friend.title()} works near "
                f"the {place}.")
        tri = [("maya", "met", friend), ("maya", "visited", place), (friend, "talked about", topic),
               ("maya", "talked about", topic), (friend, "works near", place)]
        if with_sam:
            text += f" Sam joined Maya and {friend.title()} later and asked about {topic}."
            tri += [("sam", "joined", "maya"), ("sam", "met", friend), ("sam", "asked about", topic)]
        chunks.append(text + " Maya said the day was long and she would write again tomorrow.")
        triples += [(s, r, o, i) for s, r, o in tri]
        named = ["maya", friend, place] + (["sam"] if with_sam else [])
        q = (f"What did Maya and {friend.title()} talk about at the {place}"
             + (" before Sam joined them?" if with_sam else "?"))
        questions.append((q, named, {i}))
    vocab = {tuple(name.split()): name for s, _, o, _ in triples for name in (s, o)}
    return Corpus("person", chunks, triples, questions, vocab)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def find_terms(tokens: list[str], vocab: dict[tuple[str, ...], str]) -> list[tuple[int, int, str]]:
    """(start, end, name) of the vocabulary terms in ``tokens``, left to right, longest first."""
    out, j = [], 0
    while j < len(tokens):
        for n in (3, 2, 1):
            name = vocab.get(tuple(tokens[j:j + n]))
            if name is not None:
                out.append((j, j + n, name))
                j += n
                break
        else:
            j += 1
    return out


def lexical_triples(chunks: list[str], min_count: int = 2, max_gap: int = 8) -> tuple[list, dict]:
    """The medical slice's graph without an LLM (see the module doc): (triples, vocabulary)."""
    splitter = SentenceSplitter(dict(enumerate(chunks)))
    sentences = [[_tokens(s) for s, _, _ in splitter(i)] for i in range(len(chunks))]
    counts: Counter[tuple[str, ...]] = Counter()
    for sents in sentences:
        for toks in sents:
            for n in (1, 2, 3):
                for j in range(len(toks) - n + 1):
                    gram = tuple(toks[j:j + n])
                    if all(t not in STOP and len(t) >= 3 and not t[0].isdigit() for t in gram) \
                            and (n > 1 or len(gram[0]) >= 4):
                        counts[gram] += 1
    vocab = {g: " ".join(g) for g, c in counts.items() if c >= min_count}
    triples = []
    for i, sents in enumerate(sentences):
        for toks in sents:
            terms = find_terms(toks, vocab)
            for (s0, s1, a), (o0, _o1, b) in zip(terms, terms[1:]):
                if a == b or o0 - s1 > max_gap:
                    continue
                relation = " ".join(toks[s1:o0]) or "with"
                triples.append((a, relation, b, i))
    return triples, vocab


def gold_chunks(evidence, chunk_words: list[set[str]], overlap: float) -> set[int]:
    """The best-overlapping chunk of every evidence sentence with >= ``overlap`` of its content
    words in it (``bench_min_similarity.py``'s rule)."""
    from ragrouter.corpus.slicing import _words

    sentences = [x for e in (evidence if isinstance(evidence, list) else [evidence or ""])
                 for x in re.split(r";\s+", e or "") if x.strip()]
    out: set[int] = set()
    for sent in sentences:
        words = _words(sent)
        if words:
            shares = [len(words & cw) / len(words) for cw in chunk_words]
            best = int(np.argmax(shares))
            if shares[best] >= overlap:
                out.add(best)
    return out


def medical_corpus(n_chunks: int, overlap: float = 0.75) -> Corpus:
    from ragrouter.corpus.slicing import _words
    from ragrouter.corpus.chunking import chunk_text
    from ragrouter.corpus.demo import default_data_dir, medical_slice

    ds = medical_slice(default_data_dir(), n_chunks, None, overlap)
    chunks = [c.text for d in ds.documents for c in chunk_text(d.title or "", d.text, 512, 100)]
    triples, vocab = lexical_triples(chunks)
    words = [_words(c) for c in chunks]
    questions = []
    for q in ds.questions:
        gold = gold_chunks(q.evidence, words, overlap)
        if gold:
            named = list(dict.fromkeys(name for _, _, name in find_terms(_tokens(q.question), vocab)))
            questions.append((q.question, named, gold))
    return Corpus("medical", chunks, triples, questions, vocab)


def store_corpus(url: str, name: str, config_path: Path | None, overlap: float = 0.75) -> tuple[Corpus, CorpusIndex]:
    """A corpus as a run left it in a store: its LLM-extracted graph (the configured extractor's
    variant), its accepted questions and, as each question's entities, the ones its graph run
    recorded (no model call; questions no graph run answered are left out). Gold chunks: the
    chunks a generated question was built from, else the evidence sentences found lexically
    (:func:`gold_chunks`); unanswerable questions have none and count only in the distinct share."""
    from ragrouter.corpus.slicing import _words
    from ragrouter.db.engine import make_engine
    from ragrouter.answering import lookup
    from ragrouter.stages import storeio

    config = Config.load(config_path, env={}) if config_path else Config.load(env={})
    engine = make_engine(url, read_only=True, create=False)
    cid = lookup.corpus_id(engine, name)
    with engine.connect() as conn:
        index = lookup.corpus_index(conn, cid, name, config)
    ids = index.chunk_ids.tolist()
    texts = [index.texts[c] for c in ids]
    words = [_words(t) for t in texts]
    questions, skipped = [], 0
    for q in storeio.graph_queries(engine, name):
        if q["entities"] is None:
            skipped += 1
            continue
        if q["unanswerable"]:
            gold: set[int] = set()
        elif q["chunk_ids"]:
            gold = {int(c) for c in q["chunk_ids"]} & set(ids)
        else:
            gold = {ids[p] for p in gold_chunks(q["evidence"], words, overlap)}
        questions.append((q["question"], q["entities"], gold))
    engine.dispose()
    corpus = Corpus(name, texts, [], questions)
    corpus.skipped = skipped  # type: ignore[attr-defined]
    return corpus, index


# --------------------------------------------------------------------------- retrieval
class ScriptedEntities:
    """The query-entity endpoint: replies with the names set in ``reply`` (the corpus' own
    vocabulary terms written in the question); an empty list makes the retriever fall back to
    the whole question, as an LLM reply without entities does."""

    reply: list[str] = []

    def chat(self, backend, messages, **kw):
        return type("Reply", (), {"data": {"entities": list(self.reply)}, "call_id": 0, "prompt_tokens": 0,
                                  "completion_tokens": 0, "cached": False})()


def hashed_vectors(texts, dim: int = 256) -> np.ndarray:
    out = []
    for t in texts:
        seed = int.from_bytes(hashlib.sha256(" ".join(t.lower().split()).encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(dim)
        out.append(v / np.linalg.norm(v))
    return np.asarray(out, dtype=np.float32).reshape(len(out), dim)


def make_embed(hashed: bool, model: str = "all-MiniLM-L6-v2"):
    if hashed:
        return hashed_vectors
    from ragrouter.llm.encoder import get_encoder

    enc = get_encoder(model)
    cache: dict[str, np.ndarray] = {}

    def embed(texts):
        todo = [t for t in dict.fromkeys(texts) if t not in cache]
        if todo:
            cache.update(zip(todo, enc.encode(todo)))
        return np.vstack([cache[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)
    return embed


def build_index(corpus: Corpus, embed) -> CorpusIndex:
    names = sorted({n for s, _, o, _ in corpus.triples for n in (s, o)})
    eid = {n: k for k, n in enumerate(names)}
    vecs = embed(names)
    toks = [len(c.split()) for c in corpus.chunks]
    return CorpusIndex(list(range(len(corpus.chunks))), corpus.chunks, toks,
                       np.zeros((len(corpus.chunks), vecs.shape[1]), np.float32), list(range(len(names))), names,
                       vecs, [(eid[s], r, eid[o], c) for s, r, o, c in corpus.triples], name=corpus.name)


class RestartOnly(GraphRetriever):
    """The ``restart-only`` row: specificity in the restart vector, the paper's triple order."""

    def personalization(self, seeds):
        return GraphRetriever(self.index, dataclasses.replace(self.s, seed_weighting="specificity")).personalization(seeds)


VARIANTS = (*SEED_WEIGHTINGS, "restart-only")


def measure(corpus: Corpus, index: CorpusIndex, settings: Settings, embed, k: int, variant: str | None = None) -> dict:
    gw = ScriptedEntities()
    variant = variant or settings.seed_weighting
    if variant == "restart-only":
        retriever = RestartOnly(index, dataclasses.replace(settings, seed_weighting="similarity"))
    else:
        retriever = GraphRetriever(index, dataclasses.replace(settings, seed_weighting=variant))
    hubs = {index.entity_names[p] for p in np.flatnonzero(index.entity_chunk_counts >= HUB_SHARE * len(corpus.chunks))}
    tops, hit_k, hit_ctx, hub_mass, seeded, rr, t0 = [], 0, 0, [], 0, [], time.perf_counter()
    for text, named, gold in corpus.questions:
        gw.reply = named
        r = retriever.retrieve(text, gw, "scripted", embed)
        top = frozenset(r.chunk_ids[:k])
        tops.append(top)
        hit_k += bool(top & gold)
        rr.append(next((1.0 / (j + 1) for j, c in enumerate(r.chunk_ids) if c in gold), 0.0))
        ctx = build_fact_context(r.facts, index.texts, settings.token_budget, sentences_of=index.sentences)
        hit_ctx += bool(set(ctx.chunk_ids) & gold)
        if r.details["seed_weights"]:
            seeded += 1
            hub_mass.append(sum(w for name, _, w in r.details["seed_weights"] if name in hubs))
    n = len(corpus.questions)
    n_gold = sum(1 for _, _, gold in corpus.questions if gold)  # unanswerable ones have none
    rr = [x for x, (_, _, gold) in zip(rr, corpus.questions) if gold]
    same = Counter(tops)
    return {"corpus": corpus.name, "weighting": variant, "questions": n, "questions_with_gold": n_gold, "k": k,
            "distinct_share": round(sum(1 for t in tops if same[t] == 1) / n, 4),
            "distinct_sets": len(same), "largest_shared_set": max(same.values()),
            "hit_at_k": round(hit_k / n_gold, 4) if n_gold else None,
            "mrr": round(float(np.mean(rr)), 4) if rr else None,
            "hit_in_context": round(hit_ctx / n_gold, 4) if n_gold else None,
            "hub_restart_mass": round(float(np.mean(hub_mass)), 4) if hub_mass else None,
            "questions_with_seeds": seeded, "ms_per_query": round(1000 * (time.perf_counter() - t0) / n, 2)}


def describe(corpus: Corpus, index: CorpusIndex) -> dict:
    counts = index.entity_chunk_counts
    top = np.argsort(-counts, kind="stable")[:5]
    return {"corpus": corpus.name, "chunks": len(corpus.chunks), "entities": index.n_entities,
            "triples": index.n_triples, "questions": len(corpus.questions),
            "questions_without_entities": sum(1 for _, named, _ in corpus.questions if not named),
            "biggest_hubs": [[index.entity_names[p], int(counts[p])] for p in top],
            "hubs": int(np.count_nonzero(counts >= HUB_SHARE * len(corpus.chunks)))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", choices=("person", "medical", "both"), default="both")
    ap.add_argument("--chunks", type=int, default=60, help="medical: first N chunks of the textbook")
    ap.add_argument("--person-chunks", type=int, default=60, help="person: events (chunks and questions)")
    ap.add_argument("--k", type=int, default=5, help="top-k chunks compared between questions")
    ap.add_argument("--hashed", action="store_true", help="random vector per name instead of MiniLM")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--db", default=None, help="measure a store's corpus instead (its LLM-extracted graph and "
                    "the entities its graph runs recorded; read only): a SQLAlchemy URL")
    ap.add_argument("--store-corpus", action="append", default=[], help="with --db: corpus name (repeatable)")
    ap.add_argument("--config", type=Path, default=None, help="with --db: the config the store's runs used")
    args = ap.parse_args(argv)
    if args.db and not args.store_corpus:
        ap.error("--db needs --store-corpus NAME")

    cfg = Config.load(args.config, env={}) if args.config else Config.load(env={})
    base = Settings.from_config(cfg)
    backend = cfg.backend(base.embedder)
    if not args.hashed and backend.get("kind") != "local-encoder":
        # the store's entity vectors came from that endpoint, and this benchmark is read only: it
        # makes no model call (no ledger row, no token spent), so it cannot embed the questions
        print(f"bench_graph_seeds: the config's embedder {base.embedder!r} is a {backend.get('kind')!r} backend "
              f"(model {backend.get('model')!r}); this benchmark embeds in-process only: use a config whose "
              "embedder is kind 'local-encoder', or --hashed", file=sys.stderr)
        return 2
    embed = make_embed(args.hashed, str(backend["model"]))
    corpora, indexes = [], {}
    if args.db:
        for name in args.store_corpus:
            corpus, indexes[name] = store_corpus(args.db, name, args.config)
            corpora.append(corpus)
    if not args.db and args.corpus in ("person", "both"):
        corpora.append(person_corpus(args.person_chunks))
    if not args.db and args.corpus in ("medical", "both"):
        corpora.append(medical_corpus(args.chunks))
    out = {"settings": {"seed_entities": base.seed_entities, "entity_top_k": base.entity_top_k,
                        "entity_min_similarity": base.entity_min_similarity, "ppr_max_nodes": base.ppr_max_nodes,
                        "token_budget": base.token_budget, "embedder": "hashed" if args.hashed else base.embedder},
           "corpora": [], "results": []}
    for corpus in corpora:
        index = indexes.get(corpus.name) or build_index(corpus, embed)
        out["corpora"].append(describe(corpus, index))
        if hasattr(corpus, "skipped"):
            out["corpora"][-1]["questions_without_graph_run"] = corpus.skipped
        print(json.dumps(out["corpora"][-1]))
        for variant in VARIANTS:
            row = measure(corpus, index, base, embed, args.k, variant)
            out["results"].append(row)
            print(json.dumps(row))
    print(f"\n| corpus | weighting | N | distinct top-{args.k} | distinct sets | largest shared | hit@{args.k} "
          "| MRR | hit in context | hub restart mass |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in out["results"]:
        pct = lambda x: "-" if x is None else f"{100 * x:.1f} %"  # noqa: E731
        print(f"| {r['corpus']} | {r['weighting']} | {r['questions']} ({r['questions_with_gold']} with gold) | "
              f"{pct(r['distinct_share'])} | {r['distinct_sets']} | {r['largest_shared_set']} | {pct(r['hit_at_k'])} | "
              f"{'-' if r['mrr'] is None else format(r['mrr'], '.3f')} | {pct(r['hit_in_context'])} | "
              f"{r['hub_restart_mass']} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
