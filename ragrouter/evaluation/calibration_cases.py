"""Calibration cases: candidate answers whose true label is known by construction.

The text helpers and case makers of :mod:`ragrouter.evaluation.calibration`. From an imported
query with a gold answer (:class:`Source`) they make candidate answers (:class:`Case`) by fixed
rules — no LLM is involved in making them — and give the judge prompt of a case.

Case kinds (:data:`KINDS`, a plain dict registry: kind → true label and maker). A kind whose
rule does not apply to a source is left out for it, so short golds ("5:30 PM") still yield
cases (gold, paraphrase, refusal, coarsened, other_gold, altered).
    ``gold``          correct     the gold answer itself.
    ``paraphrase``    correct     the gold behind a fixed lead-in (``"In short: …"``), with
                                  meaning-preserving swaps of phrasing words (:data:`SWAPS`,
                                  e.g. "such as" → "like", "typically" → "usually"). Content
                                  words, numbers, names and negations are never touched.
    ``extra_clause``  correct     the gold plus a true sentence from the source's own evidence
                                  or supporting documents (4–40 words, not already said by the
                                  gold): a right answer with extra true detail. Skipped when
                                  the source has no evidence text.
    ``refusal``       incomplete  a refusal (:data:`REFUSALS`, e.g. "I cannot answer"); the
                                  judge prompt defines refusals as incomplete (and the judge
                                  stage's rule labels them so without a call).
    ``first_clause``  incomplete  the gold cut to its first clause: the first sentence of a
                                  multi-sentence gold, else the text before the first clause
                                  boundary (``;``, ``,``, " because ", " but ", " which ",
                                  " and ", …). Only made when the cut keeps ≥ 3 words and
                                  drops ≥ 2 content words that the kept part does not contain.
    ``coarsened``     incomplete  the gold with its most precise figure made less precise
                                  (:func:`coarsen`): a time loses its minutes ("5:30 PM" →
                                  "5 PM"), a full date its day ("March 4, 2021" → "March
                                  2021"), a year becomes its decade ("1994" → "the 1990s"), a
                                  decimal or a number ≥ 20 is rounded ("3.75" → "about 4",
                                  "27" → "about 30"). Skipped when the gold has no figure.
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

Questions marked unanswerable (``queries.unanswerable``) yield only these two (a refusal is
their correct answer; the judge's rule decides them without a model call):
    ``unanswerable_refusal`` correct    a refusal (:data:`REFUSALS`).
    ``unanswerable_answer``  incorrect  another query's gold, stated as the answer: a
                                        hallucination.

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
from ragrouter.common.sentences import split_sentences
from ragrouter.evaluation.words import content_words, jaccard

VERSION = "calib-v2"
"""Construction version: the ``generator`` of case runs. Bump it when a rule changes.
v2: extra_clause, coarsened and the unanswerable kinds; short golds yield cases (issue 30)."""


# --------------------------------------------------------------------------- text helpers

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
    context: tuple[str, ...] = ()
    """Evidence text of the source (the dataset's evidence, else its supporting documents)."""
    unanswerable: bool = False
    """The source question is marked unanswerable (a refusal is its correct answer)."""


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


EXTRA_MIN_WORDS, EXTRA_MAX_WORDS = 4, 40


def extra_clause(gold: str, context: Iterable[str]) -> tuple[str, str] | None:
    """(gold + a true sentence, rule): the first sentence of the context texts with 4–40 words
    that the gold does not already say (it adds a content word the gold lacks) and that is not
    a refusal; None when there is none."""
    gold = gold.strip()
    own = content_words(gold)
    for i, txt in enumerate(context):
        for sent in split_sentences(str(txt)):
            sent = sent.strip()
            words = sent.split()
            if not EXTRA_MIN_WORDS <= len(words) <= EXTRA_MAX_WORDS or not (content_words(sent) - own):
                continue
            if jd.is_refusal(sent) or sent.lower() in gold.lower():
                continue
            if not sent.endswith((".", "!", "?")):
                sent += "."
            head = gold if gold.endswith((".", "!", "?")) else gold + "."
            return f"{head} {sent}", f"gold plus a sentence of evidence text {i + 1}"
    return None


def make_extra_clause(src: Source, pool: "Pool") -> tuple[str, str] | None:
    return extra_clause(src.answer, src.context)


_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December"
           "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
_TIME_RE = re.compile(r"\b(\d{1,2}):([0-5]\d)(?::[0-5]\d)?(\s*[AaPp]\.?\s?[Mm]\.?)?(?!\d)")
_DATE_MDY_RE = re.compile(rf"\b({_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_DATE_DMY_RE = re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTHS})\.?,?\s+(\d{{4}})\b")
_DATE_ISO_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DATE_MD_RE = re.compile(rf"\b({_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?!,?\s*\d)")
_YEAR_RE = re.compile(r"(?<![\w.,])(1[5-9]\d\d|20\d\d)(?![\w.,]\d|\w)")
_DECIMAL_RE = re.compile(r"(?<![\w.,])(\d+)\.(\d+)(?![\w.]\d|\d)")
_INT_RE = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d{2,})(?![\w.,]\d|\d)")


def _round_coarse(value: int) -> int:
    """``value`` rounded to its leading digit (27 → 30, 1,234 → 1,000, 150 → 200)."""
    mag = 10 ** (len(str(value)) - 1)
    return int((value + mag // 2) // mag * mag)


def coarsen(gold: str) -> tuple[str, str] | None:
    """(the gold with its most precise figure made less precise, rule) or None (no figure):
    the first rule that applies, in this order — time, full date, month and day, year,
    decimal, whole number ≥ 20."""
    m = _TIME_RE.search(gold)
    if m and m.group(2) != "00":
        hour = str(int(m.group(1)))
        ampm = m.group(3)
        new = f"{hour} {ampm.strip().upper().replace('.', '').replace(' ', '')}" if ampm else f"about {hour} o'clock"
        return gold[:m.start()] + new + gold[m.end():], f"time '{m.group(0).strip()}' without its minutes"
    for pattern in (_DATE_MDY_RE, _DATE_DMY_RE):
        m = pattern.search(gold)
        if m:
            return (gold[:m.start()] + f"{m.group(1)} {m.group(2)}" + gold[m.end():],
                    f"date '{m.group(0)}' without its day")
    m = _DATE_ISO_RE.search(gold)
    if m:
        return gold[:m.start()] + m.group(1) + gold[m.end():], f"date '{m.group(0)}' as its year"
    m = _DATE_MD_RE.search(gold)
    if m:
        return gold[:m.start()] + m.group(1) + gold[m.end():], f"date '{m.group(0)}' without its day"
    m = _YEAR_RE.search(gold)
    if m:
        year = int(m.group(1))
        return gold[:m.start()] + f"the {year // 10 * 10}s" + gold[m.end():], f"year {year} as its decade"
    m = _DECIMAL_RE.search(gold)
    if m:
        value = float(m.group(0))
        whole = int(value + 0.5)
        if whole != value:
            return gold[:m.start()] + f"about {whole}" + gold[m.end():], f"{m.group(0)} rounded to {whole}"
    for m in _INT_RE.finditer(gold):
        value = int(m.group(1).replace(",", ""))
        new = _round_coarse(value)
        if value >= 20 and new != value:
            shown = f"{new:,}" if "," in m.group(1) else str(new)
            return gold[:m.start()] + f"about {shown}" + gold[m.end():], f"{m.group(1)} rounded to {shown}"
    return None


def make_coarsened(src: Source, pool: "Pool") -> tuple[str, str] | None:
    return coarsen(src.answer)


def make_unanswerable_refusal(src: Source, pool: "Pool") -> tuple[str, str]:
    out = _pick(REFUSALS, "unanswerable:" + src.external_id)
    return out, f"refusal '{out}' on a question marked unanswerable"


def make_unanswerable_answer(src: Source, pool: "Pool") -> tuple[str, str] | None:
    donor = pool.donor(src)
    if donor is None:
        return None
    return donor.answer.strip(), f"gold answer of query {donor.id} ({donor.external_id}) as a made-up answer"


@dataclasses.dataclass(frozen=True)
class CaseKind:
    kind: str
    true_label: str
    make: Maker
    description: str
    unanswerable: bool = False
    """The kind is made for sources marked unanswerable only (else for answerable ones only)."""


KINDS: dict[str, CaseKind] = {
    "gold": CaseKind("gold", "correct", make_gold, "the gold answer itself"),
    "paraphrase": CaseKind("paraphrase", "correct", make_paraphrase, "the gold behind a lead-in, phrasing words swapped"),
    "extra_clause": CaseKind("extra_clause", "correct", make_extra_clause,
                             "the gold plus a true sentence of its evidence"),
    "refusal": CaseKind("refusal", "incomplete", make_refusal, "a refusal such as 'I cannot answer'"),
    "first_clause": CaseKind("first_clause", "incomplete", make_first_clause, "the gold cut to its first clause"),
    "coarsened": CaseKind("coarsened", "incomplete", make_coarsened,
                          "the gold with its most precise figure made less precise ('5 PM' for '5:30 PM')"),
    "other_gold": CaseKind("other_gold", "incorrect", make_other_gold, "another query's gold answer"),
    "altered": CaseKind("altered", "incorrect", make_altered, "the gold with every sentence contradicted"),
    "unanswerable_refusal": CaseKind("unanswerable_refusal", "correct", make_unanswerable_refusal,
                                     "a refusal on a question marked unanswerable", unanswerable=True),
    "unanswerable_answer": CaseKind("unanswerable_answer", "incorrect", make_unanswerable_answer,
                                    "another query's gold as the answer to a question marked unanswerable "
                                    "(a hallucination)", unanswerable=True),
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
            if cand.unanswerable:  # its gold is a refusal, not an answer
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
    """The cases a source yields, in :data:`KINDS` order (kinds whose rule does not apply,
    or that are made for the other kind of source — answerable or unanswerable — are left
    out)."""
    out = []
    for kind in KINDS.values():
        if kind.unanswerable != bool(src.unanswerable):
            continue
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
