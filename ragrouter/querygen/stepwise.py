"""Stepwise reverse substitution (``querygen.strategy: stepwise``; issue #19, paper App. A.2 Fig. 10).

The one-prompt strategy asks a model to do reverse substitution in one reply; small models
name the bridge or leave a shortcut. Here each step is one small request, and each step's
output is checked mechanically before the next step (and long before the verify-then-filter
checks of the ``validate`` stage). For a chain d₁ →b₁→ d₂ (→b₂→ d₃):

(a) ``question`` — a single-hop question about the LAST text that names the last bridge and
    whose answer is a fact of that text (:func:`check_question`: the question names the
    bridge; the answer is not in the question, is not the bridge, and its content words are
    all in the text). When the last text has extracted triples about the last bridge, the
    procedure starts *from the target answer* as the paper does: the answer is the other end
    of such a triple (:func:`answer_targets`, as the text writes it; not one whose relation is
    a copula and a role, :func:`copula_noun`: "X | is director | screenwriter"), and the question is the
    triple itself (:func:`template_question`: "What is directed by Herman C. Raymaker?" — no
    call; step (d) makes it fluent). Only when no triple's question passes the check is the
    model asked: to write the question for a target answer
    (:data:`~ragrouter.querygen.prompts.STEP_ANCHORED`, one target per attempt), else to pick
    the fact itself (:data:`~ragrouter.querygen.prompts.STEP_QUESTION`). On the 2Wiki slice
    the 1.5B, given name, answer and triple, reversed the question in 23 of 43 step-(a) tries ("Who
    directed A Hero of the Big Snows?" for the answer "A Hero of the Big Snows");
(b) ``describe`` — for each bridge b_i, a short description taken from the text d_i that
    precedes it (:func:`check_description`: it does not name b_i — neither the whole name
    nor more than half of its content words —, does not contain the answer, at least
    ``min_drawn`` of its content words are in d_i ("drawn from its own document"), and for
    i ≥ 2 it names the previous bridge b_(i-1), else the hops before d_i would not be needed:
    a shortcut by construction; and it names something else that d_i's triples name,
    :func:`related_names` — a relation, not the bridge's class —, not all of which one later
    text writes too: that text alone would tell who is meant). The prompt lists d_i's extracted triples about b_i
    (:func:`description_facts`; those linking b_(i-1) first, none that holds the answer);
    when every reply fails its check, those triples as phrases (:func:`template_description`:
    "the one Alice Moreau directed") are checked the same way. ``meta.templates`` names the
    steps that used a template;
(c) substitution (no model): each bridge mention in the question is replaced by its
    description, the last bridge first and the outermost (b₁) last
    (:func:`substitute`); afterwards no surface form of any bridge may remain
    (:func:`check_substituted`);
(d) ``rewrite`` — a fluent rewrite that keeps every description (:func:`check_rewrite`: no
    bridge named, the answer not in it, ≥ ``min_kept`` of each description's content words
    kept, and every Snowball stem of what (a)'s question asks beyond its bridge — the rewrite
    must not ask something else: the 1.5B turned "… what did he direct?" into "Who was born
    on June 18, 1870?", whose answer is the bridge). A rewrite that fails every attempt is not a failure of the candidate: the
    substituted question of (c) is kept (``meta.rewrite = 'kept_substitution'``).

A step whose reply fails its check is asked again with the next sample index (up to
``attempts``); when every attempt fails, the candidate is stored ``rejected`` with the failed
step as its check (``step_question``, ``step_description``, ``bridge_leak``), so Table 6
counts it like any rejected candidate. Replies that cannot be parsed at all on every attempt
make the unit a note ``invalid_reply``. Every request goes through the gateway (cache and
ledger), so a repeated unit is answered from the ledger.

The checks themselves (text only, no model) live in :mod:`ragrouter.querygen.stepchecks`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragrouter.llm.backends import GatewayError
from ragrouter.querygen import checks, prompts
from ragrouter.querygen.sampling import taxonomic
from ragrouter.querygen.stepchecks import (answer_in, check_description, check_question, check_rewrite,
                                           check_substituted, drawn_share, names_any, partly_names,
                                           phrase_pattern, proper_names, substitute)

STEP_QUESTION = "step_question"
STEP_DESCRIPTION = "step_description"


# ---------------------------------------------------------------------- the procedure


@dataclass
class StepChain:
    """What the procedure reads of a chain: one text per hop and, per bridge, its name and
    every surface form to keep out of the question; optionally each hop's extracted triples
    (subject, relation, object, canonical subject, canonical object) with the bridges written
    by their canonical names."""

    hop_texts: list[str]
    bridges: list[str]
    bridge_forms: list[list[str]]
    facts: list[list[tuple[str, str, str, str, str]]] = field(default_factory=list)

    def hop_facts(self, i: int) -> list[tuple[str, str, str, str, str]]:
        return list(self.facts[i]) if i < len(self.facts) else []


def related_names(chain: StepChain, i: int) -> list[str]:
    """What a description of bridge i may relate it to: the other ends (as extracted) of hop
    i's triples about anything, except class and role ends (:func:`~ragrouter.querygen.sampling.taxonomic`,
    :func:`copula_noun`: "is a film director") and except the bridge itself, and the runs of
    capitalised words of its text (:func:`proper_names`); with the previous bridge's forms for
    i ≥ 1. Empty when the hop has no triple (nothing to check against). A triple end counts
    only when it can identify something (:func:`identifying`): "the one who married at the
    age of 19" (a broken triple's end) or "the younger brother of a previous king" do not."""
    forms = chain.bridge_forms[i]
    out: list[str] = list(chain.bridge_forms[i - 1]) if i > 0 else []
    seen = {checks.normalise(f) for f in out}
    text = chain.hop_texts[i]
    ends = [end for s, r, o, _cs, _co in chain.hop_facts(i) if not (taxonomic(r) or copula_noun(r))
            for end in (s, o) if identifying(end)]
    for end in ends + proper_names(text):
        if checks.content_words(end) and not partly_names(end, forms) and checks.normalise(end) not in seen:
            seen.add(checks.normalise(end))
            out.append(end)
    return out if chain.hop_facts(i) else []


_VAGUE_START = frozenset({"a", "an", "his", "her", "its", "their", "my", "our", "your", "some", "another"})


def identifying(end: str) -> bool:
    """Whether a triple end can identify what a description relates to: not a circumstance
    that starts with a preposition ("at the age of 19"), nor an indefinite or possessive phrase
    ("a previous king", "his first film"). Case is not looked at: a medical text's terms
    ("squamous cells") are lower-case."""
    words = checks.normalise(end).split()
    return bool(words) and words[0] not in _PREPOSITIONS and words[0] not in _VAGUE_START


def as_written(text: str, phrase: str) -> str | None:
    """``phrase`` as ``text`` writes it (case, punctuation between its words), or ``None``."""
    pat = phrase_pattern(phrase)
    m = pat.search(text) if pat is not None else None
    if m is None:
        return None
    start = m.start() + (len(m.group(1)) + 1 if m.group(1) else 0)
    return text[start:m.end()].strip()


def _about(fact: tuple[str, str, str, str, str], entity: str) -> tuple[str, str] | None:
    """(other end as extracted, its canonical name) of a triple with ``entity`` at one end."""
    s, _r, o, cs, co = fact
    if cs == entity and co != entity:
        return o, co
    if co == entity and cs != entity:
        return s, cs
    return None


def answer_targets(chain: StepChain, max_words: int = 8) -> list[tuple[str, str]]:
    """Step (a)'s answers when it starts from the answer: (answer as the last text writes it,
    the triple "s | r | o") for each triple of the last hop about the last bridge whose other
    end is a short phrase of that text and neither names a bridge nor is named by one; in
    the text's order, each answer once."""
    return [(a, line) for a, line, _q in _targets(chain, max_words)]


def _written(text: str, name: str) -> str:
    return as_written(text, name) or " ".join(name.split())


def template_question(text: str, fact: tuple[str, str, str, str, str], bridge: str) -> str:
    """Step (a) without a model: the triple as a question asking for its other end — "What
    <relation> <bridge>?" when the answer is the subject ("What stars Priscilla Lane?"; a
    passive relation is turned active, :data:`_PASSIVE`: "Herman C. Raymaker directed what?"),
    "<bridge> <relation> what?" when it is the object ("Bob Stone married what?"; "when?" for
    an answer that holds a year, :func:`dated`); names as the text writes them. Step (d)
    makes it fluent."""
    s, r, o, cs, _co = fact
    rel = " ".join(r.split())
    if cs == bridge:
        if dated(o):  # "X was born on when?" → "X was born when?"
            words = rel.split()
            rel = " ".join(words[:-1]) if len(words) > 1 and words[-1].casefold() in _PREPOSITIONS else rel
            return f"{_written(text, s)} {rel} when?"
        return f"{_written(text, s)} {rel} what?"
    passive = active_verb(rel)
    if passive:  # "S is directed by O" → "O directed what?"
        return f"{_written(text, o)} {passive} what?"
    return f"What {rel} {_written(text, o)}?"


_PASSIVE = re.compile(r"^(?:(?:is|was|are|were|has been|have been|had been|being|been)\s+)(?P<verb>.+?)\s+by$",
                      re.IGNORECASE)
"""A passive relation with its agent ("is directed by", "was succeeded by"): the 1.5B judge read
"What is directed by X?" as "who directed …" and answered X, the bridge, on most failed 2-hop
grounding checks of the 2Wiki slice; the active form asks for the thing."""
_BARE_PASSIVE = re.compile(r"^(?P<verb>\w+(?:ed|en|wn))\s+by$", re.IGNORECASE)


def active_verb(relation: str) -> str | None:
    """The active verb of a passive relation with its agent ("is directed by", "was succeeded
    by", and without its auxiliary "directed by", "written by" → "directed", "written"), else
    ``None``."""
    rel = " ".join(relation.split())
    m = _PASSIVE.match(rel) or _BARE_PASSIVE.match(rel)
    return m.group("verb") if m else None


_YEAR = re.compile(r"(?<![\w.,])(?:1\d{3}|20\d{2})(?![\w.,]\d)")


def dated(answer: str) -> bool:
    """Whether an answer holds a year from 1000 to 2099 ("1936", "on June 18, 1870"): the
    template then asks "when?" — "Roger Miller was born what?" for 1936 was rewritten "… born
    in what?", and the judge answered the place. A model number ("Boeing 747", "Apollo 13") is
    no year; a year-like one ("Windows 2000") still reads as one."""
    return bool(_YEAR.search(answer))


def template_description(text: str, fact: tuple[str, str, str, str, str], bridge: str) -> str:
    """Step (b) without a model, when every reply failed: "the one who <relation> <object>"
    ("the one who was born in Paris"), "the one who <active verb> <subject>" for a passive
    relation ("Brother Rat | is directed by | X" → "the one who directed Brother Rat") or "the
    one <subject> <relation>" ("the one Alice Moreau directed")."""
    s, _r, o, cs, _co = fact
    return _phrase(fact, bridge, _written(text, o if cs == bridge else s))


def _phrase(fact: tuple[str, str, str, str, str], target: str, other: str) -> str:
    """``target`` (one end of ``fact``) described through the phrase ``other`` for its other end."""
    rel = " ".join(fact[1].split())
    if fact[3] == target:
        return f"the one who {rel} {other}"
    verb = active_verb(rel)
    return f"the one who {verb} {other}" if verb else f"the one {other} {rel}"


def chained_descriptions(chain: StepChain, i: int, answer: str = "") -> list[str]:
    """Step (b) without a model for a bridge i ≥ 1 that no triple links to the previous bridge
    directly: two triples of hop i through a third entity x, one linking x to the previous
    bridge and one linking it to bridge i ("Brother Rat | stars | Priscilla Lane", "Brother Rat
    | is directed by | X" → "the one who directed the one who stars Priscilla Lane"); step (d)
    makes it fluent. None holds the answer."""
    if i < 1:
        return []
    text, prev, bridge = chain.hop_texts[i], chain.bridges[i - 1], chain.bridges[i]
    facts = [f for f in chain.hop_facts(i) if not taxonomic(f[1])]
    out = []
    for f1 in facts:
        via = _about(f1, prev)
        if via is None or via[1] in chain.bridges:
            continue
        inner = _phrase(f1, via[1], _written(text, f1[0] if f1[3] == prev else f1[2]))
        for f2 in facts:
            other = _about(f2, bridge)
            if other is None or other[1] != via[1] or f2 is f1:
                continue
            phrase = _phrase(f2, bridge, inner)
            if phrase not in out and not (answer and answer_in(phrase, answer)):
                out.append(phrase)
    return out


_COPULA = frozenset({"is", "are", "was", "were", "be", "been", "being"})
_PREPOSITIONS = frozenset("of in on at to for with by from into as about after before over under between "
                          "through during against since until within without near".split())


def copula_noun(relation: str) -> bool:
    """A relation that is a copula and a noun or adjective ("is director", "was a composer",
    "is acting"): its triple states a role, and the question it makes asks nothing ("X is
    director what?" → "screenwriter"). A copula with a participle ("was born", "is married")
    or ending in a preposition ("is a brother of") is a relation."""
    words = checks.normalise(relation).split()
    if len(words) < 2 or words[0] not in _COPULA:
        return False
    last = words[-1]
    return last not in _PREPOSITIONS and not last.endswith(("ed", "en")) and last != "born"


def _targets(chain: StepChain, max_words: int = 8) -> list[tuple[str, str, str]]:
    """(answer as written, "s | r | o", template question) per usable triple (see
    :func:`answer_targets`), best first: a triple that gives the bridge **one** other end for
    its relation before one that gives it several ("X directed A", "X directed B": "What did X
    direct?" has two answers), and among those a triple with the bridge as its subject (an
    attribute of the bridge: "When was X born?") before one with the bridge as its object
    ("What is directed by X?", which the 1.5B judge answered with X itself on the 2Wiki slice);
    the text's order otherwise."""
    text, bridge = chain.hop_texts[-1], chain.bridges[-1]
    forms = [f for fs in chain.bridge_forms for f in fs] + list(chain.bridges)
    facts = chain.hop_facts(len(chain.hop_texts) - 1)
    ends: dict[tuple[bool, str], set[str]] = {}  # (bridge is the subject, relation) -> other ends
    for fact in facts:
        other = _about(fact, bridge)
        if other is not None:
            ends.setdefault((fact[3] == bridge, checks.normalise(fact[1])), set()).add(other[1])
    out, seen, rank = [], set(), []
    for fact in facts:
        other = _about(fact, bridge)
        if other is None or other[1] in chain.bridges or taxonomic(fact[1]) or copula_noun(fact[1]):
            continue
        written = as_written(text, other[0])
        if not written or len(written.split()) > max_words or not checks.content_words(written):
            continue
        subject, rel_key = fact[3] == bridge, checks.normalise(fact[1])
        head, _, rest = written.partition(" ")
        if subject and rest.strip() and head.casefold() in _PREPOSITIONS:
            # "X | was born | in Lviv": the preposition belongs to the question, not the answer
            written = rest.strip()
            fact = (fact[0], f"{fact[1]} {head}", written, fact[3], fact[4])
        if partly_names(written, forms) or any(answer_in(f, written) for f in forms):
            continue
        if any(answer_in(t, written) for t in chain.hop_texts[:-1]):
            continue  # the chain loops back: an earlier text writes the answer ("What stars Priscilla Lane?" → the first page's film)
        k = checks.normalise(written)
        if k in seen:
            continue
        seen.add(k)
        rank.append((len(ends[(subject, rel_key)]) > 1, not subject, len(out)))
        out.append((written, " | ".join(fact[:3]), template_question(text, fact, bridge)))
    return [out[r[-1]] for r in sorted(rank)]


def description_facts(chain: StepChain, i: int, answer: str, limit: int = 4) -> list[str]:
    """Step (b)'s hints for bridge i: the triples of hop i about it, the bridge written X
    ("X | stars | bob"); for i ≥ 1 those that link the previous bridge first; none that holds
    the answer."""
    return [line for line, _fact in _description_facts(chain, i, answer, limit)]


def _description_facts(chain: StepChain, i: int, answer: str, limit: int = 4):
    bridge = chain.bridges[i]
    linked, others, seen = [], [], set()
    for fact in chain.hop_facts(i):
        other = _about(fact, bridge)
        if other is None or taxonomic(fact[1]):
            continue
        s, r, o, cs, _co = fact
        line = f"X | {r} | {o}" if cs == bridge else f"{s} | {r} | X"
        if (answer and answer_in(line, answer)) or line in seen:
            continue
        seen.add(line)
        (linked if i > 0 and other[1] == chain.bridges[i - 1] else others).append((line, fact))
    return (linked + others)[:limit]


def template_target(chain: StepChain, targets: list[tuple[str, str, str]] | None = None
                    ) -> tuple[str, str, str] | None:
    """The first (answer, "s | r | o", template question) of ``targets`` (default
    :func:`_targets`) whose question passes step (a)'s check: step (a) then needs no call."""
    for answer, line, question in (_targets(chain) if targets is None else targets):
        if not check_question(question, answer, chain.bridge_forms[-1], chain.hop_texts[-1]):
            return answer, line, question
    return None


def first_requests(chain: StepChain) -> list[list[dict]]:
    """The messages of each step's first attempt (what a dry run counts): (a) unless a
    template question passes, (b) per bridge and (d), the rewrite sized by the bridges' names."""
    full = _targets(chain)
    targets = [(a, line) for a, line, _q in full]
    templated = template_target(chain, full)
    answer = templated[0] if templated else targets[0][0] if targets else ""
    asks = []
    if templated is None:
        asks.append(prompts.step_anchored_messages(chain.hop_texts[-1], chain.bridges[-1], *targets[0]) if targets
                    else prompts.step_question_messages(chain.hop_texts[-1], chain.bridges[-1]))
    asks += [prompts.step_describe_messages(chain.hop_texts[i], b, chain.bridge_forms[i],
                                            chain.bridges[i - 1] if i > 0 else None,
                                            description_facts(chain, i, answer))
             for i, b in enumerate(chain.bridges)]
    asks.append(prompts.step_rewrite_messages(" ".join(chain.bridges), chain.bridges))
    return asks


@dataclass
class StepOutcome:
    question: str = ""
    answer: str = ""
    status: str = "pending"
    """'pending' (to validate), 'rejected' (a step failed) or 'note' (no usable reply)."""
    checks: list[tuple[str, bool, dict]] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    call_ids: list[int] = field(default_factory=list)
    note: tuple[str, str] | None = None


Chat = Callable[[str, list[dict], dict, int], Any]
"""chat(phase, messages, schema, attempt) → the gateway's ChatResult (``data``, ``call_id``);
raises GatewayError (parse errors are caught here)."""


def _text(data: Any, key: str) -> str:
    value = data.get(key) if isinstance(data, dict) else None
    return value.strip() if isinstance(value, str) else ""


def run(chain: StepChain, chat: Chat, attempts: int = 2, min_drawn: float = 0.6, min_kept: float = 0.75) -> StepOutcome:
    """Steps (a)-(d) for one chain (see the module docstring)."""
    k = len(chain.hop_texts)
    if k < 2 or len(chain.bridges) != k - 1 or len(chain.bridge_forms) != k - 1:
        raise ValueError(f"a stepwise chain needs k ≥ 2 texts and k-1 bridges (got {k} and {len(chain.bridges)})")
    out = StepOutcome(meta={"strategy": "stepwise", "prompt_version": "+".join(
        p.version for p in (prompts.STEP_QUESTION, prompts.STEP_ANCHORED, prompts.STEP_DESCRIBE,
                            prompts.STEP_REWRITE))})
    steps: list[dict] = []
    out.meta["steps"] = steps
    parse_problems: list[str] = []

    def ask(phase: str, request: Callable[[int], tuple[list[dict], dict, Callable[[Any], tuple[Any, list[str]]]]]):
        """(value, passed, tries) after up to ``attempts`` samples; value None if never parsed.
        ``request(attempt)`` → (messages, schema, check of the reply)."""
        tries, last = [], None
        for attempt in range(attempts):
            messages, schema, check = request(attempt)
            try:
                res = chat(phase, messages, schema, attempt)
            except GatewayError as exc:
                if exc.reason not in checks.PARSE_ERRORS:
                    raise
                parse_problems.append(exc.reason)
                tries.append({"attempt": attempt, "error": exc.reason})
                continue
            out.call_ids.append(res.call_id)
            value, reasons = check(res.data)
            tries.append({"attempt": attempt, "reply": res.data, "failed": reasons,
                          **({"answer": value[1]} if phase == "stepwise:question" else {})})
            last = value
            if not reasons:
                steps.append({"phase": phase, "tries": tries})
                return value, True, tries
        steps.append({"phase": phase, "tries": tries})
        return last, False, tries

    def unparsed(tries) -> bool:
        return all("error" in t for t in tries)

    # (a) the single-hop question about the last text, naming the last bridge: from a target
    # answer (one per attempt) when the last text has triples about the bridge
    last_forms, last_text = chain.bridge_forms[-1], chain.hop_texts[-1]
    full = _targets(chain)
    targets = [(a, line) for a, line, _q in full]
    out.meta["answer_targets"] = len(targets)
    out.meta["templates"] = []
    templated = template_target(chain, full)  # the triple itself as the question: no call
    if templated is not None:
        steps.append({"phase": "stepwise:question", "tries": [{"template": templated[2], "answer": templated[0],
                                                                "fact": templated[1], "failed": []}]})
        out.meta["templates"].append("question")

    def request_a(attempt: int):
        if attempt < len(targets):
            answer, fact = targets[attempt]

            def check(data):
                q = _text(data, "question")
                return (q, answer), check_question(q, answer, last_forms, last_text)

            return (prompts.step_anchored_messages(last_text, chain.bridges[-1], answer, fact),
                    prompts.STEP_ANCHORED_SCHEMA, check)

        def check_free(data):
            q, a = _text(data, "question"), _text(data, "answer")
            return (q, a), check_question(q, a, last_forms, last_text, chain.hop_texts[:-1])

        return prompts.step_question_messages(last_text, chain.bridges[-1]), prompts.STEP_QUESTION_SCHEMA, check_free

    if templated is not None:
        qa, ok, tries = (templated[2], templated[0]), True, []
    else:
        qa, ok, tries = ask("stepwise:question", request_a)
    if qa is None and unparsed(tries):
        out.status, out.note = "note", ("invalid_reply", f"{attempts} unusable replies to step (a): "
                                                          f"{'; '.join(parse_problems)}")
        return out
    out.question, out.answer = qa
    if not ok:
        out.status = "rejected"
        out.checks.append((STEP_QUESTION, False, {"tries": tries}))
        return out
    out.checks.append((STEP_QUESTION, True, {"question": out.question, "answer": out.answer}))
    single_hop = out.question

    # (b) a description of each bridge from the text before it (the last bridge first)
    descriptions: list[str | None] = [None] * (k - 1)
    evidence = []
    for i in reversed(range(k - 1)):
        prev = chain.bridge_forms[i - 1] if i > 0 else None
        forbidden = chain.bridge_forms[i]

        related = related_names(chain, i)

        def check_b(data, i=i, prev=prev, forbidden=forbidden, related=related):
            d = _text(data, "description")
            return d, check_description(d, forbidden, chain.hop_texts[i], out.answer, prev, min_drawn,
                                        related=related, later_texts=chain.hop_texts[i + 1:])

        msgs = prompts.step_describe_messages(chain.hop_texts[i], chain.bridges[i], forbidden,
                                              chain.bridges[i - 1] if i > 0 else None,
                                              description_facts(chain, i, out.answer))
        d, ok, tries = ask("stepwise:describe", lambda _a, m=msgs, c=check_b: (m, prompts.STEP_DESCRIBE_SCHEMA, c))
        if not ok and not unparsed(tries):  # every reply failed its check: the hop's triples as phrases
            phrases = [template_description(chain.hop_texts[i], fact, chain.bridges[i])
                       for _line, fact in _description_facts(chain, i, out.answer)]
            for cand in phrases + chained_descriptions(chain, i, out.answer):
                cand, reasons = check_b({"description": cand})
                steps[-1]["tries"].append({"template": cand, "failed": reasons})
                if not reasons:
                    d, ok = cand, True
                    out.meta["templates"].append(f"description:{i + 1}")
                    break
        if not ok:
            if d is None and unparsed(tries):
                out.status, out.note = "note", ("invalid_reply", f"{attempts} unusable replies to step (b) for "
                                                                  f"bridge {i + 1}: {'; '.join(parse_problems)}")
                return out
            out.status = "rejected"
            out.meta["single_hop_question"] = single_hop
            out.checks.append((STEP_DESCRIPTION, False, {"bridge": chain.bridges[i], "hop": i + 1, "tries": tries}))
            return out
        descriptions[i] = d
        evidence.append({"bridge": chain.bridges[i], "hop": i + 1, "description": d,
                         "drawn_share": round(drawn_share(d, chain.hop_texts[i]), 3)})
    out.checks.append((STEP_DESCRIPTION, True, {"descriptions": evidence[::-1]}))
    descs = [str(d) for d in descriptions]

    # (c) substitution, outermost last
    substituted, counts = substitute(single_hop, chain.bridge_forms, descs)
    reasons = check_substituted(substituted, chain.bridge_forms, out.answer)
    out.meta.update(single_hop_question=single_hop, descriptions=descs, substituted_question=substituted,
                    substitutions=counts)
    named = [f for forms in chain.bridge_forms for f in names_any(substituted, forms)]
    if reasons:
        out.question, out.status = substituted, "rejected"
        out.checks.append((checks.BRIDGE_LEAK, False, {"stage": "substitution", "bridges": chain.bridges,
                                                        "named": named, "failed": reasons}))
        return out

    # (d) a fluent rewrite keeping every description (else the substituted question stays)
    def check_d(data):
        q = _text(data, "question")
        return q, check_rewrite(q, chain.bridge_forms, out.answer, descs, min_kept, single_hop=single_hop)

    rewrite = prompts.step_rewrite_messages(substituted, descs)
    rewritten, ok, _tries = ask("stepwise:rewrite", lambda _a: (rewrite, prompts.STEP_REWRITE_SCHEMA, check_d))
    out.question = rewritten if ok else substituted
    out.meta["rewrite"] = "rewritten" if ok else "kept_substitution"
    out.checks.append((checks.BRIDGE_LEAK, True, {"stage": "rewrite" if ok else "substitution",
                                                   "bridges": chain.bridges, "named": []}))
    return out
