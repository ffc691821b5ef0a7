"""Calibration cases: candidate answers whose true label is known by construction.

The text helpers and case makers of :mod:`ragrouter.evaluation.calibration`. From an imported
query with a gold answer (:class:`Source`) they make candidate answers (:class:`Case`) by fixed
rules — no LLM is involved in making them — and give the judge prompt of a case.

Case kinds (:data:`KINDS`, a plain dict registry: kind → true label and maker)
    ``gold``          correct     the gold answer itself.
    ``paraphrase``    correct     the gold behind a fixed lead-in (``"In short: …"``), with
                                  meaning-preserving swaps of phrasing words (:data:`SWAPS`,
                                  e.g. "such as" → "like", "typically" → "usually"). Content
                                  words, numbers, names and negations are never touched.
    ``refusal``       incomplete  a refusal (:data:`REFUSALS`, e.g. "I cannot answer"); the
                                  judge prompt defines refusals as incomplete.
    ``first_clause``  incomplete  the gold cut to its first clause: the first sentence of a
                                  multi-sentence gold, else the text before the first clause
                                  boundary (``;``, ``,``, " because ", " but ", " which ",
                                  " and ", …). Only made when the cut keeps ≥ 3 words and
                                  drops ≥ 2 content words that the kept part does not contain,
                                  so the cut really loses information (single-clause golds
                                  are skipped).
    ``other_gold``    incorrect   another query's gold answer: among the other imported
                                  queries of the corpus (same query type first), the one whose
                                  gold shares the fewest content words with this query's
                                  question and gold (Jaccard < 0.2; ties broken by a stable
                                  hash, so donors vary).
    ``altered``       incorrect   the gold with every sentence contradicted by the first rule
                                  that applies: change its first number (×2; a percentage
                                  above 50 halved; a year − 25), else swap its first word
                                  that has an antonym (:data:`ANTONYMS`: increases ↔
                                  decreases, most ↔ least, higher ↔ lower, …), else negate
                                  its first auxiliary ("is" → "is not", "is not" → "is",
                                  "can" → "cannot"), else wrap it ("It is not true that …").

Limits (documented in ``benchmarks/README.judge.md`` too): the paraphrase is shallow (it tests
robustness to surface changes, not to a reworded argument); a first-clause cut whose dropped
words are inessential detail may fairly be judged correct; an antonym swap inside a fixed
term ("small cell") changes an entity rather than a claim — still a wrong answer; a number
in a name ("COVID-19") is changed like any number; hedged sentences ("may be used") are
negated through their wrapper, which reads stiffly. No rule swaps a "key entity": without a
named-entity model the key entity cannot be found reliably, and swapping a non-key word could
leave the answer correct. Another query's gold is a different answer but it may be
trivially off-topic, so ``other_gold`` is the easiest incorrect case.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Callable, Iterable

from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.sentences import split_sentences

VERSION = "calib-v1"
"""Construction version: the ``generator`` of case runs. Bump it when a rule changes."""


# --------------------------------------------------------------------------- text helpers

_STOP = frozenset("""
a an the of in on at to for from by with and or but nor so yet is are was were be been being am
it its it's this that these those as such which who whom whose what when where why how than then
also can cannot may might should would could will shall must do does did done has have had having
not no into onto about over under between during within without per via each any all some other
more most less least very there their they them he she his her him we our you your i me my
""".split())
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")


def content_words(text_: str) -> set[str]:
    """Lower-cased words of ≥ 3 characters that are not function words."""
    return {w for w in (m.group(0).lower().strip("'’-") for m in _WORD.finditer(text_))
            if len(w) >= 3 and w not in _STOP}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if (a or b) else 0.0


def stable_hash(*parts: str) -> str:
    """sha256 hex of the parts (selection order and tie-breaks; never Python's salted hash)."""
    return hashlib.sha256("\x1f".join((VERSION, *parts)).encode("utf-8")).hexdigest()


def _pick(options: tuple[str, ...], key: str) -> str:
    return options[int(stable_hash(key)[:8], 16) % len(options)]


def _keep_case(original: str, new: str) -> str:
    """``new`` with the capitalisation of ``original`` (all caps, Title, or as is)."""
    if original.isupper() and len(original) > 1:
        return new.upper()
    if original[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def _lower_first(sentence: str) -> str:
    """Lower-case the first letter when the first word is an ordinary capitalised word
    (not an acronym such as "BCC" or a mixed-case name such as "HER2")."""
    first = sentence.split(" ", 1)[0]
    if len(first) > 1 and first[0].isupper() and first[1:].islower():
        return sentence[0].lower() + sentence[1:]
    return sentence


# --------------------------------------------------------------------------- case makers

@dataclasses.dataclass(frozen=True)
class Source:
    """An imported query with a gold answer (the material of calibration cases)."""

    id: int
    external_id: str
    corpus_id: int
    qtype: str
    question: str
    answer: str
    hops: int | None = None


@dataclasses.dataclass(frozen=True)
class Case:
    """One calibration case: a candidate answer to a source query with a known label."""

    source_id: int
    kind: str
    true_label: str
    answer: str
    rule: str


Maker = Callable[[Source, "Pool"], "tuple[str, str] | None"]


def make_gold(src: Source, pool: "Pool") -> tuple[str, str]:
    return src.answer.strip(), "the gold answer itself"


#: Meaning-preserving swaps of phrasing words (whole words, case kept), tried in this order;
#: longer phrases first so that "most commonly" is not half-swapped.
SWAPS: tuple[tuple[str, str], ...] = (
    ("is associated with", "is linked to"),
    ("are associated with", "are linked to"),
    ("characterized by", "marked by"),
    ("consists of", "is made up of"),
    ("in order to", "to"),
    ("prior to", "before"),
    ("due to", "because of"),
    ("such as", "like"),
    ("in contrast", "by contrast"),
    ("is used for", "is employed for"),
    ("are used for", "are employed for"),
    ("approximately", "about"),
    ("typically", "usually"),
    ("commonly", "frequently"),
    ("often", "frequently"),
    ("particularly", "especially"),
    ("individuals", "people"),
    ("additionally", "in addition"),
    ("therefore", "so"),
    ("recommended", "advised"),
    ("performed", "carried out"),
    ("essential", "crucial"),
    ("distinct", "separate"),
    ("main", "principal"),
    ("regular", "routine"),
    ("gradually", "slowly"),
    ("requires", "needs"),
    ("require", "need"),
    ("occurs", "happens"),
    ("increases", "raises"),
    ("reduces", "lowers"),
    ("involves", "includes"),
)
# "X, while Y." → "Y, while x." (also whereas) and "X because Y." → "Because Y, x.":
# reordering two clauses joined by a symmetric contrast or a cause keeps the meaning.
_REORDER = (
    (re.compile(r"^(?P<a>[^,;]+?),\s+(?P<conj>while|whereas)\s+(?P<b>[^;]+?)(?P<end>[.!?]?)$"), "{B}, {conj} {a}{end}"),
    (re.compile(r"^(?P<a>[^,;]+?)\s+(?P<conj>because)\s+(?P<b>[^,;]+?)(?P<end>[.!?]?)$"), "Because {b}, {a}{end}"),
)
PARAPHRASE_LEADS = ("In short: ", "The answer is: ", "To put it briefly: ", "Put simply: ")


def _reorder(sentence: str) -> tuple[str, str | None]:
    """Swap two clauses joined by while/whereas/because (each ≥ 3 words); else unchanged."""
    for pattern, template in _REORDER:
        m = pattern.match(sentence.strip())
        if m and len(m.group("a").split()) >= 3 and len(m.group("b").split()) >= 3:
            b = m.group("b")
            out = template.format(a=_lower_first(m.group("a")), b=_lower_first(b), B=b[:1].upper() + b[1:],
                                  conj=m.group("conj").lower(), end=m.group("end") or ".")
            return out, f"clauses reordered around '{m.group('conj').lower()}'"
    return sentence, None


def paraphrase(gold: str, key: str = "") -> tuple[str, list[str]]:
    """The gold behind a lead-in, clauses reordered (:data:`_REORDER`) and the :data:`SWAPS`
    applied; (text, changes made)."""
    made = []
    sents = []
    for s in split_sentences(gold.strip()) or [gold.strip()]:
        s, how = _reorder(s)
        if how:
            made.append(how)
        sents.append(s)
    out = " ".join(sents)
    for old, new in SWAPS:
        pattern = re.compile(rf"\b{re.escape(old)}\b", re.I)
        if pattern.search(out):
            out = pattern.sub(lambda m, new=new: _keep_case(m.group(0), new), out)
            made.append(f"{old} → {new}")
    return _pick(PARAPHRASE_LEADS, "lead:" + key) + out, made


def make_paraphrase(src: Source, pool: "Pool") -> tuple[str, str]:
    out, made = paraphrase(src.answer, src.external_id)
    lead = out[: out.index(":") + 1]
    return out, f"lead-in '{lead}'" + (f"; {', '.join(made)}" if made else "; no other change applied")


#: Refusals (the generation prompt's exact "I cannot answer" among them).
REFUSALS = (
    "I cannot answer",
    "I cannot answer this question based on the given information.",
    "I don't know.",
    "The provided context does not contain enough information to answer this question.",
)


def make_refusal(src: Source, pool: "Pool") -> tuple[str, str]:
    out = _pick(REFUSALS, "refusal:" + src.external_id)
    return out, f"refusal '{out}'"


# Clause boundaries inside one sentence, earliest first wins. Commas followed by a digit
# ("1,000") never match (a space must follow).
_CLAUSE_BOUNDARY = re.compile(
    r";\s|,\s|\s[—–]\s|\s(?:because|but|while|whereas|which|although|though|and)\s", re.I)


def first_clause(gold: str) -> tuple[str, str] | None:
    """(cut, rule) — the gold cut to its first clause — or None when no cut drops
    information (fewer than 2 content words lost, or fewer than 3 words kept)."""
    sents = split_sentences(gold)
    if not sents:
        return None
    if len(sents) >= 2:
        kept, rule = sents[0], f"first sentence of {len(sents)}"
    else:
        s = sents[0]
        kept, rule = None, ""
        for m in _CLAUSE_BOUNDARY.finditer(s):
            head = s[: m.start()].rstrip(" ,;:—–-")
            if len(head.split()) >= 3:
                kept = head + "."
                rule = f"text before the first clause boundary '{m.group(0).strip()}'"
                break
        if kept is None:
            return None
    if len(kept.split()) < 3:
        return None
    dropped = content_words(gold) - content_words(kept)
    if len(dropped) < 2:
        return None
    return kept, f"{rule}; drops {len(dropped)} content words"


def make_first_clause(src: Source, pool: "Pool") -> tuple[str, str] | None:
    return first_clause(src.answer)


OTHER_GOLD_MAX_JACCARD = 0.2


def make_other_gold(src: Source, pool: "Pool") -> tuple[str, str] | None:
    donor = pool.donor(src)
    if donor is None:
        return None
    return donor.answer.strip(), f"gold answer of query {donor.id} ({donor.external_id})"


#: Antonyms for the ``altered`` case (both directions listed; whole words, case kept).
ANTONYMS: dict[str, str] = {}
for _a, _b in (("increases", "decreases"), ("increase", "decrease"), ("increased", "decreased"),
               ("higher", "lower"), ("more", "less"), ("most", "least"), ("common", "rare"),
               ("before", "after"), ("benign", "malignant"), ("early", "late"), ("positive", "negative"),
               ("always", "never"), ("improves", "worsens"), ("improve", "worsen"), ("above", "below"),
               ("high", "low"), ("large", "small"), ("likely", "unlikely"), ("often", "rarely"),
               ("frequently", "rarely"), ("commonly", "rarely"), ("upper", "lower"), ("inside", "outside"),
               ("effective", "ineffective"), ("safe", "unsafe"), ("fast", "slow"), ("faster", "slower"),
               ("first", "last"), ("older", "younger"), ("raises", "lowers"), ("reduces", "increases"),
               ("spreads", "stays localized"), ("accurate", "inaccurate"), ("possible", "impossible"),
               ("true", "false")):
    ANTONYMS.setdefault(_a, _b)
    ANTONYMS.setdefault(_b, _a)
_ANTONYM_RE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, ANTONYMS), key=len, reverse=True)) + r")\b", re.I)
_NUMBER_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(\s?%|\s?percent\b)?(?!\w)(?!\.\d)")
_AUX_RE = re.compile(r"\b(cannot|can't|can|is|are|was|were|should|will|must|does|do|did|has|have)\b(\s+not\b)?", re.I)


def _change_number(m: re.Match) -> str:
    raw, pct = m.group(1), m.group(2) or ""
    value = float(raw)
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    if pct and value > 50:
        new = value / 2
    elif decimals == 0 and 1800 <= value <= 2100 and not pct:
        new = value - 25
    elif value == 0:
        new = 5
    else:
        new = value * 2
    return (f"{new:.{decimals}f}" if decimals else str(int(round(new)))) + pct


def contradict(sentence: str) -> tuple[str, str]:
    """One sentence contradicted by the first rule that applies; (text, rule name)."""
    m = _NUMBER_RE.search(sentence)
    if m:
        return sentence[: m.start()] + _change_number(m) + sentence[m.end():], "number"
    m = _ANTONYM_RE.search(sentence)
    if m:
        word = m.group(1)
        return sentence[: m.start()] + _keep_case(word, ANTONYMS[word.lower()]) + sentence[m.end():], "antonym"
    m = _AUX_RE.search(sentence)
    if m:
        aux, neg = m.group(1), m.group(2)
        low = aux.lower()
        if neg:  # "is not" → "is"
            new = aux
        elif low in ("cannot", "can't"):
            new = _keep_case(aux, "can")
        elif low == "can":
            new = _keep_case(aux, "cannot")
        else:
            new = f"{aux} not"
        return sentence[: m.start()] + new + sentence[m.end():], "negation"
    body = sentence.rstrip()
    return "It is not true that " + _lower_first(body), "wrap"


def altered(gold: str) -> tuple[str, str] | None:
    """(text, rule) — every sentence of the gold contradicted — or None for an empty gold."""
    sents = split_sentences(gold)
    if not sents:
        return None
    outs, rules = [], []
    for s in sents:
        new, rule = contradict(s)
        outs.append(new)
        rules.append(rule)
    counts = {r: rules.count(r) for r in dict.fromkeys(rules)}
    return " ".join(outs), "per sentence: " + ", ".join(f"{r} ×{n}" for r, n in counts.items())


def make_altered(src: Source, pool: "Pool") -> tuple[str, str] | None:
    return altered(src.answer)


@dataclasses.dataclass(frozen=True)
class CaseKind:
    kind: str
    true_label: str
    make: Maker
    description: str


KINDS: dict[str, CaseKind] = {
    "gold": CaseKind("gold", "correct", make_gold, "the gold answer itself"),
    "paraphrase": CaseKind("paraphrase", "correct", make_paraphrase, "the gold behind a lead-in, phrasing words swapped"),
    "refusal": CaseKind("refusal", "incomplete", make_refusal, "a refusal such as 'I cannot answer'"),
    "first_clause": CaseKind("first_clause", "incomplete", make_first_clause, "the gold cut to its first clause"),
    "other_gold": CaseKind("other_gold", "incorrect", make_other_gold, "another query's gold answer"),
    "altered": CaseKind("altered", "incorrect", make_altered, "the gold with every sentence contradicted"),
}


class Pool:
    """The sources of a corpus, for picking another query's gold (``other_gold``)."""

    def __init__(self, sources: Iterable[Source]):
        self.sources = list(sources)
        self._words = {s.id: content_words(s.answer) for s in self.sources}

    def donor(self, src: Source) -> Source | None:
        own = content_words(src.answer) | content_words(src.question)
        best, best_key = None, None
        for cand in self.sources:
            if cand.id == src.id or cand.corpus_id != src.corpus_id or not cand.answer.strip():
                continue
            if cand.answer.strip().lower() == src.answer.strip().lower():
                continue
            overlap = jaccard(self._words[cand.id], own)
            if overlap >= OTHER_GOLD_MAX_JACCARD:
                continue
            key = (cand.qtype != src.qtype, round(overlap, 6), stable_hash(src.external_id, cand.external_id))
            if best_key is None or key < best_key:
                best, best_key = cand, key
        return best


def build_cases(src: Source, pool: Pool) -> list[Case]:
    """The cases a source yields, in :data:`KINDS` order (kinds whose rule does not apply
    are left out)."""
    out = []
    for kind in KINDS.values():
        made = kind.make(src, pool)
        if made is None:
            continue
        answer, rule = made
        if not answer.strip():
            continue
        out.append(Case(src.id, kind.kind, kind.true_label, answer, rule))
    return out


def case_messages(src: Source, case: Case) -> list[dict]:
    """The judge prompt of a case: exactly the prompt of a real run (question, gold, answer);
    nothing about the case's kind or label."""
    return jd.messages(src.question, src.answer, case.answer)
