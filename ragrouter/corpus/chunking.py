"""Sliding-window chunking (paper App. A.1, Algorithm 1 phase 1, Table 5).

Each document is tokenised with cl100k_base as ``title ⊕ text`` and cut into windows of
``L = 512`` tokens that start every ``L − O = 412`` tokens (``O = 100`` overlap)::

    ptr = 0
    while ptr < len(tokens):
        chunk = decode(tokens[ptr : ptr + L]); ptr += L - O

``⊕`` is ``title + "\\n" + text`` when the title is non-blank, else the text alone (so a
GraphRAG-Bench corpus, which has no title, is chunked exactly as its text: the medical
textbook is 221,495 tokens → 538 chunks, as in the paper). Special-token strings such as
``<|endoftext|>`` are encoded as ordinary text.

Every chunk records its token range and its character range in the combined string, and its
text is exactly ``combined[char_start:char_end]``. That equals ``decode(tokens[a:b])``
whenever the window does not cut a multi-byte character; when a boundary falls inside one
(cl100k can split a character over tokens), the cut character is kept whole in both
neighbouring chunks instead of being turned into U+FFFD as a lossy decode would do.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragrouter.llm import tokens

CHUNK_SIZE = 512
CHUNK_OVERLAP = 100

_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 continuation bytes 10xxxxxx


@dataclass(frozen=True)
class Chunk:
    """One window of a document."""

    index: int
    """0-based position of the chunk in its document."""
    text: str
    """``combined[char_start:char_end]``."""
    token_start: int
    """First token of the window (index into the tokens of the combined string)."""
    token_end: int
    """One past the last token of the window."""
    token_count: int
    """``token_end - token_start`` (≤ the window size; the last window may be shorter)."""
    char_start: int
    """Start of the chunk in the combined string (Python str index, i.e. code points)."""
    char_end: int
    """End (exclusive) of the chunk in the combined string."""


def combine(title: str, text: str) -> str:
    """``title ⊕ text`` of Algorithm 1: ``title + "\\n" + text``, or ``text`` if no title."""
    return f"{title}\n{text}" if title.strip() else text


def window_starts(n_tokens: int, window: int = CHUNK_SIZE, overlap: int = CHUNK_OVERLAP) -> range:
    """Token positions where the windows start (``ptr`` of Algorithm 1)."""
    _check(window, overlap)
    return range(0, max(n_tokens, 0), window - overlap)


def num_chunks(n_tokens: int, window: int = CHUNK_SIZE, overlap: int = CHUNK_OVERLAP) -> int:
    """How many chunks a document of ``n_tokens`` tokens yields."""
    return len(window_starts(n_tokens, window, overlap))


def _check(window: int, overlap: int) -> None:
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(f"chunk window must be a positive integer, got {window!r}")
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 0 <= overlap < window:
        raise ValueError(f"chunk overlap must be an integer in [0, window={window}), got {overlap!r}")


def chunk_text(title: str, text: str, window: int = CHUNK_SIZE, overlap: int = CHUNK_OVERLAP,
               enc=None) -> list[Chunk]:
    """Cut ``title ⊕ text`` into overlapping token windows (see the module docstring).

    ``enc`` is a tiktoken encoding; default :func:`ragrouter.llm.tokens.encoding` (cl100k_base).
    An empty combined string gives no chunks.
    """
    _check(window, overlap)
    if enc is None:
        enc = tokens.encoding()
    combined = combine(title, text)
    try:
        raw = combined.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"text has an unpaired surrogate at character {exc.start}; it cannot be tokenised losslessly"
        ) from None
    ids = enc.encode(combined, disallowed_special=())
    if not ids:
        return []
    token_bytes = enc.decode_tokens_bytes(ids)

    # first_char[i]: index of the character holding token i's first byte;
    # starts_inside[i]: token i begins with a continuation byte (it splits a character).
    first_char: list[int] = []
    starts_inside: list[bool] = []
    n_chars = n_bytes = 0
    for tb in token_bytes:
        inside = 0x80 <= tb[0] < 0xC0
        starts_inside.append(inside)
        first_char.append(n_chars - 1 if inside else n_chars)
        n_chars += len(tb.translate(None, _CONTINUATION))
        n_bytes += len(tb)
    if n_bytes != len(raw) or n_chars != len(combined):  # tiktoken round-trips valid text
        raise ValueError("tokens do not round-trip to the text; cannot compute character offsets")

    n = len(ids)
    chunks = []
    for index, start in enumerate(window_starts(n, window, overlap)):
        end = min(start + window, n)
        char_start = first_char[start]
        if end == n:
            char_end = len(combined)
        else:
            char_end = first_char[end] + 1 if starts_inside[end] else first_char[end]
        chunks.append(Chunk(index, combined[char_start:char_end], start, end, end - start,
                            char_start, char_end))
    return chunks
