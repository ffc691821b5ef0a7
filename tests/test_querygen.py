"""Query generation and verify-then-filter validation (ragrouter/querygen; paper App. A.2).

Pure parts on constructed graphs (bridge-entity chains, ego-graph sources, PageRank
sampling), every check's decision with a scripted gateway stand-in, and both stages end to
end through the real gateway against the scripted fake OpenAI-compatible endpoint (status
transitions, notes, resumability, and a second run that sends no request)."""

from __future__ import annotations

import copy
import json
import random
import re
from collections import Counter

import networkx as nx
import pytest
from sqlalchemy import text

from ragrouter.config import Config, ConfigError
from ragrouter.graph import extract as ex
from ragrouter.db.engine import write_lock
from ragrouter.graph.kg import KnowledgeGraph
from ragrouter.llm.backends import GatewayError
from ragrouter.llm.gateway import ChatResult
from ragrouter.querygen import checks, prompts
from ragrouter.querygen import generate as gen
from ragrouter.querygen.sampling import (
    Chain,
    ChunkInfo,
    CorpusGraph,
    NoCandidate,
    choose_walk_unit,
    find_chain,
    iter_chains,
    weighted_order,
)
from ragrouter.querygen.summaries import (
    ego_sources,
    max_distinct_sources,
    pagerank,
    sample_summary,
    summary_candidates,
)

# --------------------------------------------------------------------------- constructed graphs


def docs_graph(triples_by_doc: dict[int, list[tuple[str, str]]], share: float = 1.0) -> CorpusGraph:
    """Document-mode graph: one chunk per document (chunk id = document id); each pair
    (subject, object) becomes a triple of that document's chunk."""
    chunks = [ChunkInfo(d, d, f"doc{d}", 0, 100) for d in sorted(triples_by_doc)]
    triples = [(s, "rel", o, d) for d, pairs in triples_by_doc.items() for s, o in pairs]
    return CorpusGraph.build(chunks, triples, "document", share)


# A path of four documents: d1 -x- d2 -y- d3 -z- d4 (x, y, z are the only shared entities).
PATH = {1: [("a", "x")], 2: [("x", "b"), ("b", "y")], 3: [("y", "c"), ("c", "z")], 4: [("z", "q")]}


def test_chains_exist_exactly_where_expected():
    g = docs_graph(PATH)
    assert sorted(g.bridges) == ["x", "y", "z"]
    two = {(c.units, c.bridges) for c in iter_chains(g, 2)}
    assert two == {((1, 2), ("x",)), ((2, 1), ("x",)), ((2, 3), ("y",)), ((3, 2), ("y",)),
                   ((3, 4), ("z",)), ((4, 3), ("z",))}
    three = {(c.units, c.bridges) for c in iter_chains(g, 3)}
    assert three == {((1, 2, 3), ("x", "y")), ((3, 2, 1), ("y", "x")),
                     ((2, 3, 4), ("y", "z")), ((4, 3, 2), ("z", "y"))}
    assert {c.units for c in iter_chains(g, 4)} == {(1, 2, 3, 4), (4, 3, 2, 1)}
    # the random walk only ever returns valid chains, reproducibly, and reaches all of them
    seen = set()
    for seed in range(200):
        c = find_chain(g, 3, random.Random(seed))
        assert (c.units, c.bridges) in three
        assert find_chain(g, 3, random.Random(seed)) == c
        seen.add(c.units)
    assert seen == {u for u, _ in three}


def test_no_chain_is_a_clear_outcome():
    g = docs_graph({1: [("a", "x")], 2: [("x", "b")], 3: [("c", "y")], 4: [("y", "d")]})
    assert {c.units for c in iter_chains(g, 2)} == {(1, 2), (2, 1), (3, 4), (4, 3)}
    with pytest.raises(NoCandidate, match="no 3-hop chain of documents linked by bridge entities exists") as err:
        find_chain(g, 3, random.Random(0))
    assert err.value.reason == "no_chain"
    with pytest.raises(ValueError, match="at least 2 hops"):
        find_chain(g, 1, random.Random(0))


def test_a_bridge_links_only_its_two_units_of_the_chain():
    # x is in d1, d2 and d3: d1 -x- d2 -y- d3 would let d1 reach d3 directly through x.
    g = docs_graph({1: [("a", "x")], 2: [("x", "y")], 3: [("y", "x")], 4: [("k", "m")]})
    assert "x" in g.bridges and "y" in g.bridges
    assert list(iter_chains(g, 3)) == []
    for c in iter_chains(g, 2):
        (b,) = c.bridges
        assert all((b in g.entities_of[u]) for u in c.units)


def test_nested_bridge_names_never_share_a_chain():
    g = docs_graph({1: [("a", "skin cancer")], 2: [("skin cancer", "b"), ("b", "basal cell skin cancer")],
                    3: [("basal cell skin cancer", "c"), ("c", "melanoma")], 4: [("melanoma", "d")]})
    assert {c.units for c in iter_chains(g, 2)} == {(1, 2), (2, 1), (2, 3), (3, 2), (3, 4), (4, 3)}
    assert {c.units for c in iter_chains(g, 3)} == {(2, 3, 4), (4, 3, 2)}  # not 1-2-3 (nested bridges)


def test_generic_entities_are_not_bridges():
    # "patient" is in every document: with bridge_max_share 0.5 it bridges nothing.
    g = docs_graph({d: [("patient", f"e{d}")] for d in range(1, 7)} | {7: [("e1", "w")]}, share=0.5)
    assert "patient" not in g.bridges and g.bridges == {"e1"}
    assert {c.units for c in iter_chains(g, 2)} == {(1, 7), (7, 1)}
    with pytest.raises(ValueError, match="bridge_max_share"):
        docs_graph(PATH, share=0.0)


def chunk_graph() -> CorpusGraph:
    """One document cut into 512-token chunks with 100 overlap: chunk i spans [412 i, 412 i + 512)."""
    chunks = [ChunkInfo(i, 1, "book", 412 * i, 412 * i + 512) for i in range(5)]
    triples = [("e", "r", "e2", 0), ("e", "r", "e3", 1),          # e: only in overlapping chunks 0 and 1
               ("f", "r", "f2", 0), ("f", "r", "f3", 2),          # f: chunks 0 and 2, disjoint
               ("g", "r", "g1", 1), ("g", "r", "g2", 1), ("g", "r", "g3", 1),
               ("g", "r", "g4", 0), ("g", "r", "g5", 2),          # g: most triples in chunk 1
               ("h", "r", "h1", 4)]
    return CorpusGraph.build(chunks, triples, "chunk", 1.0)


def test_chunk_walks_never_link_overlapping_chunks():
    g = chunk_graph()
    assert g.overlaps(0, 1) and not g.overlaps(0, 2)
    two = {(c.units, c.bridges) for c in iter_chains(g, 2)}
    assert ((0, 1), ("e",)) not in two and ((1, 0), ("e",)) not in two
    assert ((0, 2), ("f",)) in two and ((1, 2), ("g",)) not in two  # g is in 0, 1, 2 -> g links 0-2 only
    assert all(not g.overlaps(*c.units) for c in iter_chains(g, 2))
    assert choose_walk_unit("auto", 1, 3) == "chunk"
    assert choose_walk_unit("auto", 3, 3) == "document"
    assert choose_walk_unit("auto", 2, 3) == "chunk"
    assert choose_walk_unit("document", 1, 3) == "document"
    with pytest.raises(ValueError, match="walk_unit"):
        choose_walk_unit("paragraph", 3, 3)


def test_chain_chunks_prefer_one_chunk_naming_both_bridges():
    chunks = [ChunkInfo(10, 1, "d1", 0, 10), ChunkInfo(20, 2, "d2", 0, 10), ChunkInfo(21, 2, "d2", 10, 20),
              ChunkInfo(22, 2, "d2", 20, 30), ChunkInfo(30, 3, "d3", 0, 10)]
    triples = [("a", "r", "x", 10), ("x", "r", "b", 20), ("x", "r", "y", 21), ("y", "r", "c", 22), ("y", "r", "d", 30)]
    g = CorpusGraph.build(chunks, triples, "document", 1.0)
    chain = Chain((1, 2, 3), ("x", "y"))
    assert g.chain_chunks(chain) == [[10], [21], [30]]  # chunk 21 names both x and y
    g2 = CorpusGraph.build(chunks, [t for t in triples if t[3] != 21], "document", 1.0)
    assert g2.chain_chunks(chain) == [[10], [20, 22], [30]]
    assert g2.chain_chunks(chain, max_chunks_per_hop=1) == [[10], [20], [30]]
    assert g.document_ids([10, 21, 22, 30]) == ["d1", "d2", "d3"]


def test_ego_graph_sources_are_distinct_and_capped():
    g = chunk_graph()
    assert summary_candidates(g, 2) == ["f", "g"]           # e's two chunks overlap; h has one
    assert max_distinct_sources(g, [0, 1, 2]) == [0, 2]
    src = ego_sources(g, "g", random.Random(0), max_sources=4)
    assert sorted(u for u, _ in src) == [0, 2]               # chunk 1 ranks first but blocks both others
    docs = docs_graph({1: [("h", "a"), ("h", "b")], 2: [("h", "c")], 3: [("h", "d"), ("h", "e"), ("h", "f")],
                       4: [("h", "g")]})
    src = ego_sources(docs, "h", random.Random(0), max_sources=2)
    assert [u for u, _ in src] == [3, 1]                     # most triples about h first
    with pytest.raises(NoCandidate, match="no entity's ego-graph spans 2 distinct") as err:
        sample_summary(docs_graph({1: [("a", "b")], 2: [("c", "d")]}), {"a": 1.0}, random.Random(0))
    assert err.value.reason == "no_entity"


def test_pagerank_matches_networkx_and_sampling_follows_it():
    g = docs_graph({1: [("hub", "a"), ("hub", "b"), ("hub", "c"), ("x", "a")], 2: [("hub", "d"), ("x", "e")],
                    3: [("y", "hub"), ("y", "f")], 4: [("y", "g")]})
    scores = pagerank(g)
    kg = KnowledgeGraph.from_triples(g.triples)
    ref = nx.pagerank(kg.to_networkx(names=True), alpha=0.85, tol=1e-12, max_iter=1000)
    assert scores.keys() == ref.keys()
    assert max(abs(scores[k] - ref[k]) for k in ref) < 1e-9
    eligible = summary_candidates(g, 2)
    assert eligible == ["hub", "x", "y"]
    draws = Counter(sample_summary(g, scores, random.Random(seed), 2, 3).entity for seed in range(3000))
    total = sum(scores[e] for e in eligible)
    assert set(draws) == set(eligible)
    for e in eligible:
        assert abs(draws[e] / 3000 - scores[e] / total) < 0.03, (e, draws)
    pick = sample_summary(g, scores, random.Random(7), 2, 3)
    assert pick == sample_summary(g, scores, random.Random(7), 2, 3)
    assert len(set(pick.units)) == len(pick.units) >= 2 and len(pick.units) <= 3
    assert pick.eligible == 3


def test_units_of_a_type_draw_without_replacement():
    g = docs_graph({1: [("hub", "a"), ("hub", "b"), ("hub", "c"), ("x", "a")], 2: [("hub", "d"), ("x", "e")],
                    3: [("y", "hub"), ("y", "f")], 4: [("y", "g")]})
    scores = pagerank(g)
    eligible = summary_candidates(g, 2)
    # one order per seed: ranks 0..n-1 are the eligible entities, each once; then it cycles
    for order_seed in range(20):
        picks = [sample_summary(g, scores, random.Random(i), 2, 3, rank=i, order_rng=random.Random(order_seed)).entity
                 for i in range(4)]
        assert sorted(picks[:3]) == eligible and picks[3] == picks[0]
    # the order is PageRank-weighted: its first entity is distributed ∝ PageRank
    first = Counter(weighted_order(eligible, [scores[e] for e in eligible], random.Random(s))[0] for s in range(3000))
    total = sum(scores[e] for e in eligible)
    for e in eligible:
        assert abs(first[e] / 3000 - scores[e] / total) < 0.03, (e, first)
    assert weighted_order(["a", "b", "c"], [1.0, 0.0, 2.0], random.Random(0)) in (["a", "c"], ["c", "a"])
    # factual chunks: a seeded shuffle of the chunks, one per unit index
    s = gen.Settings.from_config(cfg_with())
    plans = [gen.plan_unit("factual", gen.unit_seed(0, "c", "factual", i), g, lambda ids: dict.fromkeys(ids, "t"),
                           dict, s, index=i, type_seed=gen.order_seed(0, "c", "factual")) for i in range(5)]
    assert sorted(p.chunk_ids[0] for p in plans[:4]) == [1, 2, 3, 4] and plans[4].chunk_ids == plans[0].chunk_ids
    assert plans[2].meta["rank"] == 2 and plans[2].meta["type_seed"] == gen.order_seed(0, "c", "factual")


def test_reasoning_units_of_a_type_take_distinct_chains_then_say_none_is_left():
    g = docs_graph(PATH)  # four 3-hop chains (see test_chains_exist_exactly_where_expected)
    three = {(c.units, c.bridges) for c in iter_chains(g, 3)}
    s = gen.Settings.from_config(cfg_with())
    texts = lambda ids: {i: f"text {i}" for i in ids}  # noqa: E731
    ts = gen.order_seed(0, "c", "3-hop")
    plans = [gen.plan_unit("3-hop", gen.unit_seed(0, "c", "3-hop", i), g, texts, dict, s, index=i, type_seed=ts)
             for i in range(5)]
    got = [(tuple(sorted(set(p.chunk_ids), key=p.chunk_ids.index)), tuple(p.bridges)) for p in plans[:4]]
    assert set(got) == three and len(set(got)) == 4  # each chain once
    assert plans[4].note[0] == "chains_used" and "all 4 3-hop chains" in plans[4].note[1]
    # the order is the graph's, seeded: the same again, another seed another order
    assert g.chain_order(3, ts) == g.chain_order(3, ts) and g.chain_order(3, ts) is g.chain_order(3, ts)
    orders = {tuple(c.units for c in g.chain_order(3, seed)) for seed in range(30)}
    assert len(orders) > 1
    # hub-weighted: a chain through a bridge that 5 units name comes first ∝ 1/4 against 1/1
    hub = docs_graph({1: [("a", "h")], 2: [("h", "b")], 3: [("h", "c")], 4: [("h", "d")], 5: [("h", "e")],
                      6: [("a2", "n")], 7: [("n", "f")]})
    chains = list(iter_chains(hub, 2))
    first = Counter(hub.chain_order(2, seed)[0].bridges[0] for seed in range(2000))
    w_h, w_n = 20 * 0.25, 2 * 1.0  # 20 directed chains through h (weight 1/4 each), 2 through n
    assert len(chains) == 22 and abs(first["n"] / 2000 - w_n / (w_h + w_n)) < 0.04, first
    # more chains than the budget allows to enumerate: no order, units walk independently
    assert g.chain_order(3, ts, budget=1) is None
    plan = gen.plan_unit("3-hop", 7, g, texts, dict, s, index=0, type_seed=None)
    assert (tuple(dict.fromkeys(plan.chunk_ids)), tuple(plan.bridges)) in three


def test_values_are_no_bridges():
    from ragrouter.querygen.sampling import is_value

    for v in ("1966", "10 January 1960", "June 18, 1870", "1990s", "21st", "500 BC"):
        assert is_value(v), v
    for name in ("Apollo 13", "COVID-19", "Louis XIV", "May", "Henry II", "the 1966 World Cup"):
        assert not is_value(name), name
    g = docs_graph({1: [("a", "1966")], 2: [("1966", "b")], 3: [("c", "apollo 13")], 4: [("apollo 13", "d")]})
    assert g.bridges == {"apollo 13"}


# --------------------------------------------------------------------------- settings, seeds, replies


def cfg_with(**querygen) -> Config:
    data = copy.deepcopy(Config.load(env={}).data)
    data["querygen"].update(querygen)
    return Config(data, source="<test>")


def test_settings_seeds_and_splits():
    s = gen.Settings.from_config(cfg_with(counts={"factual": 2, "reasoning": 5, "summary": 1}))
    assert s.temperature == 0.7 and s.unit_counts() == {"factual": 2, "2-hop": 3, "3-hop": 2, "summary": 1}
    assert gen.split_counts(10, {2: 0.5, 3: 0.5}) == {2: 5, 3: 5}
    assert gen.split_counts(7, {2: 1, 3: 2, 4: 1}) == {2: 2, 3: 3, 4: 2}
    assert sum(gen.split_counts(13, {2: 0.3, 3: 0.7}).values()) == 13
    a = gen.unit_seed(0, "medical", "2-hop", 3)
    assert a == gen.unit_seed(0, "medical", "2-hop", 3) and 0 <= a < 2**31
    assert len({gen.unit_seed(0, "medical", t, i) for t in ("factual", "2-hop") for i in range(50)}) == 100
    assert gen.unit_seed(1, "medical", "2-hop", 3) != a
    assert gen.parse_type("3-hop") == ("reasoning", 3) and gen.parse_type("factual") == ("factual", 1)
    assert gen.external_id("summary", 5, "m") == "gen:summary:5:m"
    with pytest.raises(ValueError, match="unknown query unit type"):
        gen.parse_type("1-hop")
    with pytest.raises(ConfigError, match="querygen.counts"):
        gen.Settings.from_config(cfg_with(counts={"factoid": 1}))
    with pytest.raises(ConfigError, match="querygen.reasoning_hops"):
        gen.Settings.from_config(cfg_with(reasoning_hops={1: 1.0}))
    with pytest.raises(ConfigError, match="querygen.summary_max_sources"):
        gen.Settings.from_config(cfg_with(summary_min_sources=3, summary_max_sources=2))


def plan_of(qtype: str, bridges=()) -> gen.Plan:
    return gen.Plan("2-hop" if qtype == "reasoning" else qtype, qtype, 2 if qtype == "reasoning" else None, 1,
                    bridges=list(bridges), meta={"walk_unit": "document"})


def test_interpret_replies():
    out = gen.interpret(plan_of("factual"), {"question": " What is X? ", "answer": "Y"})
    assert (out.origin, out.status, out.question, out.check) == ("generated", "pending", "What is X?", None)
    assert gen.interpret(plan_of("factual"), {"question": "", "answer": "Y"}) is None
    assert gen.interpret(plan_of("factual"), {"answer": "Y"}) is None
    leak = gen.interpret(plan_of("reasoning", ["Marie Curie", "poland"]),
                         {"question": "Which city is the capital of Poland?", "answer": "Warsaw", "reasoning": ""})
    assert leak.status == "rejected" and leak.check == ("bridge_leak", False, {"bridges": ["Marie Curie", "poland"],
                                                                               "named": ["poland"]})
    ok = gen.interpret(plan_of("reasoning", ["poland"]),
                       {"question": "Which city is the capital of the country polonium is named after?",
                        "answer": "Warsaw", "reasoning": "r"})
    assert ok.status == "pending" and ok.check[:2] == ("bridge_leak", True) and ok.meta["reasoning"] == "r"
    homonym = gen.interpret(plan_of("summary"), {"consistent": False, "reason": "two different Mercury",
                                                 "question": "", "answer": ""})
    assert (homonym.origin, homonym.status) == ("querygen-note", "skipped")
    assert homonym.meta["note"] == "inconsistent" and homonym.meta["detail"] == "two different Mercury"
    summary = gen.interpret(plan_of("summary"),
                            {"consistent": True, "reason": "same", "question": "Q?", "answer": "A."})
    assert summary.status == "pending" and summary.meta["consistency_reason"] == "same"
    assert gen.interpret(plan_of("summary"), {"reason": "?", "question": "Q?", "answer": "A."}) is None


def test_a_question_copied_from_the_instructions_is_unusable():
    plan = plan_of("factual")
    plan.messages = prompts.factual_messages("Basal cells lie in the lower epidermis.")
    echo = ("Name every person, thing and concept explicitly, no pronouns (it, they, this) and no references "
            "such as 'the passage'.")
    assert checks.echoes(echo, prompts.FACTUAL.system)
    assert gen.interpret(plan, {"question": echo, "answer": "Adrenal glands"}) is None
    ok = gen.interpret(plan, {"question": "Which cells lie in the lower part of the epidermis?",
                              "answer": "Basal cells"})
    assert ok is not None and ok.status == "pending"


def test_names_entities_on_word_boundaries():
    assert checks.names_entities("What treats the HEADACHE?", ["headache", "ache", "aspirin"]) == ["headache"]
    assert checks.names_entities("Who studied at the Sorbonne-University?", ["sorbonne university"]) == \
        ["sorbonne university"]


# --------------------------------------------------------------------------- checks


class ScriptedChat:
    """A gateway stand-in: ``chat`` replies by prompt (grounded / closed_book / judge) with a
    callable ``(user text) -> reply``; every call is recorded."""

    def __init__(self, **script):
        self.script = script
        self.calls: list[tuple[str, str]] = []

    def chat(self, role, messages, *, temperature, max_tokens, json_schema=None, stage, phase, sample=0,
             timeout_s=None):
        system, user = messages[0]["content"], messages[-1]["content"]
        purpose = {prompts.GROUNDED.system: "grounded", prompts.GROUNDED_CHAIN.system: "grounded_chain",
                   prompts.CLOSED_BOOK.system: "closed_book", prompts.VERDICT.system: "judge"}[system]
        self.calls.append((purpose, phase))
        entry = self.script.get(purpose, self.script.get("grounded"))
        reply = entry.pop(0) if isinstance(entry, list) else entry
        if isinstance(reply, Exception):
            raise reply
        reply = reply(user) if callable(reply) else reply
        if purpose == "grounded_chain" and isinstance(reply, str):  # the chain reader replies in JSON
            assert json_schema == prompts.GROUNDED_CHAIN_SCHEMA
            reply = {"steps": ["the texts name it"], "answer": reply}
        data = reply if isinstance(reply, dict) else None
        body = json.dumps(reply) if isinstance(reply, dict) else reply
        return ChatResult(text=body, data=data, prompt_tokens=1, completion_tokens=1, cached=False,
                          call_id=len(self.calls), latency_s=0.0)


def exact_judge(user: str) -> dict:
    gold = re.search(r"Gold answer: (.*)\n\nAnswer to grade: ", user).group(1)
    answer = re.search(r"Answer to grade: (.*)\n\nReturn the JSON now\.", user, re.DOTALL).group(1)
    return {"label": "correct" if checks.normalise(gold) == checks.normalise(answer) else "incorrect", "reason": "r"}


def reader(user: str) -> str:
    """Answers 'Warsaw' when the given texts hold both facts, else refuses."""
    return "Warsaw" if "named after poland" in user and "capital warsaw" in user else "I cannot answer"


Q = checks.CheckQuery(1, "reasoning", "Which city is the capital of the country polonium is named after?", "Warsaw",
                      ["polonium is named after poland.", "the capital of poland is warsaw."],
                      ["polonium is named after poland.", "poland has the capital warsaw."])


def test_grounding_passes_only_when_the_texts_give_the_answer():
    ev = checks.Evaluator(ScriptedChat(grounded=lambda u: "Warsaw" if "warsaw" in u else "I cannot answer",
                                       judge=exact_judge))
    res = checks.grounding(ev, Q)
    assert res.passed and res.evidence["label"] == "correct" and len(res.evidence["call_ids"]) == 2
    wrong = checks.grounding(checks.Evaluator(ScriptedChat(grounded=lambda u: "Krakow", judge=exact_judge)), Q)
    assert not wrong.passed and wrong.evidence["label"] == "incorrect"
    chat = ScriptedChat(grounded=lambda u: "I cannot answer", judge=exact_judge)
    refused = checks.grounding(checks.Evaluator(chat), Q)
    assert not refused.passed and refused.evidence["label"] == "incomplete"
    assert [p for p, _ in chat.calls] == ["grounded_chain"]  # a refusal needs no verdict
    # the evidence names the refusal rule that labelled it without a call
    from ragrouter.evaluation import judge as jd

    assert refused.evidence["prompt_version"].endswith(f"+refusal:{jd.PROMPT_VERSION}")
    assert not checks.grounding(checks.Evaluator(chat), checks.CheckQuery(2, "factual", "q", "a", [])).passed


def test_shortcut_detects_a_single_hop_answer():
    chat = ScriptedChat(grounded=reader, judge=exact_judge)
    res = checks.shortcut(checks.Evaluator(chat), Q)
    assert res.passed and res.evidence["shortcut_hop"] is None and len(res.evidence["hops"]) == 2
    assert [p for p, _ in chat.calls] == ["grounded_chain", "grounded_chain"]
    # the second hop's text alone now holds both facts: a shortcut
    q2 = checks.CheckQuery(1, "reasoning", Q.question, "Warsaw", Q.texts,
                           ["polonium is named after poland.", "polonium is named after poland; capital warsaw."])
    chat = ScriptedChat(grounded=reader, judge=exact_judge)
    res = checks.shortcut(checks.Evaluator(chat), q2)
    assert not res.passed and res.evidence["shortcut_hop"] == 2
    assert [p for p, _ in chat.calls] == ["grounded_chain", "grounded_chain", "judge"]
    assert checks.applicable("reasoning") == ["lexical_leak", "grounding", "shortcut", "parametric_leak"]
    assert checks.applicable("factual") == checks.applicable("summary") == ["lexical_leak", "grounding",
                                                                            "parametric_leak"]


def test_an_answer_that_only_names_a_steps_entity_is_asked_once_more():
    """The judge resolved 'the country polonium is named after' to Poland and gave Poland as the
    answer: one follow-up turn (its own reply, then the question) decides the reading's answer."""
    first = {"steps": [{"description": "the country polonium is named after", "is": "Poland"}], "answer": "Poland"}
    seen = []

    def follow_up(user):
        seen.append(user)
        return {"steps": [{"description": "the country polonium is named after", "is": "Poland"}],
                "answer": "Warsaw"}

    chat = ScriptedChat(grounded_chain=[first, follow_up], judge=exact_judge)
    res = checks.grounding(checks.Evaluator(chat), Q)
    assert res.passed and res.evidence["answer"] == "Warsaw" and res.evidence["first_answer"] == "Poland"
    assert chat.calls == [("grounded_chain", "grounding:answer"), ("grounded_chain", "grounding:follow_up"),
                          ("judge", "grounding:verdict")]
    assert "'Poland', is who or what 'the country polonium is named after' is" in seen[0]
    assert len(res.evidence["call_ids"]) == 3
    # a judge that keeps its answer is judged on it (Poland ≠ Warsaw: grounding fails)
    chat = ScriptedChat(grounded_chain=[first, first], judge=exact_judge)
    res = checks.grounding(checks.Evaluator(chat), Q)
    assert not res.passed and res.evidence["answer"] == "Poland"
    # only the judge's own steps trigger it: a refusal, or an answer beyond a step's entity, does not
    assert checks.step_entity("I cannot answer", [{"is": "I cannot answer"}]) is None
    assert checks.step_entity("Warsaw, capital of Poland", [{"description": "d", "is": "Poland"}]) is None
    assert checks.step_entity("poland", [{"description": "d", "is": "the Republic of Poland"}]) == \
        {"description": "d", "is": "the Republic of Poland"}


def test_a_reasoning_query_is_read_with_its_hops_first_and_an_unparseable_reply_asked_again():
    chat = ScriptedChat(grounded_chain=[GatewayError("unparseable_json", "cut reply"),
                                        {"steps": ["polonium is named after poland", "its capital is warsaw"],
                                         "answer": " Warsaw "}],
                        judge=exact_judge)
    res = checks.grounding(checks.Evaluator(chat), Q)
    assert res.passed and res.evidence["answer"] == "Warsaw"
    assert res.evidence["steps"] == [{"step": "polonium is named after poland"}, {"step": "its capital is warsaw"}]
    assert "first_answer" not in res.evidence  # the answer is no step's entity: no follow-up
    assert res.evidence["prompt_version"].startswith(prompts.GROUNDED_CHAIN.version + "+")
    assert chat.calls == [("grounded_chain", "grounding:answer")] * 2 + [("judge", "grounding:verdict")]
    # a factual query keeps the plain reader (a text reply, no steps)
    chat = ScriptedChat(grounded="Warsaw", judge=exact_judge)
    fq = checks.CheckQuery(2, "factual", "What is the capital of Poland?", "Warsaw", Q.texts)
    res = checks.grounding(checks.Evaluator(chat), fq)
    assert res.passed and "steps" not in res.evidence
    assert res.evidence["prompt_version"].startswith(prompts.GROUNDED.version + "+")
    assert [p for p, _ in chat.calls] == ["grounded", "judge"]
    # two unparseable replies in a row: the error is raised (the unit fails and is retried later)
    chat = ScriptedChat(grounded_chain=[GatewayError("unparseable_json", "x")] * 2, judge=exact_judge)
    with pytest.raises(GatewayError):
        checks.grounding(checks.Evaluator(chat, attempts=2), Q)


def test_lexical_leak():
    def q(question, answer):
        return checks.CheckQuery(1, "factual", question, answer, [])

    assert not checks.lexical_leak(None, q("Is Warsaw the capital of Poland?", "Warsaw")).passed
    assert not checks.lexical_leak(None, q("Is warsaw the capital?", "The WARSAW.")).passed
    assert checks.lexical_leak(None, q("What is the capital of Poland?", "Warsaw")).passed
    assert checks.lexical_leak(None, q("Which warsaws are there?", "Warsaw")).passed  # whole words only
    empty = checks.lexical_leak(None, q("What?", "  ."))
    assert not empty.passed and empty.evidence == {"reason": "empty answer"}
    assert checks.run_check("lexical_leak", None, q("Is Warsaw big?", "warsaw")).passed is False
    with pytest.raises(ValueError, match="needs an evaluator"):
        checks.run_check("grounding", None, Q)


def test_parametric_leak():
    knows = ScriptedChat(closed_book=lambda u: "Warsaw", judge=exact_judge)
    res = checks.parametric_leak(checks.Evaluator(knows), Q)
    assert not res.passed and res.evidence["closed_book_answer"] == "Warsaw"
    dunno = ScriptedChat(closed_book=lambda u: "I cannot answer", judge=exact_judge)
    assert checks.parametric_leak(checks.Evaluator(dunno), Q).passed
    assert [p for p, _ in dunno.calls] == ["closed_book"]
    wrong = ScriptedChat(closed_book=lambda u: "Lodz", judge=exact_judge)
    assert checks.parametric_leak(checks.Evaluator(wrong), Q).passed


def test_an_unparseable_verdict_is_asked_again_with_the_next_sample():
    bad = GatewayError("schema_mismatch", "missing required key 'reason' (reply cut at max_tokens)")
    chat = ScriptedChat(closed_book=lambda u: "Warsaw", judge=[bad, exact_judge])
    res = checks.parametric_leak(checks.Evaluator(chat, attempts=2), Q)
    assert not res.passed and [p for p, _ in chat.calls] == ["closed_book", "judge", "judge"]
    chat = ScriptedChat(closed_book=lambda u: "Warsaw", judge=[bad, bad])
    with pytest.raises(GatewayError, match="reply cut"):
        checks.parametric_leak(checks.Evaluator(chat, attempts=2), Q)
    chat = ScriptedChat(closed_book=lambda u: "Warsaw", judge=[GatewayError("timeout", "slow"), exact_judge])
    with pytest.raises(GatewayError, match="slow"):  # transient errors are not retried here (the unit fails)
        checks.parametric_leak(checks.Evaluator(chat, attempts=2), Q)


def test_verdicts_need_a_content_word_in_common():
    assert checks.content_words("The Squamous cells of the skin, 10 of them") == {"squamous", "cell", "skin", "10"}
    always = ScriptedChat(closed_book=lambda u: "Melanocytes.", judge={"reason": "same", "label": "correct"})
    q = checks.CheckQuery(1, "factual", "Which cells make up the epidermis?", "Squamous cells", [])
    res = checks.parametric_leak(checks.Evaluator(always), q)
    assert res.passed and res.evidence["label"] == "incorrect" and res.evidence["call_ids"] == [1]
    assert [p for p, _ in always.calls] == ["closed_book"]  # no judge call: nothing in common
    res = checks.parametric_leak(checks.Evaluator(always, overlap_gate=False), q)
    assert not res.passed and [p for p, _ in always.calls][-1] == "judge"
    related = ScriptedChat(closed_book=lambda u: "Mostly squamous cells.", judge={"reason": "same", "label": "correct"})
    assert not checks.parametric_leak(checks.Evaluator(related), q).passed  # shares words: the judge decides
    assert gen.Settings.from_config(cfg_with(overlap_gate=False)).overlap_gate is False


def test_status_decision():
    req = checks.applicable("reasoning")
    assert checks.decide(req, {}) == "pending"
    assert checks.decide(req, {"lexical_leak": False}) == "pending"  # wait for every check (Algorithm 2)
    assert checks.decide(req, dict.fromkeys(req, True)) == "accepted"
    assert checks.decide(req, {**dict.fromkeys(req, True), "shortcut": False}) == "rejected"


# --------------------------------------------------------------------------- stages end to end

# Four one-chunk documents; "s | r | o" lines are what the fake extractor returns as triples.
# Bridges: polonium (d1-d2), poland (d2-d3), warsaw (d3-d4).
DOCS = {
    "d1": "key-d1 famous\ncurie | discovered | polonium\ncurie | studied at | sorbonne",
    "d2": "key-d2 leaky\npolonium | named after | poland\npolonium | is | radioactive",
    "d3": "key-d3\npoland | has capital | warsaw\npoland | uses | zloty",
    "d4": "key-d4 SHORTCUT\nwarsaw | lies on | vistula\nvistula | flows into | baltic sea",
}
LEAK_BRIDGE = "polonium"  # the fake generator names this bridge in its question
HOMONYM = "warsaw"        # the fake generator calls these sources inconsistent
UNGROUNDED = "poland"     # the fake generator asks for a key no source holds


def _triples(text_: str) -> list[list[str]]:
    return [[p.strip() for p in line.split("|")] for line in text_.splitlines() if line.count("|") == 2]


def _keys(text_: str) -> list[str]:
    return re.findall(r"key-[\w-]+", text_)


def _texts(user: str) -> list[str]:
    return [t for t in re.split(r"(?:^|\n\n)Text \d+:\n", user.split("\n\nBridge entities")[0]
                                .split("\n\nReturn the JSON")[0]) if t.strip() and not t.startswith("Entity:")]


class FakeModel:
    """The scripted model behind the fake endpoint (rules in the comments of DOCS)."""

    def __init__(self):
        self.gold: dict[str, str] = {}

    def __call__(self, req: dict) -> str | dict:
        system, user = req["messages"][0]["content"], req["messages"][-1]["content"]
        if system.startswith(ex.SYSTEM):
            return {"triples": _triples(user)}
        if system.startswith(prompts.FACTUAL.system):
            s, r, o = _triples(user)[0]
            key = _keys(user)[0]
            q = f"Did {s} {r} {o} in {key}?" if "leaky" in user else f"What did {s} {r} in {key}?"
            return {"question": q + (" (famous)" if "famous" in user else ""), "answer": o}
        if system.startswith(prompts.REASONING.system):
            texts = _texts(user)
            bridges = re.findall(r"^- '(.+)' \(links", user, re.MULTILINE)
            answer = _triples(texts[-1])[-1][2]
            keys = _keys(texts[-1]) if "SHORTCUT" in texts[-1] else [k for t in texts for k in _keys(t)]
            q = f"Following {', '.join(keys)}, what comes last?"
            if LEAK_BRIDGE in bridges:
                q += f" Think of {LEAK_BRIDGE}."
            return {"question": q, "answer": answer, "reasoning": "steps"}
        if system.startswith(prompts.SUMMARY.system):
            entity = re.search(r"^Entity: (.+)$", user, re.MULTILINE).group(1)
            if entity == HOMONYM:
                return {"consistent": False, "reason": "two different places", "question": "", "answer": ""}
            keys = [k for t in _texts(user) for k in _keys(t)] + (["key-missing"] if entity == UNGROUNDED else [])
            return {"consistent": True, "reason": "same", "question": f"Summarise {entity} from {', '.join(keys)}.",
                    "answer": f"{entity} overview"}
        if system.startswith(prompts.GROUNDED.system):
            question = re.search(r"\n\nQuestion: (.*)\nAnswer:$", user, re.DOTALL).group(1)
            context = user.split("\n\nQuestion: ")[0]
            return self.gold[question] if all(k in context for k in _keys(question)) else "I cannot answer"
        if system.startswith(prompts.GROUNDED_CHAIN.system):
            question = re.search(r"\n\nQuestion: (.*)\n\nReturn the JSON now\.$", user, re.DOTALL).group(1)
            context = user.split("\n\nQuestion: ")[0]
            answer = self.gold[question] if all(k in context for k in _keys(question)) else "I cannot answer"
            return {"steps": [{"description": "the question", "is": "read in the texts"}], "answer": answer}
        if system.startswith(prompts.CLOSED_BOOK.system):
            question = re.search(r"Question: (.*)\nAnswer:$", user, re.DOTALL).group(1)
            return self.gold[question] if "famous" in question else "I cannot answer"
        if system.startswith(prompts.VERDICT.system):
            return exact_judge(user)
        raise AssertionError(f"unexpected prompt: {system[:80]!r}")


def expected_status(qtype: str, question: str, meta: dict) -> tuple[str, set[str]]:
    """(status, failed checks) the rules of FakeModel imply for a generated query."""
    failed = set()
    if qtype == "factual":
        if "famous" in question:
            failed.add("parametric_leak")
        if question.startswith("Did "):
            failed.add("lexical_leak")
    elif qtype == "reasoning":
        if LEAK_BRIDGE in meta["bridges"]:
            return "rejected", {"bridge_leak"}
        if "key-d4" in question and "key-d3" not in question:
            failed.add("shortcut")
    elif meta["entity"] == UNGROUNDED:
        failed.add("grounding")
    return ("rejected" if failed else "accepted"), failed


def add_toy(engine):
    from ragrouter.ingest import store as ingest_store
    from ragrouter.ingest.records import Dataset, Document

    ds = Dataset(documents=[Document(k, "", v) for k, v in DOCS.items()], questions=[])
    with write_lock(engine), engine.begin() as conn:
        ingest_store.write_dataset(conn, "toy", "test", ds, [])
    return engine


@pytest.fixture
def toy_store(store):
    return add_toy(store)


def fake_config(srv, **querygen) -> Config:
    data = copy.deepcopy(Config.load(env={}).data)
    data["backends"]["fake-gen"] = {"kind": "openai", "base_url": srv.base_url, "model": "fake-model",
                                    "concurrency": 2, "retries": 0, "timeout_s": 10}
    for role in ("extractor", "judge", "query_generator"):
        data["roles"][role] = "fake-gen"
    data["roles"]["generators"] = ["fake-gen"]
    # seed 2: with these counts every path of the protocol occurs (see test_stages_end_to_end)
    data["querygen"]["linking"]["embedding"] = False  # no encoder in these tests (linking: test_querygen_stepwise)
    data["querygen"].update({"seed": 2, "counts": {"factual": 4, "reasoning": 6, "summary": 4}, **querygen})
    return Config(data, source="<test>")


def run(engine, config, *names):
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    stages = registry.all_stages()
    import ragrouter.querygen.stages  # noqa: F401 - registers querygen and validate

    services = Services(config, engine)
    try:
        reports = [run_stage(stages[n], services, Scope(corpus="toy", config=config), progress=False) for n in names]
        stats = services.__dict__["gateway"].stats() if "gateway" in services.__dict__ else {}
    finally:
        services.finish()
    return reports, stats


def rows(engine, sql, **params):
    with write_lock(engine), engine.connect() as conn:
        return conn.execute(text(sql), params).all()


def test_stages_end_to_end(toy_store):
    end_to_end(toy_store)


def test_stages_end_to_end_on_postgres(pg_store):
    """The same on PostgreSQL: units go through leases; statuses settle in the last write or finish."""
    end_to_end(add_toy(pg_store))


def end_to_end(toy_store):
    from tests.fake_openai import FakeOpenAI

    model = FakeModel()
    with FakeOpenAI(responder=model) as srv:
        cfg = fake_config(srv)
        # Before extraction, reasoning and summary units fail (retried later); factual ones run.
        (chunk, qg), _ = run(toy_store, cfg, "chunk", "querygen")
        assert chunk.done == 4 and qg.pending == 14 and (qg.done, qg.failed) == (4, 10)
        assert all("run the extract stage first" in e for e in qg.errors)
        assert rows(toy_store, "SELECT COUNT(*) FROM unit_failures WHERE stage = 'querygen'")[0][0] == 10
        (ext, qg), _ = run(toy_store, cfg, "extract", "querygen")
        assert ext.done == 4 and (qg.pending, qg.done, qg.failed) == (10, 10, 0)
        assert rows(toy_store, "SELECT COUNT(*) FROM unit_failures WHERE stage = 'querygen'")[0][0] == 0

        # one generator call per unit, each its own ledger row: units whose prompts coincide (the
        # same chain walked twice) are separate samples, not one cached reply stored twice
        samples = [json.loads(r[0]) if isinstance(r[0], str) else r[0] for r in rows(
            toy_store, "SELECT params FROM llm_calls WHERE stage = 'querygen'")]
        assert len(samples) == 14 and len({(p["sample"]) for p in samples}) < 14  # indices repeat across types

        gen_rows = rows(toy_store, "SELECT id, origin, qtype, hops, question, answer, status, seed, external_id, "
                                   "meta, supporting_chunk_ids, supporting_doc_ids, generator_model FROM queries "
                                   "ORDER BY id")
        assert len(gen_rows) == 14
        for r in gen_rows:
            model.gold[r[4]] = r[5]
        (val,), _ = run(toy_store, cfg, "validate")
        assert val.failed == 0 and val.done == val.pending > 0
        requests_first = srv.stats()["total"]

        # ---- what was stored
        status = dict(rows(toy_store, "SELECT id, status FROM queries"))
        failed = {}
        for qid, name, model_key, passed, evidence in rows(
                toy_store, "SELECT query_id, check_name, model, passed, evidence FROM query_checks"):
            assert model_key == ("" if name in ("lexical_leak", "bridge_leak") else "fake-model")
            assert isinstance(json.loads(evidence) if isinstance(evidence, str) else evidence, dict)
            if not passed:
                failed.setdefault(qid, set()).add(name)
        outcomes = Counter()
        for (qid, origin, qtype, hops, question, answer, _st, seed, ext_id, meta, chunk_ids, doc_ids,
             gmodel) in gen_rows:
            meta = json.loads(meta) if isinstance(meta, str) else meta
            chunk_ids = json.loads(chunk_ids) if isinstance(chunk_ids, str) else chunk_ids
            assert ext_id == f"gen:{meta['unit_type']}:{seed}:fake-model" and gmodel == "fake-model"
            assert seed == gen.unit_seed(2, "toy", meta["unit_type"], meta["unit_index"])
            if origin == "querygen-note":
                assert (qtype, status[qid], meta["note"], meta["entity"]) == ("summary", "skipped", "inconsistent",
                                                                             HOMONYM)
                assert qid not in failed
                outcomes["note"] += 1
                continue
            assert origin == "generated" and meta["prompt_version"].startswith("qgen-")
            want, want_failed = expected_status(qtype, question, meta)
            assert (status[qid], failed.get(qid, set())) == (want, want_failed), (question, meta)
            outcomes[(qtype, want, tuple(sorted(want_failed)))] += 1
            if qtype == "reasoning":
                assert hops == len(meta["chain_units"]) == len(meta["hop_chunk_ids"]) == len(meta["bridges"]) + 1
                assert len(set(chunk_ids)) == hops and len(json.loads(doc_ids) if isinstance(doc_ids, str)
                                                           else doc_ids) == hops
            if qtype == "summary":
                assert hops is None and len(chunk_ids) >= 2 and meta["entity"] in ("polonium", "poland")
            if qtype == "factual":
                assert hops == 1 and len(chunk_ids) == 1
        # every path of the verify-then-filter protocol was taken
        assert outcomes["note"] >= 1
        for key in [("factual", "accepted", ()), ("factual", "rejected", ("parametric_leak",)),
                    ("factual", "rejected", ("lexical_leak",)), ("reasoning", "accepted", ()),
                    ("reasoning", "rejected", ("bridge_leak",)), ("reasoning", "rejected", ("shortcut",)),
                    ("summary", "accepted", ()), ("summary", "rejected", ("grounding",))]:
            assert outcomes[key] >= 1, (key, outcomes)

        # ---- the paper's Table 6 views read these rows
        validation = {(r[0], r[1]): r[2:] for r in rows(
            toy_store, "SELECT qtype, generated, passed, pending FROM v_query_validation WHERE corpus = 'toy'")}
        n_queries = sum(1 for r in gen_rows if r[1] == "generated")
        n_accepted = sum(1 for s in status.values() if s == "accepted")
        assert validation[("all", n_queries)] == (n_accepted, 0)
        reasons = {(r[0], r[1]): r[2] for r in rows(
            toy_store, "SELECT qtype, check_name, n_failed FROM v_query_rejections WHERE corpus = 'toy'")}
        assert reasons[("all", "bridge_leak")] == outcomes[("reasoning", "rejected", ("bridge_leak",))]
        assert reasons[("all", "shortcut")] == outcomes[("reasoning", "rejected", ("shortcut",))]

        # ---- a second run of both stages asks nothing and changes nothing
        before = rows(toy_store, "SELECT id, status FROM queries ORDER BY id")
        (qg2, val2), stats = run(toy_store, cfg, "querygen", "validate")
        assert (qg2.pending, val2.pending) == (0, 0)
        assert srv.stats()["total"] == requests_first
        assert stats == {} or stats["billed_tokens"] == 0
        assert rows(toy_store, "SELECT id, status FROM queries ORDER BY id") == before

        # ---- counts agree; a new seed means new units (the old rows stay)
        from ragrouter.stages import registry
        from ragrouter.stages.base import Scope

        stages = registry.all_stages()
        with write_lock(toy_store), toy_store.connect() as conn:
            assert stages["querygen"].counts(conn, Scope(corpus="toy", config=cfg)) == (14, 14)
            exp, done = stages["validate"].counts(conn, Scope(corpus="toy", config=cfg))
            assert exp == done == val.done
            assert stages["querygen"].counts(conn, Scope(corpus="toy", config=fake_config(srv, seed=3))) == (14, 0)


@pytest.mark.parametrize("faults,expect", [(["malformed_json"], ("generated", "pending", 1)),
                                           (["malformed_json", "malformed_json"], ("querygen-note", "skipped", None))])
def test_an_unparseable_generation_is_asked_again_then_noted(toy_store, faults, expect):
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(responder=FakeModel(), fault_plan=faults) as srv:
        cfg = fake_config(srv, counts={"factual": 1, "reasoning": 0, "summary": 0}, attempts=2)
        (_, qg), _ = run(toy_store, cfg, "chunk", "querygen")
        assert (qg.done, qg.failed) == (1, 0) and srv.stats()["total"] == 2
    ((origin, status, meta),) = rows(toy_store, "SELECT origin, status, meta FROM queries")
    meta = json.loads(meta) if isinstance(meta, str) else meta
    assert (origin, status, meta.get("attempt")) == expect
    if origin == "querygen-note":
        assert meta["note"] == "invalid_reply"
        assert meta["detail"] == "2 unusable replies: schema_mismatch; schema_mismatch"


def test_dry_run_estimates_generation_calls(toy_store):
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import dry_run
    from ragrouter.stages.services import Services
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(responder=FakeModel()) as srv:
        cfg = fake_config(srv, counts={"factual": 3, "reasoning": 2, "summary": 0})
        run(toy_store, cfg, "chunk", "extract")
        before = srv.stats()["total"]
        import ragrouter.querygen.stages  # noqa: F401

        services = Services(cfg, toy_store)
        try:
            (est,) = dry_run([registry.all_stages()["querygen"]], services, Scope(corpus="toy", config=cfg))
        finally:
            services.finish()
        assert (est.stage, est.model, est.calls, est.cached_calls) == ("querygen", "fake-model", 5, 0)
        assert est.prompt_tokens > 0 and est.completion_cap == 5 * 600
        assert srv.stats()["total"] == before  # a dry run sends nothing


def test_a_pass_with_another_seed_is_its_own_table6_row(toy_store):
    """querygen.seed draws another set of units (and chain order): Table 6 gives each pass its
    own rows, keyed by the seed, so a second pass's rates are not merged with the first's; the
    per-pass counts add up to what v_generated_query holds."""
    from tests.fake_openai import FakeOpenAI

    model = FakeModel()
    with FakeOpenAI(responder=model) as srv:
        run(toy_store, fake_config(srv), "chunk", "extract")
        for seed in (2, 5):
            cfg = fake_config(srv, seed=seed)
            run(toy_store, cfg, "querygen")
            for question, answer in rows(toy_store, "SELECT question, answer FROM queries"):
                model.gold[question] = answer
            (val,), _ = run(toy_store, cfg, "validate")
            assert val.failed == 0
    seeds = dict(rows(toy_store, "SELECT meta ->> 'querygen_seed', COUNT(*) FROM queries "
                                 "WHERE origin IN ('generated', 'querygen-note') GROUP BY 1"))
    assert seeds == {"2": 14, "5": 14}  # 4 factual + 6 reasoning + 4 summary units each
    table6 = {r[0]: r[1:] for r in rows(toy_store, "SELECT querygen_seed, generated, passed, pending, skipped "
                                                   "FROM v_query_validation WHERE corpus = 'toy' AND qtype = 'all'")}
    assert set(table6) == {"2", "5"}
    for seed, (generated, passed, pending, skipped) in table6.items():
        assert generated + pending + skipped == 14 and 0 <= passed <= generated
        per_status = dict(rows(toy_store, "SELECT status, COUNT(DISTINCT query_id) FROM v_generated_query "
                                          "WHERE querygen_seed = :s GROUP BY status", s=seed))
        assert per_status.get("accepted", 0) == passed and per_status.get("skipped", 0) == skipped


def test_a_second_judge_revalidates_into_its_own_rows(toy_store):
    """Validating again with another judge (roles.judge) runs its LLM checks on the queries
    the first judge settled, keyed by its model: one v_query_validation row per judge; the
    stored status stays the first decision, and a re-run sends nothing."""
    from tests.fake_openai import FakeOpenAI

    model = FakeModel()
    with FakeOpenAI(responder=model) as srv:
        cfg = fake_config(srv)
        run(toy_store, cfg, "chunk", "extract", "querygen")
        for question, answer in rows(toy_store, "SELECT question, answer FROM queries"):
            model.gold[question] = answer
        (val,), _ = run(toy_store, cfg, "validate")
        assert val.failed == 0 and val.done > 0
        status = rows(toy_store, "SELECT id, status FROM queries ORDER BY id")
        llm_checks = rows(toy_store, "SELECT query_id, check_name FROM query_checks WHERE model = 'fake-model' "
                                     "ORDER BY 1, 2")
        n_first = srv.stats()["total"]

        data = copy.deepcopy(cfg.data)
        data["backends"]["fake-judge2"] = {**data["backends"]["fake-gen"], "model": "fake-model-2"}
        data["roles"]["judge"] = "fake-judge2"
        cfg2 = Config(data, source="<test>")
        (val2,), _ = run(toy_store, cfg2, "validate")
        assert val2.failed == 0 and val2.done == val2.pending == len(llm_checks) > 0
        assert srv.stats()["total"] > n_first
        # the second judge's rows: the same (query, LLM check) pairs, under its model
        assert rows(toy_store, "SELECT query_id, check_name FROM query_checks WHERE model = 'fake-model-2' "
                               "ORDER BY 1, 2") == llm_checks
        assert rows(toy_store, "SELECT id, status FROM queries ORDER BY id") == status
        table6 = {r[0]: r[1:] for r in rows(toy_store, "SELECT judge, generated, passed, pending FROM "
                                                       "v_query_validation WHERE corpus = 'toy' AND qtype = 'all'")}
        assert set(table6) == {"fake-model", "fake-model-2"}
        assert table6["fake-model"][0] == table6["fake-model-2"][0] > 0 and table6["fake-model-2"][2] == 0

        # a re-run with either judge sends nothing
        n_second = srv.stats()["total"]
        (again2,), _ = run(toy_store, cfg2, "validate")
        (again1,), _ = run(toy_store, cfg, "validate")
        assert (again2.pending, again1.pending) == (0, 0) and srv.stats()["total"] == n_second
        with write_lock(toy_store), toy_store.connect() as conn:
            from ragrouter.stages import registry
            from ragrouter.stages.base import Scope

            exp, done = registry.all_stages()["validate"].counts(conn, Scope(corpus="toy", config=cfg2))
            assert exp == done > 0


@pytest.mark.parametrize("kind,mode", [("duckdb", None), ("postgresql", "sync"), ("postgresql", "async")])
def test_a_unit_two_workers_generate_at_once_is_paid_once(kind, mode, request):
    """Two workers generate the same unit at the same moment (a lease that expired under a slow
    reply, retaken by another worker): the generator's request is identical, so the slow
    endpoint sees it once, the ledger holds one paid row and the other worker's call is a cache
    hit — on DuckDB (two threads of one process) and on PostgreSQL (two engines, as two
    processes are), in either ledger mode."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import create_engine

    from ragrouter.querygen.stages import QueryGenStage
    from ragrouter.stages.base import Scope
    from ragrouter.stages.services import Services
    from tests.fake_openai import FakeOpenAI

    if kind == "postgresql":
        url = request.getfixturevalue("pg_url")
        from tests.conftest import _migrated

        made = _migrated(url)
        engine = next(made)
        request.addfinalizer(lambda: next(made, None))
        engines = [create_engine(url, future=True) for _ in range(2)]
        for e in engines:
            request.addfinalizer(e.dispose)
    else:
        engine = request.getfixturevalue("store")
        engines = [engine, engine]
    add_toy(engine)
    with FakeOpenAI(responder=FakeModel(), latency_s=0.5) as srv:
        cfg = fake_config(srv, counts={"factual": 1, "reasoning": 0, "summary": 0})
        if mode:
            cfg.data["gateway"]["ledger_commit"] = mode
        run(engine, cfg, "chunk")
        stage = QueryGenStage()
        with write_lock(engine), engine.connect() as conn:
            (unit,) = stage.pending(conn, Scope(corpus="toy", config=cfg))
        workers = [Services(cfg, e) for e in engines]
        start = threading.Barrier(2)

        def generate(services):
            start.wait()
            return stage.compute(unit, services)

        try:
            with ThreadPoolExecutor(2) as pool:
                results = list(pool.map(generate, workers))
            stats = [services.gateway.stats() for services in workers]
        finally:
            for services in workers:
                services.finish()
        sent = srv.stats()["by_path"].get("/v1/chat/completions", 0)
    ledger = rows(engine, "SELECT id FROM llm_calls WHERE stage = 'querygen'")
    assert sent == 1
    assert len(ledger) == 1
    assert [out.meta["call_ids"] for _plan, out in results] == [[ledger[0][0]]] * 2
    assert [out.question for _plan, out in results][0] == [out.question for _plan, out in results][1]
    assert sum(s["http_requests"] for s in stats) == 1 and sum(s["cache_hits"] for s in stats) == 1
