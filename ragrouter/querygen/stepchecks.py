"""The mechanical checks of stepwise reverse substitution (issue #19): what each step's reply
must and must not say, read as text (normalised phrases, content words, Snowball stems), with
no model. :mod:`ragrouter.querygen.stepwise` runs the steps and calls these; its docstring says
which check guards which step.

* step (a) :func:`check_question`; step (b) :func:`check_description` (with
  :func:`drawn_share`, :func:`proper_names`); step (c) :func:`substitute` and
  :func:`check_substituted`; step (d) :func:`check_rewrite` (with :func:`asked_stems`).
"""

from __future__ import annotations

import functools
import re

from ragrouter.querygen import checks


def _words(text: str) -> set[str]:
    return checks.content_words(text)


def names_any(text: str, forms: list[str]) -> list[str]:
    """The forms that ``text`` contains as whole-word phrases (normalised)."""
    return [f for f in forms if checks.contains_phrase(text, f)]


def partly_names(text: str, forms: list[str]) -> list[str]:
    """Forms of which ``text`` contains the whole phrase or more than half the content words
    ("king lothair" names "lothair ii")."""
    have = _words(text)
    out = []
    for f in forms:
        fw = _words(f)
        if checks.contains_phrase(text, f) or (fw and len(fw & have) * 2 > len(fw)):
            out.append(f)
    return out


def answer_in(text: str, answer: str) -> bool:
    """Whether the answer (normalised, leading article dropped) occurs in ``text``."""
    a = checks._ARTICLE.sub("", checks.normalise(answer))
    return bool(a) and f" {a} " in f" {checks.normalise(text)} "


def check_question(question: str, answer: str, bridge_forms: list[str], text: str,
                   earlier_texts: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Reasons why a step-(a) reply is unusable (empty: it passes); ``answer_in_earlier_hop``
    when one of ``earlier_texts`` (the hops before the last) writes the answer: the chain
    loops back and an earlier text may answer alone."""
    reasons = []
    if not question or not answer:
        return ["empty"]
    if not names_any(question, bridge_forms):
        reasons.append("question_does_not_name_bridge")
    if answer_in(question, answer):
        reasons.append("answer_in_question")
    if partly_names(answer, bridge_forms) or any(answer_in(f, answer) for f in bridge_forms):
        reasons.append("answer_is_bridge")
    aw = _words(answer)
    if not aw or not aw <= _words(text):
        reasons.append("answer_not_in_text")
    if any(answer_in(t, answer) for t in earlier_texts):
        reasons.append("answer_in_earlier_hop")
    return reasons


def drawn_share(description: str, text: str) -> float:
    """Share of the description's content words that occur in ``text`` (0 when it has none)."""
    dw = _words(description)
    return len(dw & _words(text)) / len(dw) if dw else 0.0


def check_description(description: str, bridge_forms: list[str], text: str, answer: str,
                      previous_forms: list[str] | None = None, min_drawn: float = 0.6,
                      related: list[str] | None = None, later_texts: list[str] | None = None) -> list[str]:
    """Reasons why a step-(b) description of a bridge is unusable (empty: it passes).

    With ``related`` (the other ends of its document's triples, :func:`related_names`; not
    checked when empty), the description must name one of them: a description is a relation
    to something else the text names ("the director of the film Alvin Purple"), not the
    bridge's own class ("the Croatian film director and screenwriter", which many entities
    fit: the 1.5B wrote such phrases from a bridge's own biography on the 2Wiki slice).

    With ``later_texts`` (the hops after the bridge's), a description whose related names are
    all written in one later text as well is a shortcut by construction (``resolvable_later``):
    "the director of the film Alvin Purple" when the director's own page, the next hop, lists
    Alvin Purple — a reader of that page alone knows who is meant."""
    if not description:
        return ["empty"]
    reasons = []
    if partly_names(description, bridge_forms):
        reasons.append("names_bridge")
    if answer_in(description, answer):
        reasons.append("contains_answer")
    if drawn_share(description, text) < min_drawn:
        reasons.append("not_from_its_document")
    if previous_forms is not None and not names_any(description, previous_forms):
        reasons.append("does_not_link_previous_bridge")
    named = names_any(description, related or [])
    if related and not named:
        reasons.append("no_relation")
    # the previous bridge is itself described in the final question, not named: a later text
    # that writes it resolves nothing alone
    named = [n for n in named if not names_any(n, previous_forms or [])]
    if named and any(all(checks.contains_phrase(t, n) for n in named) for t in later_texts or []):
        reasons.append("resolvable_later")
    return reasons


_NAME_RUN = re.compile(r"[A-Z][\w'’.-]*(?:\s+(?:(?:of|the|de|von|van|du|la)\s+)*[A-Z][\w'’.-]*)+")


def proper_names(text: str) -> list[str]:
    """Runs of two or more capitalised words of a text ("James Cagney", "House of Lords"; "and"
    ends a run), a leading stop word dropped ("The Croatian" is
    no name): names a small extractor's triples missed ("the older brother of James Cagney")."""
    out = []
    for m in _NAME_RUN.finditer(text):
        words = m.group(0).split()
        while words and words[0].casefold() in checks.STOP_WORDS:
            words = words[1:]
        if len(words) >= 2:
            out.append(" ".join(words).rstrip(".,"))
    return out


def phrase_pattern(form: str) -> re.Pattern | None:
    """A whole-word pattern of ``form`` (its normalised words, any non-word run between them, an
    article before it captured as group 1), or ``None`` for a form without words."""
    words = checks.normalise(form).split()
    if not words:
        return None
    body = r"[\W_]+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<!\w)(?:(the|a|an)\s+)?{body}(?!\w)", re.IGNORECASE)


def replace_mentions(question: str, forms: list[str], description: str) -> tuple[str, int]:
    """``question`` with every mention of any form (longest forms first) replaced by
    ``description``; a preceding article is absorbed (kept when the description has none)."""
    desc = description.strip().rstrip(".?!")
    has_article = bool(re.match(r"(the|a|an)\s", desc, re.IGNORECASE))
    n = 0
    for form in sorted(set(forms), key=lambda f: (-len(f), f)):
        pat = phrase_pattern(form)
        if pat is None:
            continue

        def repl(m: re.Match) -> str:
            art = m.group(1)
            return desc if has_article or not art else f"{art} {desc}"

        question, k = pat.subn(repl, question)
        n += k
    return question, n


def substitute(question: str, bridge_forms: list[list[str]], descriptions: list[str]) -> tuple[str, list[int]]:
    """Step (c): replace each bridge by its description, the last bridge first, the outermost
    (the first) last; returns the question and the number of replacements per bridge."""
    counts = [0] * len(descriptions)
    for i in reversed(range(len(descriptions))):
        question, counts[i] = replace_mentions(question, bridge_forms[i], descriptions[i])
    return question, counts


def check_substituted(question: str, bridge_forms: list[list[str]], answer: str) -> list[str]:
    reasons = []
    named = [f for forms in bridge_forms for f in names_any(question, forms)]
    if named:
        reasons.append("bridge_named")
    if answer_in(question, answer):
        reasons.append("answer_in_question")
    return reasons


def kept_share(question: str, description: str) -> float:
    dw = _words(description)
    return len(dw & _words(question)) / len(dw) if dw else 1.0


@functools.lru_cache(maxsize=1)
def _stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def _stems(words: set[str]) -> set[str]:
    """Snowball (Porter 2) stems of content words ("married", "marry" → "marri")."""
    return set(_stemmer().stemWords(sorted(words)))


def asked_stems(single_hop: str, bridge_forms: list[list[str]]) -> set[str]:
    """What step (a)'s question asks, beyond its bridge: the stems of its content words that
    are no bridge's ("born", "direct", "award", …)."""
    bridge_words = set().union(*(_words(f) for forms in bridge_forms for f in forms))
    return _stems(_words(single_hop) - bridge_words)


def check_rewrite(rewritten: str, bridge_forms: list[list[str]], answer: str, descriptions: list[str],
                  min_kept: float = 0.75, single_hop: str | None = None) -> list[str]:
    """Step (d)'s checks; with ``single_hop``, the rewrite must keep what that question asks
    (every stem of :func:`asked_stems`): the 1.5B's rewrites dropped it ("… what did he
    direct?" → "Who was born on June 18, 1870?") and the judge then rightly answered the bridge.
    A paraphrase ("marry" → "wife") fails too; the substituted question is kept then."""
    if not rewritten:
        return ["empty"]
    reasons = check_substituted(rewritten, bridge_forms, answer)
    if not rewritten.rstrip().endswith("?"):
        reasons.append("not_a_question")
    if single_hop is not None and asked_stems(single_hop, bridge_forms) - _stems(_words(rewritten)):
        reasons.append("question_changed")
    # as they stand in the substituted question: each with the bridges before it substituted
    expanded = [substitute(d, bridge_forms[:i], descriptions[:i])[0] for i, d in enumerate(descriptions)]
    if any(kept_share(rewritten, d) < min_kept for d in expanded):
        reasons.append("description_dropped")
    return reasons
