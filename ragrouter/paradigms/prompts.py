"""The paradigms' prompts (ours, short, versioned; paper Figures 13–16).

Each prompt is a :class:`Prompt` with a ``version`` string. The version strings are part of
every paradigm's config hash (:func:`ragrouter.paradigms.config.config_hash`), so **bump a
prompt's version whenever you edit its text**: old runs keep their hash and new runs are
computed afresh instead of being mistaken for the old ones.

The prompts are deliberately short: the embedded default generator is a 0.5B model on CPU,
where every prompt token costs time.

* :data:`GENERATION` (Figure 13, context-aware generation): answer only from the numbered
  context; otherwise reply exactly ``I cannot answer`` (:data:`REFUSAL`).
* :data:`DIRECT` (Figure 14, LLM-only and IterativeRAG round 0): answer from the model's own
  knowledge, same refusal phrase when it does not know.
* :data:`ENTITIES` (Figure 15, GraphRetriever phase 1): the query's entities as JSON
  ``{"entities": [..]}`` (an object wrapping the list, because OpenAI structured outputs need
  an object at the top level).
* :data:`SELF_EVAL` (Figure 16, IterativeRAG): ``{"sufficient", "reason", "sub_question"}``.
"""

from __future__ import annotations

from dataclasses import dataclass

REFUSAL = "I cannot answer"


@dataclass(frozen=True)
class Prompt:
    """A system message plus a user template filled with :meth:`messages`."""

    name: str
    version: str
    system: str
    user: str

    def messages(self, **fields: str) -> list[dict]:
        """Chat messages with the user template filled (``str.format`` fields)."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user.format(**fields)},
        ]


GENERATION = Prompt(
    name="generation",
    version="gen-v1",
    system=(
        "Answer the question using only the context passages. Be concise. "
        f"If the context does not contain the answer, reply exactly: {REFUSAL}"
    ),
    user="Context:\n{context}\n\nQuestion: {question}\nAnswer:",
)

DIRECT = Prompt(
    name="direct",
    version="direct-v1",
    system=f"Answer the question from your own knowledge. Be concise. If you do not know, reply exactly: {REFUSAL}",
    user="Question: {question}\nAnswer:",
)

ENTITIES = Prompt(
    name="entities",
    version="entities-v1",
    system=(
        "List the named entities and key concepts in the question (people, places, organisations, "
        "works, events, terms), each as a short normalised name. "
        'Reply with JSON only: {"entities": ["..."]}'
    ),
    user="Question: {question}",
)

ENTITIES_SCHEMA: dict = {
    "type": "object",
    "properties": {"entities": {"type": "array", "items": {"type": "string"}}},
    "required": ["entities"],
    "additionalProperties": False,
}

SELF_EVAL = Prompt(
    name="self_eval",
    version="eval-v2",
    system=(
        "You check whether an answer fully and correctly answers a question. "
        'Reply with JSON only: {"sufficient": true|false, '
        '"sub_question": "one short follow-up question that would find the missing information, '
        'or an empty string when none is needed", "reason": "at most ten words"}'
    ),
    user="Question: {question}\nAnswer: {answer}{context_block}",
)

SELF_EVAL_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "sufficient": {"type": "boolean"},
        "sub_question": {"type": "string"},
        "reason": {"type": "string"},
    },
    # the decision first: a reply cut at max_tokens inside "reason" still parses
    "required": ["sufficient", "sub_question"],
    "additionalProperties": False,
}

PROMPTS: dict[str, Prompt] = {p.name: p for p in (GENERATION, DIRECT, ENTITIES, SELF_EVAL)}


def versions(*names: str) -> dict[str, str]:
    """``{prompt name: version}`` for the named prompts (all prompts when none are named)."""
    unknown = [n for n in names if n not in PROMPTS]
    if unknown:
        raise KeyError(f"unknown prompt(s) {', '.join(unknown)}; known: {', '.join(PROMPTS)}")
    return {n: PROMPTS[n].version for n in (names or tuple(PROMPTS))}


def self_eval_messages(question: str, answer: str, context: str | None) -> list[dict]:
    """Self-evaluation messages; the context is included from round 1 on (Algorithm 3, l. 27)."""
    block = f"\n\nContext:\n{context}" if context else ""
    return SELF_EVAL.messages(question=question, answer=answer, context_block=block)


def shown_context(messages) -> str | None:
    """The context a generation request showed the model (the ``{context}`` of
    :data:`GENERATION`'s user message), or None when ``messages`` is not such a request. The
    score stage measures GraphRAG's faithfulness against it: the triples and source sentences
    the generator saw, not the whole chunks they came from."""
    if not isinstance(messages, list):
        return None
    head, tail = "Context:\n", "\n\nQuestion: "
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if m.get("role") == "user" and isinstance(content, str) and content.startswith(head):
            end = content.rfind(tail)
            if end >= len(head) - 1:
                return content[len(head):end]
    return None
