"""Deterministic, rule-based sentence splitter for the sentence-level metrics (paper App. C.1).

No models and no downloads (NLTK's punkt needs a data download); the same text always gives
the same sentences. The rules, in order:

1. **Lines.** Text is split into lines. A blank line always ends a sentence. A single line
   break also ends one, except for a *hard wrap*: the previous line ends in a lowercase letter,
   digit or comma **and** the next line starts with a lowercase letter (then the lines are
   joined with a space). A line that starts with a list marker (``-``, ``*``, ``+``, ``•``,
   ``1.``, ``2)``, ``(a)``, ``a)``) or a Markdown heading (``#``) always starts a new sentence,
   and the marker is dropped.
2. **Terminators.** Inside a block, a sentence ends after ``.``, ``!``, ``?`` or ``…`` (repeats
   allowed, optionally followed by closing quotes/brackets) when whitespace follows. The CJK
   terminators ``。！？`` end a sentence with or without whitespace. A period with no space after
   it never splits, so decimals (``3.5``), versions (``v1.2.3``), URLs and ``e.g.,`` stay intact.
3. **No split after a period** when the word before it is
   * a known abbreviation (titles such as ``Dr.``, ``Mr.``, ``Prof.``; ``e.g.``, ``i.e.``,
     ``cf.``, ``vs.``, ``viz.``, ``approx.``, ``et al.``; months; see :data:`ABBREVIATIONS`);
   * a number prefix (``No.``, ``Fig.``, ``Eq.``, ``p.``, ``pp.``, ``Vol.``; see
     :data:`NUMBER_ABBREVIATIONS`) and a digit follows (``No. 5``);
   * ``etc.``/``Inc.``/``Ltd.``/``Co.``/``Jr.``/``Sr.`` (:data:`SOFT_ABBREVIATIONS`) unless the
     next word is capitalised;
   * a single letter other than ``I`` (an initial, ``J. K. Rowling``; so ``vitamin C. Next``
     does not split either) or a dotted acronym (``U.S.``, ``a.m.``);
   * or when the next word starts with a lowercase letter (``... approx. three``).
4. Pieces are stripped; pieces without any letter or digit (``"---"``, ``"."``) are dropped.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences", "ABBREVIATIONS", "NUMBER_ABBREVIATIONS", "SOFT_ABBREVIATIONS"]

# Lowercased, without the final period. Never end a sentence after these.
ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof rev hon gen col lt sgt capt cmdr adm gov sen rep pres st mt ft
    e.g eg i.e ie cf vs v viz al approx ca c est dept univ assn op ed eds trans
    jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)
# Abbreviations that precede a number ("No. 5", "Fig. 3", "pp. 10-12"): no split before a digit.
NUMBER_ABBREVIATIONS = frozenset("no nos fig figs eq eqs vol vols ch sec para pp p art".split())
# Usually abbreviations, but commonly sentence-final: end a sentence only before a capital.
SOFT_ABBREVIATIONS = frozenset("etc inc ltd co corp jr sr bros llc plc".split())

_LIST_MARKER = re.compile(
    r"^\s*(?:[-*+•‣◦▪●–—]\s+|\d{1,3}[.)]\s+|\(?[A-Za-z]\)\s+|\(\d{1,3}\)\s+|#{1,6}\s+)"
)
# Candidate boundary: terminators, optional closers, then whitespace (or CJK terminator alone).
_BOUNDARY = re.compile(r"([.!?…]+[\"'”’)\]»]*)(\s+)|([。！？]+[\"'”’)\]」』»]*)\s*")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.'’-]*)$")
_DOTTED_ACRONYM = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")
_HAS_ALNUM = re.compile(r"\w", re.UNICODE)


def _blocks(text: str) -> list[str]:
    """Rule 1: lines → blocks (list items and paragraphs), markers dropped, hard wraps joined."""
    blocks: list[str] = []
    current: list[str] = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.strip()
        if not line:
            if current:
                blocks.append(" ".join(current))
                current = []
            continue
        marker = _LIST_MARKER.match(line)
        if marker:
            line = line[marker.end():].strip()
        continuation = (
            current
            and not marker
            and re.search(r"[a-z0-9,]$", current[-1]) is not None
            and line[:1].islower()
        )
        if current and not continuation:
            blocks.append(" ".join(current))
            current = []
        if line:
            current.append(line)
    if current:
        blocks.append(" ".join(current))
    return blocks


def _is_boundary(block: str, term_start: int, terminators: str, next_start: int) -> bool:
    """Rules 2–3 for a candidate boundary whose terminator run starts at ``term_start``."""
    if "." not in terminators or terminators.strip("."):
        # '!', '?', '…' (possibly mixed with dots, e.g. '?!' or '...') always end a sentence.
        return True
    nxt = block[next_start:next_start + 1]
    if nxt.islower():
        return False
    if len(terminators) > 1:  # an ellipsis "..." before a capital letter / end
        return True
    m = _WORD_BEFORE.search(block[:term_start])
    if not m:
        return True  # e.g. after a digit ("in 2019. Then") or a closing bracket
    word = m.group(1)
    low = word.lower()
    if low in ABBREVIATIONS:
        return False
    if low in NUMBER_ABBREVIATIONS and nxt.isdigit():
        return False
    if (len(word) == 1 and word != "I") or _DOTTED_ACRONYM.match(word):
        return False
    if low in SOFT_ABBREVIATIONS:
        return nxt.isupper()
    return True


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (see the module docstring for the rules).

    >>> split_sentences("Dr. Smith paid $3.5 million, e.g. for land. It rose!\\n- item one\\n- item two")
    ['Dr. Smith paid $3.5 million, e.g. for land.', 'It rose!', 'item one', 'item two']
    """
    if not isinstance(text, str):
        raise TypeError(f"split_sentences expects str, got {type(text).__name__}")
    out: list[str] = []
    for block in _blocks(text):
        start = 0
        for m in _BOUNDARY.finditer(block):
            if m.group(3) is not None:  # CJK terminator
                cut, nxt = m.end(3), m.end()
            else:
                terms = m.group(1)
                run = terms.rstrip("\"'”’)]»")
                if not _is_boundary(block, m.start(1), run, m.end()):
                    continue
                cut, nxt = m.end(1), m.end()
            piece = block[start:cut].strip()
            if piece:
                out.append(piece)
            start = nxt
        tail = block[start:].strip()
        if tail:
            out.append(tail)
    return [s for s in out if _HAS_ALNUM.search(s)]
