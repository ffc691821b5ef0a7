"""Prompts of query generation and validation (ours, short, versioned; paper Figs. 9–11).

Generation (role ``query_generator``, temperature ``querygen.temperature`` = 0.7):

* :data:`FACTUAL` (Fig. 9): one self-contained QA pair from one chunk — every entity named,
  no pronouns or references to "the passage".
* :data:`REASONING` (Fig. 10): a k-hop question over a chain of texts by **reverse
  substitution** — take the answer from the last text, then replace each bridge entity, last
  first, by a description drawn from the preceding text, so that no bridge entity is named.
* :data:`SUMMARY` (Fig. 11): first the consistency check (do all texts mean the same entity,
  not homonyms?), then a question whose complete answer needs at least two texts.

Validation (role ``judge``): :data:`GROUNDED` answers from given texts only (grounding,
shortcut; for reasoning queries :data:`GROUNDED_CHAIN`, which writes the hops before the answer), :data:`CLOSED_BOOK` from the model's own knowledge (parametric leakage), and
:data:`VERDICT` compares an answer with the expected one — the labels of the evaluation
judge (:mod:`ragrouter.evaluation.judge`; ``correct`` = "matches"), but with the reason
first (one short sentence, capped by the schema's ``maxLength``) and terser label wording:
with the evaluation judge's open reason the 0.5B model rambled past ``max_tokens`` (a cut
reply is unparseable), and its reasons parroted the label definitions.

Generated strings are capped by ``maxLength`` in the schemas too (grammar-constrained local
models honour it; validation of replies ignores it).

Bump a prompt's version whenever its text changes; versions are stored in each query's
``meta`` and each check's evidence.
"""

from __future__ import annotations

from ragrouter.paradigms.prompts import REFUSAL, Prompt

FACTUAL = Prompt(
    name="factual",
    version="qgen-factual-v1",
    system=(
        "You write one factual question and its answer from a passage. The question must be "
        "answerable from the passage alone and self-contained: name every person, thing and concept "
        "explicitly; no pronouns (it, they, this) and no references such as 'the passage', 'the text', "
        "'the author' or 'this chapter'. The answer is short (a few words or one sentence) and stated "
        'in the passage. Reply with JSON only: {"question": "...", "answer": "..."}'
    ),
    user="Passage:\n{text}\n\nReturn the JSON now.",
)

REASONING = Prompt(
    name="reasoning",
    version="qgen-reasoning-v1",
    system=(
        "You write one multi-hop question that can only be answered by reading ALL the texts, in order. "
        "Consecutive texts share a bridge entity. Use reverse substitution: (1) take a fact of the LAST "
        "text as the answer; (2) write a question asking for it that names the last bridge entity; "
        "(3) replace that bridge entity by a description of it taken from the previous text; (4) repeat "
        "for each earlier bridge entity. The final question must NOT contain any bridge entity's name, "
        "must be self-contained (no pronouns, no 'the text'), and must have a short answer. "
        'Reply with JSON only: {"question": "...", "answer": "...", "reasoning": "the steps, one sentence each"}'
    ),
    user="{texts}\n\nBridge entities (never name them in the question):\n{bridges}\n\nReturn the JSON now.",
)

SUMMARY = Prompt(
    name="summary",
    version="qgen-summary-v1",
    system=(
        "You write one summary question about an entity from several texts. First check consistency: "
        "do all texts refer to the same entity, not to different things that share its name? "
        "If not, reply with consistent false, the reason, and empty question and answer. If yes, write "
        "a self-contained question that names the entity and whose complete answer needs information "
        "from at least two of the texts (for example its causes, features and treatments), and an "
        "answer of 2-4 sentences that combines them. "
        'Reply with JSON only: {"consistent": true|false, "reason": "...", "question": "...", "answer": "..."}'
    ),
    user="Entity: {entity}\n\n{texts}\n\nReturn the JSON now.",
)

GROUNDED = Prompt(
    name="grounded",
    version="qcheck-grounded-v2",
    # v2: the second sentence. A multi-hop question names an entity by a description ("the
    # director of the film X"); with v1 the 1.5B judge failed grounding on 14 of 24 stepwise
    # 2-hop candidates on 2Wiki, mostly by answering with that entity, the bridge
    # (benchmarks/README.md, #19)
    system=f"Answer the question using only the texts. When the question describes someone or something "
           f"instead of naming it, first find in the texts who or what that is, then answer what the "
           f"question asks about it. Be concise. If the texts do not contain the answer, "
           f"reply exactly: {REFUSAL}",
    user="{texts}\n\nQuestion: {question}\nAnswer:",
)

GROUNDED_CHAIN = Prompt(
    name="grounded_chain",
    version="qcheck-grounded-chain-v3",
    # For reasoning queries (grounding and shortcut alike). With qcheck-grounded-v2's plain answer
    # the 1.5B judge still answered the bridge on 5 of 6 two-hop grounding failures in session 7
    # (benchmarks/README.md, #19): it stopped at the first hop. Writing the hops first, then the
    # answer, is the usual chain-of-thought reading; the verdict still compares only the answer.
    # v2: each step is a pair (the description as the question writes it, who or what it is), so
    # an answer that is only a step's entity can be told and asked again (GROUNDED_CHAIN_FOLLOW_UP):
    # with v1's free sentences the judge named the bridge right in its steps, then gave it as the
    # answer, on 19 of 25 two-hop grounding failures of session 8.
    # v3: a description counts only where a text states it. Given only the bridge's own page, the
    # v2 reader took any description for the page's subject (Kenneth Branagh's page, which never
    # names Peter's Friends, answered "When was the director of the film Peter's Friends born?"):
    # most of session 9's two-hop shortcut failures. On 16 of 2Wiki's own two-hop questions
    # (benchmarks/bench_chain_reader.py, 1.5B judge) false shortcuts fell 7 → 3, grounding 8 → 7.
    system=(
        "Answer a question using only the texts. The question may describe someone or something instead "
        "of naming it (for example 'the director of the film X' or 'the year Y died'). First, for every "
        "such description, write the description and who or what the texts say it is. A description is "
        "found only where a text states it: for 'the director of the film X', a text must name the film X "
        "and who directed it; a text about someone does not show that a description means them. Then "
        "write the answer to what the question asks about them, in a few words. If the texts do not say "
        f"who or what a description is, or do not contain the answer, the answer is exactly: {REFUSAL} "
        'Reply with JSON only: {"steps": [{"description": "...", "is": "..."}], "answer": "..."}'
    ),
    user="{texts}\n\nQuestion: {question}\n\nReturn the JSON now.",
)

GROUNDED_CHAIN_FOLLOW_UP = (
    "Your answer, '{answer}', is who or what '{description}' is. If the question asks for something "
    "about {answer} rather than for {answer}, answer that; otherwise give the same answer. "
    'Reply with JSON only: {{"steps": [{{"description": "...", "is": "..."}}], "answer": "..."}}'
)
"""The one follow-up turn of :data:`GROUNDED_CHAIN` when its answer is one of its own steps'
entities (:meth:`ragrouter.querygen.checks.Evaluator.read`); part of that prompt's version."""

CLOSED_BOOK = Prompt(
    name="closed_book",
    version="qcheck-closed-v1",
    system=f"Answer the question from your own knowledge; no documents are given. Be concise. "
           f"If you do not know, reply exactly: {REFUSAL}",
    user="Question: {question}\nAnswer:",
)

VERDICT = Prompt(
    name="verdict",
    version="qcheck-verdict-v2",
    system=(
        "Does an answer give the same key fact as the gold answer to a question? First write one short "
        "sentence comparing them, then the label: 'correct' if the answer gives the gold answer's key fact; "
        "'incorrect' if it gives a different fact; 'incomplete' if it gives only part of it or refuses. "
        'Reply with JSON only: {"reason": "one short sentence", "label": "correct|incorrect|incomplete"}'
    ),
    user="Question: {question}\n\nGold answer: {gold}\n\nAnswer to grade: {answer}\n\nReturn the JSON now.",
)


def _text(max_length: int) -> dict:
    return {"type": "string", "maxLength": max_length}


QA_SCHEMA: dict = {
    "type": "object",
    "properties": {"question": _text(400), "answer": _text(400)},
    "required": ["question", "answer"],
}

REASONING_SCHEMA: dict = {
    "type": "object",
    "properties": {"question": _text(500), "answer": _text(400), "reasoning": _text(600)},
    "required": ["question", "answer", "reasoning"],
}

SUMMARY_SCHEMA: dict = {
    "type": "object",
    "properties": {"consistent": {"type": "boolean"}, "reason": _text(300),
                   "question": _text(400), "answer": _text(800)},
    "required": ["consistent", "reason", "question", "answer"],
}

GROUNDED_CHAIN_SCHEMA: dict = {  # the steps first: the answer is written after them
    "type": "object",
    "properties": {"steps": {"type": "array", "maxItems": 4, "items": {
        "type": "object", "properties": {"description": _text(200), "is": _text(120)},
        "required": ["description", "is"]}}, "answer": _text(300)},
    "required": ["steps", "answer"],
}

VERDICT_SCHEMA: dict = {  # reason first: a small model decides better after writing it
    "type": "object",
    "properties": {"reason": _text(200), "label": {"type": "string", "enum": ["correct", "incorrect", "incomplete"]}},
    "required": ["reason", "label"],
}

PROMPTS: dict[str, Prompt] = {p.name: p for p in (FACTUAL, REASONING, SUMMARY, GROUNDED, GROUNDED_CHAIN,
                                                  CLOSED_BOOK, VERDICT)}


def numbered_texts(texts: list[str]) -> str:
    """``Text 1:\\n…\\n\\nText 2:\\n…`` (the numbering the prompts refer to)."""
    return "\n\n".join(f"Text {i}:\n{t.strip()}" for i, t in enumerate(texts, 1))


def factual_messages(text: str) -> list[dict]:
    return FACTUAL.messages(text=text.strip())


def reasoning_messages(texts: list[str], bridges: list[str]) -> list[dict]:
    lines = "\n".join(f"- '{b}' (links text {i} and text {i + 1})" for i, b in enumerate(bridges, 1))
    return REASONING.messages(texts=numbered_texts(texts), bridges=lines)


def summary_messages(entity: str, texts: list[str]) -> list[dict]:
    return SUMMARY.messages(entity=entity, texts=numbered_texts(texts))


def grounded_messages(question: str, texts: list[str]) -> list[dict]:
    return GROUNDED.messages(texts=numbered_texts(texts), question=question)


def grounded_chain_messages(question: str, texts: list[str]) -> list[dict]:
    return GROUNDED_CHAIN.messages(texts=numbered_texts(texts), question=question)


def grounded_chain_follow_up(messages: list[dict], reply: str, answer: str, description: str) -> list[dict]:
    """``messages`` of a :data:`GROUNDED_CHAIN` reading, its reply, and the follow-up turn."""
    return [*messages, {"role": "assistant", "content": reply},
            {"role": "user", "content": GROUNDED_CHAIN_FOLLOW_UP.format(answer=answer, description=description)}]


def closed_book_messages(question: str) -> list[dict]:
    return CLOSED_BOOK.messages(question=question)


def verdict_messages(question: str, gold: str, answer: str) -> list[dict]:
    return VERDICT.messages(question=question, gold=gold, answer=answer)


def versions() -> dict[str, str]:
    """``{prompt name: version}`` of every query generation/validation prompt."""
    return {n: p.version for n, p in PROMPTS.items()}


# ---------------------------------------------------------------------- stepwise reverse substitution
# (issue #19): each step is one small request; see ragrouter/querygen/stepwise.py.

STEP_QUESTION = Prompt(
    name="step_question",
    version="qgen-step-question-v1",
    system=(
        "You write one simple factual question about a text. The question must contain the exact name "
        "given to you, and its answer must be a short fact stated in the text (a name, a date, a place or "
        "a number), different from that name and not written in the question. "
        'Reply with JSON only: {"question": "...", "answer": "..."}'
    ),
    user="Text:\n{text}\n\nName the question must contain: {bridge}\n\nReturn the JSON now.",
)

STEP_ANCHORED = Prompt(
    name="step_anchored",
    version="qgen-step-anchored-v2",
    system=(
        "You write one simple question about a text. You are given a name, an answer and the fact of the "
        "text that links them. The question must contain the exact name, must ask for exactly that answer, "
        "and must not contain the answer or any part of it. Example: name 'Bob Stone', answer 'Carol "
        "White', fact 'bob stone | married | carol white' -> {\"question\": \"Whom did Bob Stone marry?\"}; "
        "name 'Night Train', answer 'Alice Moreau', fact 'alice moreau | directed | night train' -> "
        "{\"question\": \"Who directed Night Train?\"}. "
        'Reply with JSON only: {"question": "..."}'
    ),
    user="Text:\n{text}\n\nName the question must contain: {bridge}\nAnswer the question asks for: {answer}\n"
         "Fact: {fact}\n\nReturn the JSON now.",
)
"""Step (a) when the last text has an extracted fact about the last bridge: reverse
substitution "starting from the target answer" (App. A.2) — the answer is that fact's other
end, so the model only writes the question."""

STEP_DESCRIBE = Prompt(
    name="step_describe",
    version="qgen-step-describe-v5",
    system=(
        "You describe an entity in a short noun phrase (4-15 words) using only facts from the text, without "
        "writing its name, so that a reader of the text can tell which entity is meant: relate it to another "
        "person, work, place or date that the text names, for example "
        "'the director of the film Night Train' instead of 'John Smith'. The phrase starts with 'the' and "
        "is not a sentence. Never write the forbidden name or any part of it. Example: entity 'John Smith', "
        "fact 'night train | directed by | X' -> {\"description\": \"the director of the film Night Train\"}. "
        'Reply with JSON only: {"description": "..."}'
    ),
    user="Text:\n{text}\n\nEntity to describe: {bridge}\nForbidden in the description: {forbidden}\n{facts}{hint}"
         "Return the JSON now.",
)
"""v2: the text's extracted facts about the entity (the entity written X) are listed when
there are any; v3: an example, and "starts with 'the', not a sentence" (the 1.5B wrote whole
sentences about the other end of the fact); v4: "relate it to another person, work, place or date
that the text names" (its own class, "the Croatian film director", fits many; the step check
now rejects it, ``no_relation``); v5: the previous bridge "must" be mentioned, not "should … if
the text relates the two" (the step check has always required it; on the 2Wiki slice the 1.5B
wrote "the director of the film Brother Rat" for every three-hop bridge of that cast)."""

STEP_REWRITE = Prompt(
    name="step_rewrite",
    version="qgen-step-rewrite-v1",
    system=(
        "You make a question read fluently without changing what it asks. Keep every quoted phrase's "
        "meaning and its key words; do not add any name, do not answer the question. "
        'Reply with JSON only: {"question": "..."}'
    ),
    user="Question: {question}\n\nPhrases to keep:\n{phrases}\n\nReturn the JSON now.",
)

STEP_ANCHORED_SCHEMA: dict = {
    "type": "object", "properties": {"question": _text(300)}, "required": ["question"],
}
STEP_QUESTION_SCHEMA: dict = {
    "type": "object", "properties": {"question": _text(300), "answer": _text(120)},
    "required": ["question", "answer"],
}
STEP_DESCRIBE_SCHEMA: dict = {
    "type": "object", "properties": {"description": _text(160)}, "required": ["description"],
}
STEP_REWRITE_SCHEMA: dict = {
    "type": "object", "properties": {"question": _text(500)}, "required": ["question"],
}

PROMPTS.update({p.name: p for p in (STEP_QUESTION, STEP_ANCHORED, STEP_DESCRIBE, STEP_REWRITE)})


def step_question_messages(text: str, bridge: str) -> list[dict]:
    return STEP_QUESTION.messages(text=text.strip(), bridge=bridge)


def step_anchored_messages(text: str, bridge: str, answer: str, fact: str) -> list[dict]:
    return STEP_ANCHORED.messages(text=text.strip(), bridge=bridge, answer=answer, fact=fact)


def step_describe_messages(text: str, bridge: str, forbidden: list[str], link: str | None = None,
                           facts: list[str] | None = None) -> list[dict]:
    hint = (f"The description must mention '{link}': say how the entity relates to it.\n\n" if link else "\n")
    listed = ("Facts of the text about it (X is the entity):\n" + "\n".join(f"- {f}" for f in facts) + "\n"
              if facts else "")
    return STEP_DESCRIBE.messages(text=text.strip(), bridge=bridge,
                                  forbidden=", ".join(f"'{f}'" for f in forbidden), facts=listed, hint=hint)


def step_rewrite_messages(question: str, phrases: list[str]) -> list[dict]:
    return STEP_REWRITE.messages(question=question, phrases="\n".join(f"- '{p}'" for p in phrases))
