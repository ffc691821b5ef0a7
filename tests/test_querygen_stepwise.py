"""Issue #19: stepwise reverse substitution, entity linking for bridges, and skipped units.

Each mechanical check of the stepwise procedure on constructed chains (a description that
names its bridge, an answer leaking into the question, a shortcut: a description that does
not reach back to the previous bridge), the substitution order, the procedure with a scripted
chat, entity linking on constructed names (normalised, alias, embedding with a threshold,
evidence of the weakest link), mixed walk units, and the stages end to end against the fake
endpoint: stepwise candidates beside one-prompt ones on the same chains, skipped units with
their reasons in ``status`` and ``v_query_validation``, and a re-run that sends nothing."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from sqlalchemy import text

from ragrouter.config import Config, ConfigError
from ragrouter.graph import extract as ex
from ragrouter.db.engine import write_lock
from ragrouter.llm.backends import GatewayError
from ragrouter.llm.gateway import ChatResult
from ragrouter.querygen import checks, prompts, stepchecks, stepwise
from ragrouter.querygen import generate as gen
from ragrouter.querygen.linking import key, link_names, markers, markers_agree
from ragrouter.querygen.sampling import ChunkInfo, CorpusGraph, choose_walk_unit, iter_chains

# --------------------------------------------------------------------------- mechanical checks

D1 = "Alice Moreau directed the film Night Train in Lyon."
D2 = "Night Train stars the violinist Bob Stone. Night Train was released in 1990."
D3 = "Bob Stone married Carol White in Vienna."


def test_step_question_checks():
    forms = ["bob stone"]
    assert stepchecks.check_question("Whom did Bob Stone marry?", "Carol White", forms, D3) == []
    # the answer leaks into the question
    assert "answer_in_question" in stepchecks.check_question("Did Bob Stone marry Carol White?", "Carol White",
                                                           forms, D3)
    # the bridge is not named (step (c) would have nothing to substitute)
    assert "question_does_not_name_bridge" in stepchecks.check_question("Whom did he marry?", "Carol White",
                                                                      forms, D3)
    # the answer is the bridge itself, or not in the text
    assert "answer_is_bridge" in stepchecks.check_question("Who married in Vienna, Bob Stone?", "Stone", forms, D3)
    assert "answer_not_in_text" in stepchecks.check_question("Whom did Bob Stone marry?", "Diana Ross", forms, D3)
    assert stepchecks.check_question("", "x", forms, D3) == ["empty"]


def test_step_description_checks():
    forms = ["bob stone"]
    ok = "the violinist starring in Night Train"
    assert stepchecks.check_description(ok, forms, D2, "Carol White", previous_forms=["night train"]) == []
    # a description that names its bridge: wholly, or by more than half of its words
    assert "names_bridge" in stepchecks.check_description("the violinist Bob Stone", forms, D2, "Carol White")
    assert "names_bridge" in stepchecks.check_description("the violinist Stone of Night Train", ["bob stone", "stone"],
                                                        D2, "Carol White")
    # "bob" is half of "bob stone": not more than half, so no leak by words alone
    assert "names_bridge" not in stepchecks.check_description("a violinist called Bob in Night Train", forms, D2, "x")
    # drawn from another document than its own (the words are D3's)
    assert "not_from_its_document" in stepchecks.check_description("the husband of Carol White from Vienna", forms,
                                                                 D2, "1990")
    assert stepchecks.drawn_share("the husband of Carol White from Vienna", D2) == 0.0
    # the answer inside the description
    assert "contains_answer" in stepchecks.check_description("the violinist of the 1990 Night Train", forms, D2,
                                                           "1990")
    # a shortcut: the description of the second bridge does not reach back to the first one,
    # so the first hop would not be needed
    assert "does_not_link_previous_bridge" in stepchecks.check_description(
        "the violinist released in 1990", forms, D2, "Carol White", previous_forms=["night train"])


def test_a_description_must_relate_its_bridge_to_something_its_text_names():
    """'the Croatian film director' fits many people: a description names another end of its
    hop's triples (not a class or role end, not the bridge), or for i ≥ 1 the previous bridge."""
    bio = ("Bob Stone is a Croatian film director. Bob Stone directed Night Train. Bob Stone was born in 1950. "
           "He married at the age of 19 and was the younger brother of a previous king.")
    facts = [("Bob Stone", "is a", "Croatian film director", "bob stone", "croatian film director"),
             ("Bob Stone", "married", "at the age of 19", "bob stone", "at the age of 19"),
             ("Bob Stone", "was the younger brother of", "a previous king", "bob stone", "a previous king"),
             ("Bob Stone", "is director", "screenwriter", "bob stone", "screenwriter"),
             ("Bob Stone", "directed", "Night Train", "bob stone", "night train"),
             ("Bob Stone", "was born in", "1950", "bob stone", "1950")]
    chain = stepwise.StepChain([bio, D3], ["bob stone"], [["bob stone", "stone"]], [facts, []])
    related = stepwise.related_names(chain, 0)
    # neither the class, the role, the bridge, nor an end that names nobody ("at the age of 19")
    assert related == ["Night Train", "1950"]
    assert "no_relation" in stepchecks.check_description("the one who married at the age of 19", ["bob stone"],
                                                         bio, "x", related=related)
    assert stepwise.identifying("squamous cells") and not stepwise.identifying("his first film")
    assert "no_relation" in stepchecks.check_description("the Croatian film director", ["bob stone"], bio, "x",
                                                       related=related)
    assert stepchecks.check_description("the director of the film Night Train", ["bob stone"], bio, "x",
                                      related=related) == []
    assert stepchecks.check_description("the film director born in 1950", ["bob stone"], bio, "x",
                                      related=related) == []
    # a shortcut by construction: the next hop's text writes every related name the description uses
    page = "Bob Stone directed Night Train and married Carol White in Vienna."
    assert "resolvable_later" in stepchecks.check_description(
        "the director of the film Night Train", ["bob stone"], bio, "x", related=related, later_texts=[page])
    assert stepchecks.check_description("the director born in 1950 of Night Train", ["bob stone"], bio, "x",
                                      related=related, later_texts=[page]) == []  # 1950 is not in that page
    # a hop without triples has nothing to check against; for i ≥ 1 the previous bridge counts
    assert stepwise.related_names(chain, 0) and stepwise.related_names(
        stepwise.StepChain([bio, D3], ["bob stone"], [["bob stone"]], [[], []]), 0) == []
    three = stepwise.StepChain([D1, D2, D3], ["night train", "bob stone"], [["night train"], ["bob stone"]],
                               [[], [("Night Train", "stars", "Bob Stone", "night train", "bob stone")], []])
    assert stepwise.related_names(three, 1) == ["night train"]
    # the previous bridge is described, not named, in the final question: a later text writing it is no shortcut
    assert stepchecks.check_description("the violinist starring in Night Train", ["bob stone"], D2, "Carol White",
                                      previous_forms=["night train"], related=["night train"],
                                      later_texts=["Bob Stone starred in Night Train."]) == []


def test_substitution_is_outermost_last_and_checked():
    q = "Whom did Bob Stone marry?"
    forms = [["night train", "the night train"], ["bob stone"]]
    descs = ["the film that Alice Moreau directed", "the violinist starring in Night Train"]
    out, counts = stepchecks.substitute(q, forms, descs)
    # bob stone first (its description names Night Train), then Night Train (the outermost)
    assert out == "Whom did the violinist starring in the film that Alice Moreau directed marry?"
    assert counts == [1, 1]
    assert stepchecks.check_substituted(out, forms, "Carol White") == []
    # substituting the outermost first would leave the inner bridge's name behind
    wrong, _ = stepchecks.replace_mentions(q, forms[0], descs[0])
    wrong, _ = stepchecks.replace_mentions(wrong, forms[1], descs[1])
    assert stepchecks.check_substituted(wrong, forms, "Carol White") == ["bridge_named"]
    # a preceding article is absorbed; a description without one keeps it
    assert stepchecks.replace_mentions("Who starred in The Night Train?", ["night train"], "the 1990 film")[0] == \
        "Who starred in the 1990 film?"
    assert stepchecks.replace_mentions("Who starred in the Night-Train?", ["night train"], "1990 film")[0] == \
        "Who starred in the 1990 film?"
    # the rewrite must keep every description
    assert stepchecks.check_rewrite("Whom did the violinist marry?", forms, "Carol White", descs) == \
        ["description_dropped"]
    assert stepchecks.check_rewrite(out.replace("Whom did", "Who did"), forms, "Carol White", descs) == []
    assert stepchecks.check_rewrite("Did Bob Stone marry Carol White?", forms, "Carol White", descs)[:2] == \
        ["bridge_named", "answer_in_question"]


class StepChat:
    """A scripted chat: replies per phase (a list is consumed in order, one per attempt)."""

    def __init__(self, replies: dict[str, list]):
        self.replies = {k: list(v) for k, v in replies.items()}
        self.calls: list[tuple[str, int]] = []

    def __call__(self, phase, messages, schema, attempt):
        self.calls.append((phase, attempt))
        reply = self.replies[phase].pop(0)
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(text=json.dumps(reply), data=reply, prompt_tokens=0, completion_tokens=0, cached=False,
                          call_id=len(self.calls), latency_s=0.0)


CHAIN = stepwise.StepChain([D1, D2, D3], ["night train", "bob stone"], [["night train"], ["bob stone"]])


def test_stepwise_run_accepts_a_clean_chain():
    chat = StepChat({
        "stepwise:question": [{"question": "Whom did Bob Stone marry?", "answer": "Carol White"}],
        "stepwise:describe": [{"description": "the violinist starring in Night Train"},
                              {"description": "the film that Alice Moreau directed"}],
        "stepwise:rewrite": [{"question": "Who did the violinist starring in the film that Alice Moreau "
                                          "directed marry?"}],
    })
    out = stepwise.run(CHAIN, chat, attempts=2)
    assert out.status == "pending" and out.note is None
    assert out.question == "Who did the violinist starring in the film that Alice Moreau directed marry?"
    assert out.answer == "Carol White"
    assert out.meta["descriptions"] == ["the film that Alice Moreau directed", "the violinist starring in Night Train"]
    assert out.meta["substituted_question"] == "Whom did the violinist starring in the film that Alice Moreau " \
                                               "directed marry?"
    assert [(c[0], c[1]) for c in out.checks] == [("step_question", True), ("step_description", True),
                                                  ("bridge_leak", True)]
    # the last bridge is described first (from the text before it), then the outermost one
    assert chat.calls == [("stepwise:question", 0), ("stepwise:describe", 0), ("stepwise:describe", 0),
                          ("stepwise:rewrite", 0)]
    assert out.meta["rewrite"] == "rewritten" and out.call_ids == [1, 2, 3, 4]


def test_stepwise_run_rejects_what_fails_its_step():
    # (a) the answer leaks into the question twice: rejected at step_question
    chat = StepChat({"stepwise:question": [{"question": "Did Bob Stone marry Carol White?", "answer": "Carol White"}] * 2})
    out = stepwise.run(CHAIN, chat, attempts=2)
    assert out.status == "rejected" and out.checks[-1][0] == "step_question" and not out.checks[-1][1]
    assert [t["failed"] for t in out.checks[-1][2]["tries"]] == [["answer_in_question"]] * 2
    # (b) the description names its bridge, then a second try that does not reach back to the
    # first bridge (a shortcut): rejected at step_description, no further step asked
    chat = StepChat({
        "stepwise:question": [{"question": "Whom did Bob Stone marry?", "answer": "Carol White"}],
        "stepwise:describe": [{"description": "the violinist Bob Stone"},
                              {"description": "the violinist released in 1990"}],
    })
    out = stepwise.run(CHAIN, chat, attempts=2)
    assert out.status == "rejected" and out.checks[-1][0] == "step_description"
    assert [t["failed"] for t in out.checks[-1][2]["tries"]] == [["names_bridge", "does_not_link_previous_bridge"],
                                                                    ["does_not_link_previous_bridge"]]
    assert out.checks[-1][2]["bridge"] == "bob stone" and len(chat.calls) == 3
    # a failed rewrite keeps the substituted question
    chat = StepChat({
        "stepwise:question": [{"question": "Whom did Bob Stone marry?", "answer": "Carol White"}],
        "stepwise:describe": [{"description": "the violinist starring in Night Train"},
                              {"description": "the film that Alice Moreau directed"}],
        "stepwise:rewrite": [{"question": "Whom did Bob Stone marry?"}, {"question": "Who married?"}],
    })
    out = stepwise.run(CHAIN, chat, attempts=2)
    assert out.status == "pending" and out.meta["rewrite"] == "kept_substitution"
    assert out.question == out.meta["substituted_question"]
    # replies that never parse: a note
    bad = GatewayError("unparseable_json", "x")
    out = stepwise.run(CHAIN, StepChat({"stepwise:question": [bad, bad]}), attempts=2)
    assert out.status == "note" and out.note[0] == "invalid_reply"
    with pytest.raises(ValueError, match="k-1 bridges"):
        stepwise.run(stepwise.StepChain([D1, D2], [], []), StepChat({}))


FACTS = [
    [("Alice Moreau", "directed", "Night Train", "alice moreau", "night train"),
     ("Alice Moreau", "born in", "Lyon", "alice moreau", "lyon")],
    [("Night Train", "stars", "Bob Stone", "night train", "bob stone"),
     ("Night Train", "released in", "1990", "night train", "1990")],
    [("bob stone", "married", "carol white", "bob stone", "carol white"),
     ("Bob Stone", "plays", "Stone guitar", "bob stone", "stone guitar"),   # names the bridge: no target
     ("Bob Stone", "lives in", "Paris", "bob stone", "paris"),              # not in the text: no target
     ("Bob Stone", "married", "Carol White", "bob stone", "carol white")],  # the same answer once
]
FACT_CHAIN = stepwise.StepChain([D1, D2, D3], ["night train", "bob stone"], [["night train"], ["bob stone"]], FACTS)


def test_answers_and_descriptions_are_anchored_on_extracted_facts():
    # the answer as the text writes it (case), from the last hop's triples about the last bridge
    assert stepwise.answer_targets(FACT_CHAIN) == [("Carol White", "bob stone | married | carol white")]
    assert stepwise.as_written("Who starred in the Night-Train?", "night train") == "Night-Train"
    assert stepwise.as_written(D3, "paris") is None
    # hints for bridge 2 (bob stone, from text 2): the one linking the previous bridge first;
    # for bridge 1 (night train, from text 1): the bridge written X; none holds the answer
    assert stepwise.description_facts(FACT_CHAIN, 1, "Carol White") == ["Night Train | stars | X"]
    assert stepwise.description_facts(FACT_CHAIN, 0, "Carol White") == ["Alice Moreau | directed | X"]
    assert stepwise.description_facts(FACT_CHAIN, 0, "Alice Moreau") == []
    # without facts the model picks the answer (the free prompt); a dry run sizes what is sent
    assert stepwise.answer_targets(CHAIN) == []
    # the triple's question passes step (a)'s check: no call for it; (b) twice, (d) once
    first = stepwise.first_requests(FACT_CHAIN)
    assert [m[0]["content"] for m in first] == [prompts.STEP_DESCRIBE.system] * 2 + [prompts.STEP_REWRITE.system]
    assert "Night Train | stars | X" in first[1][1]["content"]
    other = stepwise.StepChain([D1, D2, D3], ["night train", "bob stone"], [["night train"], ["robert stone"]], FACTS)
    first = stepwise.first_requests(other)  # its template fails: the anchored prompt is asked
    assert first[0][0]["content"] == prompts.STEP_ANCHORED.system and "Carol White" in first[0][1]["content"]
    assert len(first) == 4
    assert stepwise.first_requests(CHAIN)[0][0]["content"] == prompts.STEP_QUESTION.system


def test_templates_start_from_the_triple_and_fall_back_to_the_model():
    # (a) the triple itself is the question (no call); (d) makes it fluent
    assert stepwise.template_question(D3, FACTS[2][0], "bob stone") == "Bob Stone married what?"
    # an answer that holds a year is asked with "when"
    assert stepwise.template_question("Roger Miller (born 1936) was a singer.",
                                      ("Roger Miller", "was born", "1936", "roger miller", "1936"),
                                      "roger miller") == "Roger Miller was born when?"
    assert stepwise.dated("on June 18, 1870") and not stepwise.dated("Berlin") and not stepwise.dated("12 films")
    assert not stepwise.dated("Boeing 747") and not stepwise.dated("1,500 soldiers") and stepwise.dated("1990s")
    assert stepwise.template_question("Joseph W. Smiley (born on June 18, 1870)", (
        "Joseph W. Smiley", "was born on", "June 18, 1870", "joseph w. smiley", "june 18, 1870"),
        "joseph w. smiley") == "Joseph W. Smiley was born when?"
    # a passive relation with its agent is asked actively: the judge read "What is directed by X?" as
    # "who directed"
    assert stepwise.template_question("Alvin Purple is directed by Tim Burstall.", (
        "Alvin Purple", "is directed by", "Tim Burstall", "alvin purple", "tim burstall"),
        "tim burstall") == "Tim Burstall directed what?"
    assert stepwise.template_question("Finguine was succeeded by Cathal.", (
        "Finguine", "was succeeded by", "Cathal", "finguine", "cathal"), "cathal") == "Cathal succeeded what?"
    # an answer that starts with a preposition: the preposition goes to the question
    text_ = "Hans J. Salter was born in Lviv and scored Thunder on the Hill."
    chain = stepwise.StepChain([D1, text_], ["hans j. salter"], [["hans j. salter"]],
                               [[], [("Hans J. Salter", "was born", "in Lviv", "hans j. salter", "in lviv")]])
    assert stepwise.answer_targets(chain) == [("Lviv", "Hans J. Salter | was born in | Lviv")]
    assert stepwise.template_target(chain)[2] == "Hans J. Salter was born in what?"
    assert stepwise.template_question(D1, FACTS[0][0], "night train") == "What directed Night Train?"
    assert stepwise.template_description(D2, FACTS[1][0], "bob stone") == "the one Night Train stars"
    assert stepwise.template_description(D2, FACTS[1][1], "night train") == "the one who released in 1990"
    chat = StepChat({
        "stepwise:describe": [{"description": "the violinist starring in Night Train"},
                              {"description": "the film that Alice Moreau directed"}],
        "stepwise:rewrite": [{"question": "Whom did the violinist starring in the film that Alice Moreau "
                                          "directed marry?"}],
    })
    out = stepwise.run(FACT_CHAIN, chat, attempts=2)
    assert out.status == "pending" and out.answer == "Carol White" and out.meta["answer_targets"] == 1
    assert out.meta["single_hop_question"] == "Bob Stone married what?" and out.meta["templates"] == ["question"]
    assert [p for p, _ in chat.calls] == ["stepwise:describe", "stepwise:describe", "stepwise:rewrite"]
    assert out.meta["steps"][0]["tries"] == [{"template": "Bob Stone married what?", "answer": "Carol White",
                                              "fact": "bob stone | married | carol white", "failed": []}]
    # (b) every reply names its bridge: the hop's triple about it becomes the phrase, and it
    # still reaches back to the previous bridge (Night Train)
    chat = StepChat({
        "stepwise:describe": [{"description": "the violinist Bob Stone"}, {"description": "Bob Stone"},
                              {"description": "the film that Alice Moreau directed"}],
        "stepwise:rewrite": [{"question": "x"}] * 2,
    })
    out = stepwise.run(FACT_CHAIN, chat, attempts=2)
    assert out.status == "pending" and out.meta["templates"] == ["question", "description:2"]
    assert out.meta["descriptions"] == ["the film that Alice Moreau directed", "the one Night Train stars"]
    assert out.question == "the one the film that Alice Moreau directed stars married what?"
    # a template that fails its check (the bridge's forms do not cover the triple's name) goes
    # to the model: the anchored prompt, with the target answer kept
    other = stepwise.StepChain([D1, D2, D3], ["night train", "bob stone"], [["night train"], ["robert stone"]], FACTS)
    chat = StepChat({"stepwise:question": [{"question": "Whom did Robert Stone marry?"}],
                     "stepwise:describe": [{"description": "the violinist starring in Night Train"},
                                           {"description": "the film that Alice Moreau directed"}],
                     "stepwise:rewrite": [{"question": "x"}] * 2})
    out = stepwise.run(other, chat, attempts=2)
    assert out.answer == "Carol White" and out.meta["single_hop_question"] == "Whom did Robert Stone marry?"
    assert chat.calls[0] == ("stepwise:question", 0) and out.meta["templates"] == []


def test_a_cast_member_is_described_through_the_film_and_loops_are_no_targets():
    """Hop 2 is the film's page: no triple links the director to the previous bridge (a cast
    member) directly, but one links the film to each; the two make the description."""
    film = "Brother Rat is a 1938 film directed by William Keighley. It stars Priscilla Lane and Wayne Morris."
    facts = [("Brother Rat", "stars", "Priscilla Lane", "brother rat", "priscilla lane"),
             ("Brother Rat", "directed by", "William Keighley", "brother rat", "william keighley"),
             ("Brother Rat", "is a", "film", "brother rat", "film")]
    lane = "Priscilla Lane was an American actress. She starred in Four Daughters."
    keighley = "William Keighley was born in Philadelphia. He worked for Warner Bros."
    chain = stepwise.StepChain([lane, film, keighley], ["priscilla lane", "william keighley"],
                               [["priscilla lane"], ["william keighley"]], [[], facts, []])
    assert stepwise.chained_descriptions(chain, 1) == ["the one who directed the one who stars Priscilla Lane"]
    assert stepwise.chained_descriptions(chain, 0) == []
    assert stepwise.chained_descriptions(chain, 1, answer="Priscilla Lane") == []  # none holds the answer
    # a passive relation without its auxiliary is asked and described actively too
    assert stepwise.active_verb("directed by") == "directed" and stepwise.active_verb("is written by") == "written"
    assert stepwise.active_verb("stars") is None and stepwise.active_verb("stands by") is None
    assert stepwise.template_question(film, facts[1], "william keighley") == "William Keighley directed what?"
    assert stepwise.template_description(film, facts[1], "william keighley") == "the one who directed Brother Rat"
    # names the extractor missed count as relations; a sentence's first word is no name
    assert stepchecks.proper_names("The Croatian director is the older brother of James Cagney and Bob.") == [
        "James Cagney"]
    assert stepchecks.proper_names("He sat in the House of Lords.") == ["House of Lords"]
    # a target the first text already writes loops back: "What stars Priscilla Lane?" → Brother Rat
    loop = stepwise.StepChain([film, lane.replace("Four Daughters", "Brother Rat")], ["priscilla lane"],
                              [["priscilla lane"]],
                              [[], [("Priscilla Lane", "starred in", "Brother Rat", "priscilla lane", "brother rat")]])
    assert stepwise.answer_targets(loop) == []
    assert "answer_in_earlier_hop" in stepchecks.check_question("Priscilla Lane starred in what?", "Brother Rat",
                                                              ["priscilla lane"], loop.hop_texts[-1], [film])


# --------------------------------------------------------------------------- entity linking


def test_names_equal_after_normalisation_are_linked():
    assert key("The Night-Train.") == key("night train") == "night train"
    assert key("rivers") == "river" and key("Ermengarde of Tours") == key("ermengarde of tours.")
    ln = link_names(["the night train", "night train.", "bob stone", "river thames", "river thame"])
    assert ln.canonical("the night train") == ln.canonical("night train.")
    assert ln.canonical("bob stone") == "bob stone" and ln.canonical("river thames") == ln.canonical("river thame")
    assert ln.evidence("the night train", "night train.")["how"] == "normalised"
    assert ln.evidence("bob stone", "night train.")["how"] == "unlinked"


def test_alias_triples_link_names():
    triples = [("bob stone", "also known as", "the fiddler"), ("bob stone", "married", "carol white")]
    ln = link_names(["bob stone", "the fiddler", "carol white"], triples)
    assert ln.canonical("the fiddler") == ln.canonical("bob stone") != ln.canonical("carol white")
    ev = ln.evidence("the fiddler", "bob stone")
    assert ev["how"] == "alias" and ev["similarity"] is None and ev["path"][0]["how"] == "alias"


def test_embedding_links_use_the_threshold_and_report_the_weakest_link():
    vec = {"lothair ii": [1.0, 0.0, 0.0], "king lothair ii": [0.96, 0.28, 0.0], "lothair i": [0.6, 0.8, 0.0],
           "teutberga": [0.0, 0.0, 1.0], "lothair ii the king": [0.8, 0.6, 0.0]}

    def embed(names):
        return np.array([vec[n] for n in names])

    ln = link_names(vec, embed=embed, threshold=0.95)
    assert ln.canonical("king lothair ii") == ln.canonical("lothair ii")
    assert ln.canonical("lothair i") != ln.canonical("lothair ii") and ln.canonical("teutberga") == "teutberga"
    ev = ln.evidence("lothair ii", "king lothair ii")
    assert ev["how"] == "embedding" and ev["similarity"] == pytest.approx(0.96)
    # a chain of two links: similarity = the weakest (cos(king lothair ii, lothair ii the king) = 0.936)
    ln = link_names(vec, embed=embed, threshold=0.93)
    ev = ln.evidence("lothair ii", "lothair ii the king")
    assert ev["how"] == "embedding" and ev["similarity"] == pytest.approx(min(0.96, 0.8 * 0.96 + 0.6 * 0.28), abs=1e-4)
    # names whose numbers / ordinals / roman numerals differ are never linked by embedding
    twins = {"thomas wheate, 1st baronet": [1.0, 0.0], "thomas wheate, 2nd baronet": [1.0, 0.0],
             "louis xiv": [0.0, 1.0], "louis xv": [0.0, 1.0], "king louis xiv": [0.0, 1.0]}
    ln = link_names(twins, embed=lambda names: np.array([twins[n] for n in names]), threshold=0.9)
    assert ln.canonical("thomas wheate, 1st baronet") != ln.canonical("thomas wheate, 2nd baronet")
    assert ln.canonical("louis xiv") == ln.canonical("king louis xiv") != ln.canonical("louis xv")
    assert markers("Night Train (1990 film)") == {"1990"} and markers("Mix Tape") == frozenset()
    assert markers_agree("night train", "night train (1990 film)") and not markers_agree("louis xiv", "louis xv")
    # no threshold (an unmeasured embedder): no embedding link at all
    assert link_names(vec, embed=embed, threshold=None).canonical("king lothair ii") == "king lothair ii"
    # the cluster is named by its most frequent form
    ln = link_names(["night train", "the night train"], counts={"the night train": 3, "night train": 1})
    assert ln.forms("the night train") == ["the night train", "night train"]


def test_linking_makes_chains_where_exact_names_make_none():
    chunks = [ChunkInfo(d, d, f"doc{d}", 0, 100) for d in (1, 2, 3)]
    triples = [("alice", "directed", "the night train", 1), ("night train.", "stars", "bob stone", 2),
               ("bob", "also known as", "bob stone", 3), ("bob", "married", "carol", 3)]
    plain = CorpusGraph.build(chunks, triples, "document", 1.0)
    assert list(iter_chains(plain, 2)) == [c for c in iter_chains(plain, 2) if c.bridges == ("bob stone",)]
    assert list(iter_chains(plain, 3)) == []
    ln = link_names({n for s, _, o, _ in triples for n in (s, o)}, [(s, r, o) for s, r, o, _ in triples])
    g = CorpusGraph.build(chunks, triples, "document", 1.0, ln)
    chains = {(c.units, c.bridges) for c in iter_chains(g, 3)}
    nt, bs = ln.canonical("night train."), ln.canonical("bob stone")
    assert bs == "bob"  # the cluster's most frequent form (a tie with 'bob stone': the shorter)
    assert chains == {((1, 2, 3), (nt, bs)), ((3, 2, 1), (bs, nt))}
    (c,) = [c for c in iter_chains(g, 3) if c.units == (1, 2, 3)]
    ev = g.link_evidence(c)
    assert ev[0]["mentions"] == ["the night train", "night train."] and ev[0]["how"] == "normalised"
    assert ev[1]["mentions"] == ["bob stone", "bob"] and ev[1]["how"] == "alias"
    assert set(g.forms(nt)) == {"the night train", "night train."}


def test_walks_draw_bridges_by_specificity_and_skip_stop_words():
    import random
    from collections import Counter

    from ragrouter.querygen.sampling import _weighted_step, find_chain

    # unit 0 names a hub ("film director", in units 0-9) and a named bridge ("albert rogell", in
    # units 0 and 10); "the" is in every unit but is no entity
    chunks = [ChunkInfo(i, i, f"d{i}", 0, 10) for i in range(12)]
    triples = [(f"film {i}", "r", "film director", i) for i in range(10)]
    triples += [("film 0", "directed by", "albert rogell", 0), ("albert rogell", "born in", "ohio", 10)]
    triples += [("the", "r", f"film {i}", i) for i in range(12)]
    g = CorpusGraph.build(chunks, triples, "document", 1.0)
    assert "the" not in g.bridges and {"film director", "albert rogell"} <= g.bridges
    steps = g.steps([0], [])
    assert Counter(b for b, _ in steps) == {"film director": 9, "albert rogell": 1}
    rng = random.Random(0)
    draws = Counter(_weighted_step(g, steps, rng)[0] for _ in range(4000))
    # weight 1/(units-1): albert rogell 1/1, film director 1/9 -> P = 0.9 (uniform steps: 0.1)
    assert abs(draws["albert rogell"] / 4000 - 0.9) < 0.02
    chain = find_chain(g, 2, random.Random(1))
    assert chain.hops == 2


def test_an_entity_named_in_texts_it_was_not_extracted_from_spreads_wider():
    """The spread counts units whose text names an entity (any surface form, on word
    boundaries), not only those it was extracted from: "singer", extracted from 2 of 6 units
    but written in 4, is capped out at share 0.6 (cap 3) and, at share 1.0, drawn with weight
    1/3 against a name's 1/1; a unit whose text names an earlier bridge cannot follow it."""
    import random
    from collections import Counter

    from ragrouter.querygen.sampling import _weighted_step

    chunks = [ChunkInfo(i, i, f"d{i}", 0, 10) for i in range(6)]
    texts = {0: "Ann Lee is a singer. She starred in Blue Sky, directed by Kenneth Branagh. Bo Chan knew her.",
             1: "Kenneth Branagh (born 1960) is a British director.",
             2: "Bo Chan is a singer-songwriter and a Singer. Bo Chan knew Cy Dee.", 3: "The singer Cy Dee met Dee Fox.",
             4: "Singers (plural) only.", 5: "Dee Fox, singer, met Kenneth Branagh's brother and Cy Dee."}
    triples = [("ann lee", "sings as", "singer", 0), ("bo chan", "sings as", "singer", 2),
               ("blue sky", "directed by", "kenneth branagh", 0), ("kenneth branagh", "born", "1960", 1),
               ("ann lee", "knows", "bo chan", 0), ("bo chan", "knows", "cy dee", 2),
               ("cy dee", "knows", "dee fox", 3), ("dee fox", "likes", "jazz", 5)]
    plain = CorpusGraph.build(chunks, triples, "document", 0.6)
    g = CorpusGraph.build(chunks, triples, "document", 0.6, texts=texts)
    assert plain.spread("singer") == 2 and "singer" in plain.bridges
    assert g.written_in["singer"] == {0, 2, 3, 5}  # "singer-songwriter" and "Singer" count, "Singers" does not
    assert g.written_in["kenneth branagh"] == {0, 1, 5}
    assert g.spread("singer") == 4 and "singer" not in g.bridges  # cap max(2, 0.6 × 5 units with entities) = 3
    assert "kenneth branagh" in g.bridges and g.spread("kenneth branagh") == 3
    assert g.names(5, "kenneth branagh") and not g.names(4, "kenneth branagh")
    wide = CorpusGraph.build(chunks, triples, "document", 1.0, texts=texts)
    steps = wide.steps([0], [])
    assert {b for b, _ in steps} == {"singer", "kenneth branagh", "bo chan"}
    rng = random.Random(0)
    draws = Counter(_weighted_step(wide, steps, rng)[0] for _ in range(6000))
    # weights 1/(spread - 1): singer 1/3, kenneth branagh 1/2, bo chan 1/1 (named in units 0 and 2)
    total = 1 / 3 + 1 / 2 + 1
    assert abs(draws["singer"] / 6000 - (1 / 3) / total) < 0.02
    assert abs(draws["bo chan"] / 6000 - 1 / total) < 0.02
    # "cy dee" (units 2, 3, 5) cannot bridge 2 -> 3 in a chain whose first unit's text names it
    assert ("cy dee", 3) in wide.steps([2], [])
    assert ("cy dee", 3) not in wide.steps([5, 2], ["x"])
    # and a next unit whose text (not its triples) names an earlier bridge is refused: 5 writes "Cy Dee"
    assert ("dee fox", 5) not in wide.steps([2, 3], ["cy dee"])
    texts3 = {**texts, 5: "Dee Fox, singer."}
    wide3 = CorpusGraph.build(chunks, triples, "document", 1.0, texts=texts3)
    assert ("dee fox", 5) in wide3.steps([2, 3], ["cy dee"])


def test_a_bridge_must_be_written_in_both_texts_and_be_a_name_not_a_fragment():
    """An entity the extractor gave two units whose texts never write it links nothing (with
    texts); names that start with a non-article stop word or end with a stop word are
    fragments; an article may start a name."""
    from ragrouter.querygen.sampling import _is_name

    chunks = [ChunkInfo(i, i, f"d{i}", 0, 10) for i in range(3)]
    texts = {0: "Ann Lee directed The Glass Boat.", 1: "The Glass Boat is a film. Ann Lee was an actor and director.",
             2: "Bo Chan, actor and director, met Ann Lee."}
    triples = [("ann lee", "directed", "the glass boat", 0), ("the glass boat", "had", "surgery", 1),
               ("ann lee", "had", "surgery", 0), ("ann lee", "is", "and director", 1),
               ("bo chan", "is", "and director", 2), ("bo chan", "met", "ann lee", 2)]
    plain = CorpusGraph.build(chunks, triples, "document", 1.0)
    g = CorpusGraph.build(chunks, triples, "document", 1.0, texts=texts)
    assert "surgery" in g.bridges and g.written_in["surgery"] == frozenset()
    assert ("surgery", 1) in plain.steps([0], []) and ("surgery", 1) not in g.steps([0], [])
    assert "and director" not in g.bridges and "the glass boat" in g.bridges
    assert ("the glass boat", 1) in g.steps([0], [])
    assert [_is_name(n) for n in ("and director", "screenwriter of", "the glass boat", "The Who", "of")] == \
        [False, False, True, False, False]


def test_class_triples_make_no_bridge_and_no_question():
    from ragrouter.querygen.sampling import taxonomic

    for r in ("is a type of", "is a", "Was an", "is a person", "are types of", "is"):
        assert taxonomic(r), r
    for r in ("directed", "is directed by", "is married to", "is a member of the board of", "was born in"):
        assert not taxonomic(r), r
    # "film" is the class of two documents' subjects: no bridge between them; a named entity is
    chunks = [ChunkInfo(i, i, f"d{i}", 0, 10) for i in range(3)]
    triples = [("night train", "is a type of", "film", 0), ("day train", "is a type of", "film", 1),
               ("night train", "directed by", "alice moreau", 0), ("alice moreau", "born in", "lyon", 2)]
    g = CorpusGraph.build(chunks, triples, "document", 1.0)
    assert "film" not in g.bridges and "alice moreau" in g.bridges
    # no question or description from a class triple
    chain = stepwise.StepChain(["Night Train is a film by Alice Moreau.", "Alice Moreau is a painter born in Lyon."],
                               ["alice moreau"], [["alice moreau"]],
                               [[("night train", "is a type of", "film", "night train", "film")],
                                [("alice moreau", "is a", "painter", "alice moreau", "painter"),
                                 ("alice moreau", "born in", "lyon", "alice moreau", "lyon")]])
    assert stepwise.answer_targets(chain) == [("Lyon", "alice moreau | born in | lyon")]
    assert stepwise.description_facts(chain, 0, "Lyon") == []
    # a rewrite that is no question fails
    assert "not_a_question" in stepchecks.check_rewrite("The painter was born in Lyon.", [["alice moreau"]], "x",
                                                      ["the painter"])


def test_mixed_walk_units_split_only_long_documents():
    assert choose_walk_unit("auto", 3, 3, n_long=1) == "mixed"
    assert choose_walk_unit("auto", 3, 3, n_long=0) == "document"
    assert choose_walk_unit("auto", 1, 3, n_long=1) == "chunk"
    # doc 1: five overlapping chunks (long); docs 2 and 3: one chunk each
    chunks = [ChunkInfo(i, 1, "book", 412 * i, 412 * i + 512) for i in range(5)]
    chunks += [ChunkInfo(10, 2, "p2", 0, 80), ChunkInfo(11, 3, "p3", 0, 80)]
    triples = [("e", "r", "x", 0), ("x", "r", "y", 2), ("y", "r", "z", 10), ("z", "r", "w", 11),
               ("o", "r", "v", 1), ("v", "r", "u", 0)]  # v: chunks 0 and 1 overlap, no bridge between them
    g = CorpusGraph.build(chunks, triples, "mixed", 1.0, long_document_chunks=3)
    assert g.chunk_units == {0, 1, 2, 3, 4} and g.unit_of[10] == 10 and g.unit_of[11] == 11
    three = {(c.units, c.bridges) for c in iter_chains(g, 3)}
    # a walk inside the long document (chunk 0 -> chunk 2) continues to the short documents
    assert ((0, 2, 10), ("x", "y")) in three and ((2, 10, 11), ("y", "z")) in three
    assert not any({0, 1} <= set(u) for u, _ in three)  # overlapping chunks never share a chain


def test_settings_of_the_new_keys():
    base = copy.deepcopy(Config.load(env={}).data)
    s = gen.Settings.from_config(Config(base, source="<t>"))
    assert s.strategy == "one_prompt" and s.link_thresholds["all-MiniLM-L6-v2"] == 0.92
    assert s.link_thresholds["text-embedding-3-small"] is None
    for bad, match in [({"strategy": "two_prompts"}, "querygen.strategy"),
                       ({"linking": {"thresholds": {"m": 2}}}, "querygen.linking.thresholds"),
                       ({"step_min_drawn": 1.5}, "querygen.step_min_drawn")]:
        data = copy.deepcopy(base)
        data["querygen"].update(bad)
        with pytest.raises(ConfigError, match=match):
            gen.Settings.from_config(Config(data, source="<t>"))
    assert gen.external_id("2-hop", 5, "m", "stepwise") == "gen:2-hop:5:m:stepwise"
    assert gen.external_id("factual", 5, "m", "stepwise") == "gen:factual:5:m"


# --------------------------------------------------------------------------- end to end

# w1 -(night-train ~ night train)- w2 -(bob)- w3 ; w4 is isolated. Rules of the fake model:
# a step-(a) question the model writes on a text with ANSWERLEAK puts the answer in the
# question (never asked here: the triples make step (a)); a description from a text with
# LEAKDESC names its bridge.
DOCS = {
    "w1": "ANSWERLEAK\nalice | directed | night-train\nalice | was born in | lyon",
    "w2": "night train | stars | bob\nnight train | was released in | 1990",
    "w3": "LEAKDESC\nbob | married | carol\nbob | plays | violin",
    "w4": "zed | likes | tea\nzed | lives in | oslo",
}


def _triples(t: str) -> list[list[str]]:
    return [[p.strip() for p in line.split("|")] for line in t.splitlines() if line.count("|") == 2]


def responder(req: dict):
    system, user = req["messages"][0]["content"], req["messages"][-1]["content"]
    if system.startswith(ex.SYSTEM):
        return {"triples": _triples(user)}
    if system.startswith(prompts.STEP_QUESTION.system):
        body = user.split("Text:\n", 1)[1].split("\n\nName the question must contain: ")[0]
        bridge = re.search(r"Name the question must contain: (.+)\n", user).group(1)
        s, r, o = next(t for t in _triples(body) if key(bridge) in (key(t[0]), key(t[2])))
        answer = o if key(s) == key(bridge) else s
        q = f"What is linked to {bridge} by '{r}'?" + (f" Is it {answer}?" if "ANSWERLEAK" in body else "")
        return {"question": q, "answer": answer}
    if system.startswith(prompts.STEP_ANCHORED.system):
        body = user.split("Text:\n", 1)[1].split("\n\nName the question must contain: ")[0]
        bridge = re.search(r"Name the question must contain: (.+)\n", user).group(1)
        answer = re.search(r"Answer the question asks for: (.+)\n", user).group(1)
        r = re.search(r"Fact: .+ \| (.+) \| .+\n", user).group(1)
        return {"question": f"What is linked to {bridge} by '{r}'?" + (f" Is it {answer}?" if "ANSWERLEAK" in body else "")}
    if system.startswith(prompts.STEP_DESCRIBE.system):
        body = user.split("Text:\n", 1)[1].split("\n\nEntity to describe: ")[0]
        bridge = re.search(r"Entity to describe: (.+)\n", user).group(1)
        if "LEAKDESC" in body:
            return {"description": f"the famous {bridge}"}
        link = re.search(r"should mention '(.+)' if", user)
        ts = [t for t in _triples(body) if key(bridge) in (key(t[0]), key(t[2]))]
        if link:
            ts = [t for t in ts if key(link.group(1)) in (key(t[0]), key(t[2]))] or ts
        s, r, o = ts[0]
        return {"description": f"what {s} {r}" if key(o) == key(bridge) else f"the one that {r} {o}"}
    if system.startswith(prompts.STEP_REWRITE.system):
        q = re.search(r"Question: (.+)\n\nPhrases", user).group(1)
        return {"question": "Tell me: " + q}
    if system.startswith(prompts.SUMMARY.system):
        return {"consistent": False, "reason": "two different things", "question": "", "answer": ""}
    if system.startswith(prompts.REASONING.system):
        return {"question": "Which item follows on from the texts given?", "answer": "carol", "reasoning": "-"}
    if system.startswith(prompts.GROUNDED.system) or system.startswith(prompts.CLOSED_BOOK.system):
        return "I cannot answer"
    if system.startswith(prompts.GROUNDED_CHAIN.system):
        return {"steps": [], "answer": "I cannot answer"}
    raise AssertionError(f"unexpected prompt {system[:60]!r}")


def add_docs(engine):
    from ragrouter.ingest import store as ingest_store
    from ragrouter.ingest.records import Dataset, Document

    ds = Dataset(documents=[Document(k, "", v) for k, v in DOCS.items()], questions=[])
    with write_lock(engine), engine.begin() as conn:
        ingest_store.write_dataset(conn, "toy", "test", ds, [])
    return engine


@pytest.fixture
def wiki_store(store):
    return add_docs(store)


def config_for(srv, **querygen) -> Config:
    data = copy.deepcopy(Config.load(env={}).data)
    data["backends"]["fake-gen"] = {"kind": "openai", "base_url": srv.base_url, "model": "fake-model",
                                    "concurrency": 2, "retries": 0, "timeout_s": 10}
    for role in ("extractor", "judge", "query_generator"):
        data["roles"][role] = "fake-gen"
    data["roles"]["generators"] = ["fake-gen"]
    data["querygen"]["linking"]["embedding"] = False
    # seed 7: the four 2-hop chains are w2-w3, w3-w2, w1-w2 and w2-w1 (every outcome occurs)
    data["querygen"].update({"seed": 7, "counts": {"factual": 0, "reasoning": 8, "summary": 1},
                             "reasoning_hops": {2: 0.5, 4: 0.5}, **querygen})
    return Config(data, source="<test>")


def run(engine, config, *names):
    import ragrouter.querygen.stages  # noqa: F401 - registers querygen and validate
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    services = Services(config, engine)
    try:
        return [run_stage(registry.all_stages()[n], services, Scope(corpus="toy", config=config), progress=False)
                for n in names]
    finally:
        services.finish()


def rows(engine, sql):
    with write_lock(engine), engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql)).all()]


def _j(v):
    return json.loads(v) if isinstance(v, str) else v


def test_stepwise_end_to_end_with_skipped_units(wiki_store):
    stepwise_end_to_end(wiki_store)


def test_stepwise_end_to_end_on_postgres(pg_store):
    stepwise_end_to_end(add_docs(pg_store))


def stepwise_end_to_end(wiki_store):
    from ragrouter.commands.status import collect, format_skipped
    from ragrouter.stages.base import Scope
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(responder=responder) as srv:
        one = config_for(srv)
        step = config_for(srv, strategy="stepwise")
        run(wiki_store, step, "chunk", "extract")
        # a dry run counts each step: 4 two-hop units x (description, rewrite: the question is the
        # triple itself, no call) + the
        # summary unit's call; the 4-hop units have no chain (notes: no call)
        from ragrouter.stages import registry
        from ragrouter.stages.runner import dry_run
        from ragrouter.stages.services import Services

        services = Services(step, wiki_store)
        try:
            (est,) = dry_run([registry.all_stages()["querygen"]], services, Scope(corpus="toy", config=step))
        finally:
            services.finish()
        assert (est.calls, est.cached_calls) == (4 * 2 + 1, 0) and est.completion_cap == 9 * 600
        (qg,) = run(wiki_store, step, "querygen")
        assert (qg.pending, qg.done, qg.failed) == (9, 9, 0)
        (qg1,) = run(wiki_store, one, "querygen")  # the one-prompt strategy: 8 new reasoning units
        assert (qg1.pending, qg1.done, qg1.failed) == (8, 8, 0)
        (val,) = run(wiki_store, step, "validate")
        assert val.failed == 0
        sent = srv.stats()["total"]

        got = rows(wiki_store, "SELECT id, origin, hops, question, answer, status, external_id, meta, "
                               "supporting_doc_ids FROM queries ORDER BY id")
        checks_of: dict[int, dict[str, bool]] = {}
        for qid, name, passed in rows(wiki_store, "SELECT query_id, check_name, passed FROM query_checks"):
            checks_of.setdefault(qid, {})[name] = bool(passed)
        notes, seen_step, seen_one = {}, [], set()
        for qid, origin, hops, question, answer, status, ext, meta, docs in got:
            meta = _j(meta)
            if origin == "querygen-note":
                notes[meta["note"]] = notes.get(meta["note"], 0) + 1
                assert status == "skipped"
                continue
            docs = _j(docs)
            if ext.endswith(":stepwise"):
                assert meta["strategy"] == "stepwise" and hops == 2
                # every toy document has triples: step (a) is the last one's triple (the model's
                # ANSWERLEAK rule is never asked), and a description the fake model makes name
                # its bridge (LEAKDESC in the first document) is replaced by a triple phrase;
                # so every chain reaches validation, where the refusing judge fails grounding
                assert meta["templates"][0] == "question"
                assert ("description:1" in meta["templates"]) == ("LEAKDESC" in DOCS[docs[0]])
                assert status == "rejected" and checks_of[qid]["grounding"] is False
                assert checks_of[qid]["step_question"] and checks_of[qid]["step_description"]
                assert checks_of[qid]["bridge_leak"]
                assert question.startswith("Tell me: ") and meta["rewrite"] == "rewritten"
                for b in meta["bridges"]:
                    assert not checks.contains_phrase(question, b)
                assert len(meta["descriptions"]) == 1 and meta["descriptions"][0] in question
                seen_step.append((tuple(docs), meta["unit_index"]))
                # the chain's link evidence: 'night-train' (w1) ~ 'night train' (w2) by normalisation
                if set(docs) == {"w1", "w2"}:
                    (link,) = meta["links"]
                    assert link["how"] == "normalised" and set(link["mentions"]) == {"night-train", "night train"}
            else:
                seen_one.add((tuple(docs), meta["unit_index"]))
                assert meta["strategy"] == "one_prompt"
        # both strategies ran on the same chains (same seeds: same unit index -> same documents)
        assert set(seen_step) <= seen_one and len(seen_step) == 4
        assert any("LEAKDESC" in DOCS[d[0]] for d, _ in seen_step)  # the fallback was exercised
        # 4 stepwise and 4 one-prompt 4-hop units found no chain; the summary's sources are homonyms
        assert notes == {"no_chain": 8, "inconsistent": 1}

        # ---- skipped units in status ...
        with write_lock(wiki_store):
            status = collect(wiki_store, Scope(corpus="toy", config=step))
        qrow = next(s for s in status["stages"] if s["stage"] == "querygen")
        assert qrow["skipped"] == {"no_chain": 4, "inconsistent": 1}
        assert format_skipped(qrow["skipped"]) == "no_chain 4, inconsistent 1"
        # ... and in Table 6, one row per strategy (the summary unit is one prompt in both passes)
        val6 = {(r[0], r[1]): r[2:] for r in rows(
            wiki_store, "SELECT qtype, strategy, generator, judge, generated, passed, pending, skipped, skip_reasons, "
                        "rejection_reasons FROM v_query_validation WHERE corpus = 'toy'")}
        n_step = len(seen_step)
        g, j, generated, passed, pending, skipped, skip_reasons, reasons = val6[("all", "stepwise")]
        assert (g, j, generated, passed, pending, skipped) == ("fake-model", "fake-model", n_step, 0, 0, 4)
        assert skip_reasons == "no_chain: 4"
        assert f"grounding: {n_step}" in reasons and "step_" not in reasons, reasons
        assert val6[("4-hop", "stepwise")][5:7] == (4, "no_chain: 4")
        assert val6[("summary", "one_prompt")][5:7] == (1, "inconsistent: 1")
        assert val6[("all", "one_prompt")][2] == 4 and val6[("all", "one_prompt")][6] == "no_chain: 4, inconsistent: 1"

        # ---- a re-run of the same commands sends nothing and changes nothing
        before = rows(wiki_store, "SELECT id, status FROM queries ORDER BY id")
        reps = run(wiki_store, step, "querygen", "validate") + run(wiki_store, one, "querygen")
        assert [r.pending for r in reps] == [0, 0, 0]
        assert srv.stats()["total"] == sent
        assert rows(wiki_store, "SELECT id, status FROM queries ORDER BY id") == before


def test_table6_in_the_report_shows_each_pass_and_its_skipped_units():
    import pandas as pd

    from ragrouter.report import tables

    v = pd.DataFrame([
        {"corpus": "c", "qtype": "all", "generator": "g", "strategy": s, "judge": "j", "generated": n, "passed": p,
         "pass_rate_pct": 100.0 * p / n, "pending": 0, "skipped": k, "skip_reasons": r, "rejection_reasons": "shortcut: 1"}
        for s, n, p, k, r in [("one_prompt", 4, 1, 0, None), ("stepwise", 5, 3, 2, "no_chain: 2")]])
    md = tables.table_validation(v)
    lines = [ln for ln in md.splitlines() if ln.startswith("| c")]
    assert len(lines) == 2
    assert lines[0].startswith("| c (g, one_prompt, j) | all | 4 | 1 |")
    assert lines[1].startswith("| c (g, stepwise, j) | all | 5 | 3 |") and "| 2 (no_chain: 2) |" in lines[1]
    assert "Skipped (reasons)" in md


def test_targets_with_one_answer_and_the_bridge_as_subject_come_first():
    """Step (a)'s targets: a relation that gives the bridge one other end before one that gives
    it several ("What did Bob Stone direct?" has two answers); an attribute of the bridge (its
    subject side) before a triple that has it as object; the text's order otherwise."""
    d3 = "Bob Stone directed Night Moves and Day Trip. Sunny Days stars Bob Stone. Bob Stone was born in Paris."
    facts = [("Bob Stone", "directed", "Night Moves", "bob stone", "night moves"),
             ("Bob Stone", "directed", "Day Trip", "bob stone", "day trip"),
             ("Sunny Days", "stars", "Bob Stone", "sunny days", "bob stone"),
             ("Bob Stone", "born in", "Paris", "bob stone", "paris")]
    chain = stepwise.StepChain([D1, d3], ["bob stone"], [["bob stone"]], [[], facts])
    assert [a for a, _line in stepwise.answer_targets(chain)] == ["Paris", "Sunny Days", "Night Moves", "Day Trip"]
    assert stepwise.template_target(chain)[2] == "Bob Stone born in what?"


def test_a_copula_and_a_noun_is_no_target_relation():
    """"X | is director | screenwriter" made "X is director what?"; roles are skipped as step
    (a) targets, relations with a participle or a trailing preposition are kept."""
    assert [stepwise.copula_noun(r) for r in ("is director", "was a composer", "is acting", "were members")] == \
        [True, True, True, True]
    assert [stepwise.copula_noun(r) for r in ("was born", "is married to", "is a brother of", "was directed",
                                              "is", "directed", "born in")] == [False] * 7
    d3 = "Bob Stone is director and screenwriter. Bob Stone was born in Paris."
    facts = [("Bob Stone", "is director", "screenwriter", "bob stone", "screenwriter"),
             ("Bob Stone", "was born in", "Paris", "bob stone", "paris")]
    chain = stepwise.StepChain([D1, d3], ["bob stone"], [["bob stone"]], [[], facts])
    assert [a for a, _line in stepwise.answer_targets(chain)] == ["Paris"]


def test_a_rewrite_must_keep_what_the_single_hop_question_asks():
    """The rewrite keeps every Snowball stem of the single-hop question's non-bridge content
    words: dropping "directed" (the 1.5B's "Who was born on June 18, 1870?") is
    "question_changed"; inflecting it ("direct") is not; a paraphrase ("wife" for "marry") is."""
    forms = [["joseph w. smiley", "joseph w smiley"]]
    desc = ["the one who was born on June 18, 1870"]
    single = "What is directed by Joseph W. Smiley?"
    assert stepchecks.asked_stems(single, forms) == {"direct"}
    assert "question_changed" in stepchecks.check_rewrite("Who was born on June 18, 1870?", forms, "Life Without Soul",
                                                         desc, single_hop=single)
    assert stepchecks.check_rewrite("What film did the one who was born on June 18, 1870 direct?", forms,
                                  "Life Without Soul", desc, single_hop=single) == []
    assert "question_changed" in stepchecks.check_rewrite("Who is the wife of Joseph W. Smiley?", forms, "x", [],
                                                         single_hop="Whom did Joseph W. Smiley marry?")
    # without the single-hop question the check is as before
    assert "question_changed" not in stepchecks.check_rewrite("Who was born on June 18, 1870?", forms,
                                                             "Life Without Soul", desc)
