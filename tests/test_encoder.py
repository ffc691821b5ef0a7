"""Tests for ragrouter.llm.encoder (offline all-MiniLM-L6-v2)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ragrouter.llm import encoder as encoder_mod
from ragrouter.llm.encoder import EncoderError, get_encoder, register_encoder


@pytest.fixture(scope="module")
def enc():
    return get_encoder()


def test_offline_env_is_set_on_import():
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_cached_per_process(enc):
    assert get_encoder("all-MiniLM-L6-v2") is enc
    assert enc.name == "all-MiniLM-L6-v2"
    assert enc.dim == 384
    assert enc.max_seq_length == 512
    assert (enc.model_path / "config.json").exists()


def test_shape_dtype_norms(enc):
    texts = ["The cat sat on the mat.", "Quantum chromodynamics describes quarks.", "", "x" * 50]
    vecs = enc.encode(texts, batch_size=2)
    assert vecs.dtype == np.float32
    assert vecs.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    empty = enc.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_batch_composition_does_not_change_vectors(enc):
    a = enc.encode(["Rivers flow into the sea."])
    ab = enc.encode(["Rivers flow into the sea.", "A much longer sentence about the history of the Roman empire."])
    np.testing.assert_allclose(a[0], ab[0], atol=1e-5)


def test_paraphrase_closer_than_unrelated(enc):
    v = enc.encode(
        [
            "The capital of France is Paris.",
            "Paris is France's capital city.",
            "Photosynthesis converts light into chemical energy in plants.",
        ]
    )
    para = float(v[0] @ v[1])
    unrelated = float(v[0] @ v[2])
    assert para > 0.8
    assert unrelated < 0.3
    assert para > unrelated + 0.5


def test_long_text_not_truncated_at_256(enc):
    first = (
        "The river valley was settled by farmers who grew wheat, barley and lentils along the banks. "
        * 12
    )
    second = (
        "Meanwhile, the orbital telescope measured the spectra of distant quasars and galaxies. " * 12
    )
    text = first + second
    n_tokens = enc.count_tokens([text])[0]
    assert n_tokens >= 300, n_tokens
    assert n_tokens <= 510  # the whole text fits in the 512-wordpiece window
    tok = enc._model.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    head = tok.decode(ids[:254])  # what a 256-token window ([CLS] + 254 + [SEP]) would see
    assert enc.count_tokens([head])[0] <= 256
    v_full, v_head = enc.encode([text, head])
    # With the default max_seq_length of 256 both would embed the same wordpieces.
    assert float(v_full @ v_head) < 0.98


def test_600_token_text_differs_from_its_first_256_tokens(enc):
    words = [f"topic{i % 37} item{i}" for i in range(300)]
    text = " ".join(words)
    tok = enc._model.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) >= 600
    head = tok.decode(ids[:254])
    v_full, v_head = enc.encode([text, head])
    assert not np.allclose(v_full, v_head, atol=1e-3)


def test_count_tokens_matches_wordpiece_tokenizer(enc):
    from transformers import AutoTokenizer

    ref = AutoTokenizer.from_pretrained(str(enc.model_path))
    texts = ["hello world", "", "Unbelievably, tokenisation splits words.", "a " * 700]
    expected = [len(ref(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert enc.count_tokens(texts) == expected
    assert expected[0] == 2 and expected[1] == 0 and expected[3] == 700
    assert enc.count_tokens([]) == []


def test_bad_inputs(enc):
    with pytest.raises(TypeError, match="list of strings"):
        enc.encode("not a list")
    with pytest.raises(TypeError, match="#1"):
        enc.encode(["ok", 3])
    with pytest.raises(EncoderError, match="unknown encoder 'nope'.*all-MiniLM-L6-v2"):
        get_encoder("nope")


def test_registry_loader_called_once():
    calls = []

    def loader():
        calls.append(1)
        return object()

    register_encoder("test-dummy", loader)
    try:
        first = get_encoder("test-dummy")
        assert get_encoder("test-dummy") is first
        assert len(calls) == 1
    finally:
        encoder_mod.ENCODERS.pop("test-dummy", None)
        encoder_mod._CACHE.pop("test-dummy", None)


def test_missing_model_folder(tmp_path):
    with pytest.raises(EncoderError, match="config.json missing"):
        encoder_mod.load_sentence_transformer("x", tmp_path)
