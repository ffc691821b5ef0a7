"""The router dataset: one row per (query, generator), its loader, and a synthetic generator.

Shape (a contract shared with the ``router_dataset`` SQL view):

* ``query_id`` (str), ``corpus`` (str), ``generator`` (str),
  ``qtype`` ('factual' | 'reasoning' | 'summary'; the store's name for the query type, in
  every view; a file's older ``query_type`` column is read as ``qtype``), ``query_text`` (str);
* the six corpus indicators :data:`INDICATORS` (float);
* ``label``: a paradigm name, ``'cannot_answer'`` (answerable, but no paradigm got it) or
  ``'unanswerable'`` (the question is marked unanswerable: a refusal is its right answer);
* optional ``unanswerable`` (0/1): the question is marked unanswerable;
* for every paradigm ``p`` of the run: ``correct__p`` (0/1), ``tokens__p`` (int, total tokens
  consumed) and ``f1__p`` (float, semantic F1).

The paradigm set is discovered from the ``correct__*`` columns (:func:`paradigms_of`); nothing
here assumes the paper's five paradigms except :func:`synthetic_dataset`'s default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

QUERY_TYPES: tuple[str, ...] = ("factual", "reasoning", "summary")
INDICATORS: tuple[str, ...] = (
    "lcc_ratio",
    "density",
    "clustering",
    "intrinsic_dim",
    "hubness",
    "avg_distance",
)
CANNOT_ANSWER = "cannot_answer"
UNANSWERABLE = "unanswerable"
NOT_PARADIGMS: tuple[str, ...] = (CANNOT_ANSWER, UNANSWERABLE)
"""Labels that name no paradigm."""
DEFAULT_PARADIGMS: tuple[str, ...] = ("llm_only", "naive", "graph", "hybrid", "iterative")
BASE_COLUMNS: tuple[str, ...] = (
    "query_id",
    "corpus",
    "generator",
    "qtype",
    "query_text",
    *INDICATORS,
    "label",
)
F1_TIEBREAK = 0.01
"""Weight of semantic F1 in the label utility: it only orders paradigms judged correct."""


class RouterDatasetError(ValueError):
    """A router dataset (file or frame) does not have the expected shape."""


def paradigms_of(df: pd.DataFrame) -> list[str]:
    """The paradigm names of a router dataset, in column order, from its ``correct__*`` columns."""
    return [c[len("correct__"):] for c in df.columns if c.startswith("correct__")]


def class_order(df: pd.DataFrame) -> list[str]:
    """All possible labels: the paradigms in column order, then ``cannot_answer``, then
    ``unanswerable`` when the frame has a row with that label (a store without questions
    marked unanswerable keeps the paper's six classes)."""
    extra = [UNANSWERABLE] if "label" in df.columns and (df["label"].astype(str) == UNANSWERABLE).any() else []
    return [*paradigms_of(df), CANNOT_ANSWER, *extra]


def unanswerable_mask(df: pd.DataFrame) -> np.ndarray:
    """Rows whose question is marked unanswerable: the ``unanswerable`` column when the frame
    has one, else the rows labelled ``unanswerable``."""
    if "unanswerable" in df.columns:
        return pd.to_numeric(df["unanswerable"], errors="coerce").fillna(0).to_numpy(float) == 1.0
    if "label" in df.columns:
        return (df["label"].astype(str) == UNANSWERABLE).to_numpy()
    return np.zeros(len(df), dtype=bool)


def validate_router_dataset(df: pd.DataFrame, source: str = "router dataset") -> pd.DataFrame:
    """Check the shape of ``df`` and return a normalised copy (dtypes, string ids).

    Raises :class:`RouterDatasetError` naming ``source`` and the first missing column or bad value.
    """
    if "qtype" not in df.columns and "query_type" in df.columns:  # the name before issue 32
        df = df.rename(columns={"query_type": "qtype"})
    missing = [c for c in BASE_COLUMNS if c not in df.columns]
    if missing:
        raise RouterDatasetError(f"{source}: missing column {missing[0]!r} (required: {', '.join(BASE_COLUMNS)})")
    paradigms = paradigms_of(df)
    if not paradigms:
        raise RouterDatasetError(f"{source}: no 'correct__<paradigm>' columns; cannot discover the paradigm set")
    for p in paradigms:
        for prefix in ("tokens__", "f1__"):
            if prefix + p not in df.columns:
                raise RouterDatasetError(f"{source}: missing column {prefix + p!r} (paradigm {p!r} has 'correct__{p}')")
    if len(df) == 0:
        raise RouterDatasetError(f"{source}: no rows")
    out = df.copy()
    for c in ("query_id", "corpus", "generator", "qtype", "query_text", "label"):
        out[c] = out[c].astype(str)
    bad_types = sorted(set(out["qtype"]) - set(QUERY_TYPES))
    if bad_types:
        raise RouterDatasetError(f"{source}: column 'qtype' has unknown value {bad_types[0]!r} (allowed: {', '.join(QUERY_TYPES)})")
    allowed = set(paradigms) | set(NOT_PARADIGMS)
    bad_labels = sorted(set(out["label"]) - allowed)
    if bad_labels:
        raise RouterDatasetError(f"{source}: column 'label' has value {bad_labels[0]!r}, which is neither a paradigm ({', '.join(paradigms)}) nor {CANNOT_ANSWER!r} nor {UNANSWERABLE!r}")
    numeric = [*INDICATORS, *(f"{k}__{p}" for p in paradigms for k in ("correct", "tokens", "f1"))]
    for c in numeric:
        values = pd.to_numeric(out[c], errors="coerce")
        if values.isna().any():
            row = int(np.flatnonzero(values.isna().to_numpy())[0])
            raise RouterDatasetError(f"{source}: column {c!r} has a missing or non-numeric value at row {row} (query_id {out['query_id'].iloc[row]!r})")
        out[c] = values.astype(float)
    for p in paradigms:
        if not out[f"correct__{p}"].isin([0.0, 1.0]).all():
            raise RouterDatasetError(f"{source}: column 'correct__{p}' must be 0/1")
        out[f"correct__{p}"] = out[f"correct__{p}"].astype(int)
        out[f"tokens__{p}"] = out[f"tokens__{p}"].round().astype(np.int64)
    dup = out.duplicated(["query_id", "generator"])
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise RouterDatasetError(f"{source}: duplicate (query_id, generator) = ({out['query_id'].iloc[row]!r}, {out['generator'].iloc[row]!r})")
    return out.reset_index(drop=True)


def load_router_dataset(path: str | Path) -> pd.DataFrame:
    """Read a labelled router dataset from CSV or Parquet and validate its shape."""
    path = Path(path)
    if not path.exists():
        raise RouterDatasetError(f"{path}: file not found")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            df = pd.read_csv(path, dtype={"query_id": str, "corpus": str, "generator": str, "label": str})
        elif suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        else:
            raise RouterDatasetError(f"{path}: unsupported file type {suffix!r} (use .csv or .parquet)")
    except RouterDatasetError:
        raise
    except Exception as exc:  # pandas/pyarrow parse errors
        raise RouterDatasetError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from exc
    return validate_router_dataset(df, source=str(path))


PARADIGM_ORDER: tuple[str, ...] = (*DEFAULT_PARADIGMS, "iterative_naive")
"""The fixed paradigm order of the oracle's last tie-break (any other paradigm follows by name);
the same order as ``queries/views/121_v_oracle_label.sql``."""


def paradigm_rank(name: str) -> tuple[int, str]:
    """Sort key of the oracle's fixed paradigm order."""
    return (PARADIGM_ORDER.index(name) if name in PARADIGM_ORDER else 100, name)


def best_fixed(rates: dict[str, float], tokens: dict[str, float] | None = None) -> str:
    """The best fixed paradigm — the ONE rule, used by the Best-fixed router (``rates`` = its
    training labels' frequencies) and the report's paired tests (``rates`` = correct rates):
    the highest rate; ties like the oracle's: the fewest mean ``tokens`` (NaN or absent counts
    as the most), then the fixed :data:`PARADIGM_ORDER`. A tie is exact equality of rates."""
    if not rates:
        raise ValueError("best_fixed: no paradigm")
    tokens = tokens or {}

    def cost(p: str) -> float:
        t = tokens.get(p)
        return np.inf if t is None or (isinstance(t, float) and np.isnan(t)) else float(t)

    return min(rates, key=lambda p: (-float(rates[p]), cost(p), paradigm_rank(p)))


def oracle_labels(df: pd.DataFrame, paradigms: Sequence[str] | None = None) -> np.ndarray:
    """The oracle label per row — the ONE rule, equal to the ``v_oracle_label`` view (a property
    test proves it on random stores with many ties and NULLs):

    among the paradigms judged correct (``correct__p`` = 1) that have a semantic F1 (a NaN F1
    never wins), the highest ``f1__p``; ties go to the fewest ``tokens__p`` (total tokens with
    the amortised graph construction; NaN counts as the most), then to the fixed
    :data:`PARADIGM_ORDER`. ``unanswerable`` for a question marked unanswerable
    (:func:`unanswerable_mask`); ``cannot_answer`` when no paradigm is correct; ``None`` when correct
    paradigms exist but none has an F1 yet (undecided; the view's NULL). A NaN ``correct__p``
    (paradigm not run or not judged) counts as not correct.
    """
    paradigms = list(paradigms or paradigms_of(df))
    ranked = sorted(range(len(paradigms)), key=lambda j: paradigm_rank(paradigms[j]))
    correct = df[[f"correct__{p}" for p in paradigms]].to_numpy(float)
    f1 = df[[f"f1__{p}" for p in paradigms]].to_numpy(float)
    tokens = df[[f"tokens__{p}" for p in paradigms]].to_numpy(float)
    is_correct = correct == 1.0  # NaN -> False
    candidate = is_correct & ~np.isnan(f1)
    labels = np.empty(len(df), dtype=object)
    marked = unanswerable_mask(df)
    for i in range(len(df)):
        if marked[i]:
            labels[i] = UNANSWERABLE
            continue
        if not is_correct[i].any():
            labels[i] = CANNOT_ANSWER
            continue
        best = None
        for j in ranked:  # fixed order first, so strict comparisons keep the earlier paradigm
            if not candidate[i, j]:
                continue
            key = (-f1[i, j], tokens[i, j] if not np.isnan(tokens[i, j]) else np.inf)
            if best is None or key < best[0]:
                best = (key, j)
        labels[i] = paradigms[best[1]] if best is not None else None
    return labels


# --------------------------------------------------------------------------------------------
# Synthetic data with planted structure

_DOMAINS = {
    "medical": ["tumour", "chemotherapy", "biopsy", "lymph node", "radiation", "dosage", "symptom", "mammogram", "clinical trial", "immunotherapy"],
    "legal": ["indemnity clause", "licensee", "termination notice", "governing law", "warranty", "arbitration", "liability cap", "assignment", "non-compete", "audit right"],
    "literature": ["the captain", "the colony ship", "the narrator", "the alien envoy", "the old professor", "the mutiny", "the lost planet", "the treaty", "the robot", "the heiress"],
    "history": ["the dynasty", "the treaty of 1648", "the emperor", "the revolution", "the trade route", "the siege", "the parliament", "the plague", "the reformation", "the colony"],
    "science": ["the enzyme", "the galaxy", "the polymer", "the neuron", "the catalyst", "the quasar", "the isotope", "the protein fold", "the superconductor", "the genome"],
    "sports": ["the striker", "the championship", "the coach", "the relay team", "the grand slam", "the transfer", "the stadium", "the marathon", "the league table", "the referee"],
    "finance": ["the bond yield", "the merger", "the central bank", "the hedge fund", "the IPO", "the balance sheet", "the dividend", "the credit rating", "the audit", "the bailout"],
    "geography": ["the river delta", "the glacier", "the archipelago", "the capital city", "the mountain pass", "the rainforest", "the border", "the monsoon", "the plateau", "the strait"],
}
_TEMPLATES = {
    "factual": ["What is {a}?", "Who was responsible for {a}?", "When did {a} happen?", "Which {b} is mentioned with {a}?", "Where is {a} described?"],
    "reasoning": ["How did {a} lead to {b}, and what followed?", "Why does {a} affect {b} after the change?", "What connects {a} and {b} through a third party?", "If {a} had not occurred, how would {b} differ?"],
    "summary": ["Summarize the role of {a} across the text.", "Give an overview of {a} and {b}.", "Describe the main themes involving {a}.", "Summarise everything said about {a} and its consequences."],
}
# mean total tokens per query and paradigm (paper Tab. 2 orders of magnitude); unknown names get 15k
_TOKENS = {"llm_only": 300.0, "naive": 9000.0, "graph": 14000.0, "hybrid": 22000.0, "iterative": 26000.0}
_TYPE_TOKEN_FACTOR = {"factual": 0.8, "reasoning": 1.2, "summary": 1.1}


def _indicator_vector(rng: np.random.Generator) -> dict[str, float]:
    return {
        "lcc_ratio": float(rng.uniform(0.3, 1.0)),
        "density": float(10 ** rng.uniform(-4.5, -2.0)),
        "clustering": float(rng.uniform(0.02, 0.5)),
        "intrinsic_dim": float(rng.uniform(5.0, 30.0)),
        "hubness": float(rng.uniform(0.5, 6.0)),
        "avg_distance": float(rng.uniform(0.55, 1.25)),
    }


def synthetic_dataset(
    n: int = 1000,
    seed: int = 0,
    *,
    n_corpora: int = 6,
    generators: Sequence[str] = ("generator-a",),
    paradigms: Sequence[str] = DEFAULT_PARADIGMS,
    noise: float = 0.1,
    p_best: float = 0.85,
    p_other: float = 0.25,
    p_second: float = 0.5,
    interaction: float = 0.7,
    text_noise: float = 0.5,
    paradigm_bias: dict[str, float] | None = None,
) -> pd.DataFrame:
    """A router dataset of ``n`` queries × ``len(generators)`` rows with planted structure.

    Every (query type, corpus) cell has a *favoured* paradigm (judged correct with probability
    ``p_best``, highest F1) and a runner-up (``p_second``); the others are correct with
    ``p_other``. The favoured paradigm is the arg-max of a random query-type effect plus a
    corpus effect plus an interaction (standard deviation ``interaction``) plus a fixed
    ``paradigm_bias`` (default: LLM-only −1, rarely the best, as in the paper), so neither the query
    type nor the corpus alone determines it and Q+C features carry more signal than Q or C. Each
    corpus has its own indicator vector; a share ``noise`` of the queries draw their outcomes
    from a random cell instead of their own. Generators differ by a quality offset (later
    generators are weaker, so more ``cannot_answer``). Tokens are log-normal around
    paradigm-typical means, scaled per corpus and query type. Query texts come from templates
    per query type filled with corpus vocabulary — from the query's own corpus, or with
    probability ``text_noise`` from a random one, so the text hints at the corpus without giving
    it away. Labels follow :func:`oracle_labels`.
    """
    if n < 1:
        raise ValueError(f"synthetic_dataset: n must be ≥ 1 (got {n})")
    if not 1 <= n_corpora <= len(_DOMAINS):
        raise ValueError(f"synthetic_dataset: n_corpora must be in 1..{len(_DOMAINS)} (got {n_corpora})")
    paradigms = list(paradigms)
    if len(paradigms) < 2:
        raise ValueError("synthetic_dataset: need at least two paradigms")
    rng = np.random.default_rng(seed)
    domains = list(_DOMAINS)[:n_corpora]
    corpora = [f"{d}" for d in domains]
    indicators = {c: _indicator_vector(rng) for c in corpora}
    corpus_token_scale = {c: float(rng.uniform(0.5, 2.5)) for c in corpora}
    P, T = len(paradigms), len(QUERY_TYPES)
    # favoured paradigm per cell = arg-max of a query-type effect + a corpus effect + an
    # interaction: each side alone predicts part of it, both together predict it best
    bias = {"llm_only": -1.0} if paradigm_bias is None else paradigm_bias
    score = (rng.normal(0, 1.0, (T, 1, P)) + rng.normal(0, 1.0, (1, n_corpora, P))
             + rng.normal(0, interaction, (T, n_corpora, P))
             + np.array([bias.get(p, 0.0) for p in paradigms])[None, None, :])
    ranked = np.argsort(-score, axis=2)
    favoured, second = ranked[:, :, 0], ranked[:, :, 1]
    prob = np.full((T, n_corpora, P), p_other)
    hardness = rng.uniform(0.6, 1.0, size=(T, n_corpora))  # some cells are harder
    for t in range(T):
        for c in range(n_corpora):
            prob[t, c, second[t, c]] = p_second
            prob[t, c, favoured[t, c]] = p_best
            prob[t, c] *= hardness[t, c]

    q_type_idx = rng.integers(0, T, size=n)
    q_corpus_idx = rng.integers(0, n_corpora, size=n)
    noisy = rng.random(n) < noise
    cell_t = np.where(noisy, rng.integers(0, T, size=n), q_type_idx)
    cell_c = np.where(noisy, rng.integers(0, n_corpora, size=n), q_corpus_idx)
    vocab = np.where(rng.random(n) < text_noise, rng.integers(0, n_corpora, size=n), q_corpus_idx)
    texts = []
    for i in range(n):
        words = _DOMAINS[domains[vocab[i]]]
        tmpl = _TEMPLATES[QUERY_TYPES[q_type_idx[i]]]
        a, b = rng.choice(len(words), size=2, replace=False)
        texts.append(tmpl[rng.integers(len(tmpl))].format(a=words[a], b=words[b]))

    frames = []
    for g_idx, generator in enumerate(generators):
        quality = 1.0 - 0.15 * g_idx
        rows: dict[str, object] = {
            "query_id": [f"q{i:06d}" for i in range(n)],
            "corpus": [corpora[c] for c in q_corpus_idx],
            "generator": generator,
            "qtype": [QUERY_TYPES[t] for t in q_type_idx],
            "query_text": texts,
        }
        for k in INDICATORS:
            rows[k] = [indicators[corpora[c]][k] for c in q_corpus_idx]
        p_correct = np.clip(prob[cell_t, cell_c] * quality, 0.0, 1.0)  # (n, P)
        correct = (rng.random((n, P)) < p_correct).astype(int)
        is_fav = np.arange(P)[None, :] == favoured[cell_t, cell_c][:, None]
        f1 = np.clip(
            np.where(correct == 1, 0.62 + 0.12 * is_fav, 0.35) + rng.normal(0, 0.06, size=(n, P)),
            0.0, 1.0,
        )
        type_factor = np.array([_TYPE_TOKEN_FACTOR[QUERY_TYPES[t]] for t in q_type_idx])
        corpus_factor = np.array([corpus_token_scale[corpora[c]] for c in q_corpus_idx])
        for j, p in enumerate(paradigms):
            base = _TOKENS.get(p, 15000.0)
            scale = 1.0 if p == "llm_only" else corpus_factor
            tok = base * type_factor * scale * rng.lognormal(0.0, 0.25, size=n)
            rows[f"correct__{p}"] = correct[:, j]
            rows[f"tokens__{p}"] = np.maximum(1, np.round(tok)).astype(np.int64)
            rows[f"f1__{p}"] = f1[:, j]
        frame = pd.DataFrame(rows)
        frame["label"] = oracle_labels(frame, paradigms).astype(str)
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    cols = [*BASE_COLUMNS, *(f"{k}__{p}" for p in paradigms for k in ("correct", "tokens", "f1"))]
    return df[cols]
