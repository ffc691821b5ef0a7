"""The offline cl100k_base tokenizer (no network)."""

from ragrouter.llm import tokens


def test_hello_world_is_two_tokens_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tk"))
    tokens.encoding.cache_clear()
    try:
        assert tokens.encoding().encode("hello world") == [15339, 1917]
        assert tokens.count("hello world") == 2
        assert (tmp_path / "tk" / tokens.CL100K_URL_SHA1).exists()
    finally:
        tokens.encoding.cache_clear()


def test_special_tokens_are_counted_as_text():
    assert tokens.count("a <|endoftext|> b") > 3
