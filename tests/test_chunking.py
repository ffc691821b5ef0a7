"""Sliding-window chunking (paper App. A.1, Algorithm 1 phase 1, Table 5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragrouter.corpus.chunking import (
    CHUNK_OVERLAP,
    CHUNK_SIZE,
    Chunk,
    chunk_text,
    combine,
    num_chunks,
    window_starts,
)
from ragrouter.llm import tokens

from tests.conftest import SHARED_DATA as DATA
MEDICAL = DATA / "medical" / "medical.json"
needs_medical = pytest.mark.skipif(not MEDICAL.exists(), reason=f"real data not found at {MEDICAL}")

PARROT = "\U0001f99c"  # 4 UTF-8 bytes; cl100k splits it over several tokens


@pytest.fixture(scope="module")
def enc():
    return tokens.encoding()


def algorithm1(enc, title, text, L=512, O=100):
    """Algorithm 1, phase 1, written out literally: the reference implementation."""
    toks = enc.encode(combine(title, text), disallowed_special=())
    out, ptr = [], 0
    while ptr < len(toks):
        out.append((ptr, min(ptr + L, len(toks)), enc.decode(toks[ptr:ptr + L])))
        ptr += L - O
    return out


def assert_round_trip(title, text, chunks):
    combined = combine(title, text)
    for i, c in enumerate(chunks):
        assert c.index == i
        assert combined[c.char_start:c.char_end] == c.text
        assert c.token_count == c.token_end - c.token_start
    if chunks:
        assert chunks[0].char_start == 0 and chunks[-1].char_end == len(combined)


def test_paper_hyperparameters():
    assert (CHUNK_SIZE, CHUNK_OVERLAP) == (512, 100)
    assert list(window_starts(1300)) == [0, 412, 824, 1236]
    assert num_chunks(221_495) == 538  # the medical textbook (paper Table 4 / App. A.1)
    assert [num_chunks(n) for n in (0, 1, 412, 413, 512, 513, 824, 825)] == [0, 1, 1, 2, 2, 2, 2, 3]


@needs_medical
def test_medical_textbook_gives_538_chunks(enc):
    import json

    text = json.loads(MEDICAL.read_text(encoding="utf-8"))["context"]
    ids = enc.encode(text, disallowed_special=())
    assert len(ids) == 221_495
    chunks = chunk_text("", text, enc=enc)
    assert len(chunks) == 538
    assert [c.token_start for c in chunks] == list(range(0, 221_495, 412))
    assert all(c.token_count == 512 for c in chunks[:-1])
    assert chunks[-1].token_end == 221_495 and chunks[-1].token_count == 221_495 - 537 * 412
    assert_round_trip("", text, chunks)
    # Same windows and texts as the literal Algorithm 1 (no window of this book cuts a character).
    assert [(c.token_start, c.token_end, c.text) for c in chunks] == algorithm1(enc, "", text)


@pytest.mark.parametrize("n_words", [0, 1, 300, 511, 512, 513, 824, 1236, 1237, 3000])
def test_matches_algorithm1_reference(enc, n_words):
    text = " ".join(f"w{i % 97}" for i in range(n_words))  # ASCII: no character can be cut
    title = "A title" if n_words % 2 else ""
    chunks = chunk_text(title, text, enc=enc)
    ref = algorithm1(enc, title, text)
    assert [(c.token_start, c.token_end, c.text) for c in chunks] == ref
    assert_round_trip(title, text, chunks)


def test_title_is_prepended_with_newline(enc):
    chunks = chunk_text("Lothair II", "Lothair II was king.", enc=enc)
    assert len(chunks) == 1 and chunks[0].text == "Lothair II\nLothair II was king."
    assert chunk_text("", "body", enc=enc)[0].text == "body"
    assert chunk_text("  \n", "body", enc=enc)[0].text == "body"  # blank title = no title
    assert chunks[0].token_count == len(enc.encode("Lothair II\nLothair II was king."))


def test_small_window_and_overlap(enc):
    text = "one two three four five six seven eight nine ten"
    chunks = chunk_text("", text, window=4, overlap=1, enc=enc)
    ids = enc.encode(text)
    # ptr = 9 < 10 still starts a window (Algorithm 1), though it lies inside the previous one.
    spans = [(0, 4), (3, 7), (6, 10), (9, 10)]
    assert [(c.token_start, c.token_end) for c in chunks] == spans
    assert [c.text for c in chunks] == [enc.decode(ids[a:b]) for a, b in spans]
    assert chunks[1].text == " four five six seven"


def test_window_boundary_inside_a_multibyte_character(enc):
    ids = enc.encode(PARROT)
    assert len(ids) > 1  # the premise: cl100k cuts this character over tokens
    # Find padding that puts the 512-token boundary inside a parrot.
    for pad in range(505, 515):
        text = "a" + " a" * pad + PARROT * 3 + " tail"
        ids = enc.encode(text)
        if 0x80 <= enc.decode_single_token_bytes(ids[512])[0] < 0xC0:
            break
    else:
        pytest.fail("no padding put the boundary inside the character")
    lossy = enc.decode(ids[:512])
    assert lossy.endswith("\ufffd")  # what a plain decode gives
    chunks = chunk_text("", text, enc=enc)
    assert len(chunks) == 2
    assert_round_trip("", text, chunks)
    first = chunks[0]
    assert "\ufffd" not in first.text and first.text.endswith(PARROT)
    assert first.text.encode().startswith(enc.decode_bytes(ids[:512]))
    # Each window's bytes lie inside its chunk, which adds at most the cut characters' rest.
    for c in chunks:
        window = enc.decode_bytes(ids[c.token_start:c.token_end])
        assert window in c.text.encode() and len(c.text.encode()) - len(window) < 4


def test_one_token_windows_over_split_characters(enc):
    text = f"x{PARROT}é{PARROT}"
    chunks = chunk_text("", text, window=1, overlap=0, enc=enc)
    assert len(chunks) == len(enc.encode(text))
    assert_round_trip("", text, chunks)
    for c in chunks:
        assert "\ufffd" not in c.text and c.text  # a cut character is kept whole, never garbled
    assert {c.text for c in chunks} >= {"x", PARROT}


def test_special_token_text_is_plain_text(enc):
    text = "before <|endoftext|> after <|fim_prefix|>"
    chunks = chunk_text("T", text, enc=enc)
    assert len(chunks) == 1 and chunks[0].text == "T\n" + text
    ids = enc.encode("T\n" + text, disallowed_special=())
    assert 100257 not in ids  # <|endoftext|> is not the special token
    assert chunks[0].token_count == len(ids)


def test_empty_text_gives_no_chunks(enc):
    assert chunk_text("", "", enc=enc) == []


def test_default_encoding_is_cl100k():
    chunks = chunk_text("", "hello world")
    assert chunks == [Chunk(0, "hello world", 0, 2, 2, 0, 11)]


@pytest.mark.parametrize("window,overlap,needle", [
    (0, 0, "window"), (-5, 0, "window"), (512, 512, "overlap"), (512, -1, "overlap"),
    (512.0, 100, "window"), (512, 600, "overlap"),
])
def test_bad_settings(window, overlap, needle):
    with pytest.raises(ValueError, match=needle):
        chunk_text("", "text", window=window, overlap=overlap)


def test_unpaired_surrogate_is_a_clear_error(enc):
    with pytest.raises(ValueError, match="surrogate at character 4"):
        chunk_text("", "abcd\ud800efg", enc=enc)
