"""Neural routers (paper Tab. 18, App. D.2), in torch on the CPU.

Every model starts from the same dimension-aligned input (:class:`QCInput`): the query input
(a frozen text encoder's embedding, standardised on the training fold) → linear → 64-d, and
the six corpus indicators → per-indicator bins (edges from the training fold) → a learnt 16-d
embedding each → concatenated (96-d) → linear → 64-d; Q+C is the 128-d concatenation.

* ``dnn``: 256 → 128 → classes, batch norm + ReLU + dropout, cross-entropy.
* ``two_tower``: a query tower (input → 128 → 64) and a learnt embedding per paradigm;
  score = cosine(query, paradigm) / τ, cross-entropy.
* ``adaptive_rag``: Adaptive-RAG's query-complexity classifier (Jeong et al., 2024) is a
  fine-tuned LM. Here "an LM classifier adapted to Q+C" is: the *frozen* LM sentence encoding
  (MiniLM mean pooling) passes a trainable residual bottleneck adapter (Houlsby-style,
  d → 64 → d, zero-initialised up-projection) and a 64-d projection; the corpus embedding then
  modulates it feature-wise (FiLM: h·(1+γ(c)) + β(c)) before a linear classification head.
  Only the adapter and head are trained, so it fits CPU time; fine-tuning the whole LM is not
  done. Without Q it reduces to a head on the corpus embedding; without C, to the adapted LM.
* ``mba_rag``: MBA-RAG (Xu et al., 2024) as a contextual bandit. Arms = the paradigms plus
  ``cannot_answer`` (abstain). A reward MLP scores (context, arm embedding). Training sees only
  the reward of the arm it pulls (ε-greedy with decaying ε, or UCB on arm pull counts); reward =
  correct − ``cost_weight`` · tokens / token_scale (token_scale = the largest mean paradigm
  cost in the fold; abstaining earns 0). Early stopping on the mean reward of the greedy
  policy on a validation split. Probabilities = softmax(predicted reward / 0.1).
* ``router_dc``: RouterDC (Chen et al., 2024): an encoder (input → 128 → 64) and learnt
  paradigm embeddings; a sample–paradigm contrastive loss (positives = the label plus up to
  ``k_pos − 1`` further paradigms judged correct, by F1; negatives = every other class) plus
  λ × a sample–sample contrastive loss (k-means clusters of the training inputs; per anchor one
  in-batch positive from its cluster, negatives from other clusters). Score = cosine / τ.

All: AdamW, batch 256, at most ``epochs`` epochs with early stopping (patience) on a stratified
10 % validation split of the training fold, best weights restored; seeded torch/NumPy
generators, so a fit is reproducible on the CPU. ``torch.set_num_threads(threads)`` with
``threads=1`` by default: these models are tiny (batches of 256 × ≤ 384 inputs), and on the
2-core machine 2 intra-op threads made fits 10–15× *slower* whenever anything else was running
(OpenMP threads spin-waiting for a core); pass ``threads=2`` to use both cores.
"""

from __future__ import annotations

import contextlib
import copy

from abc import abstractmethod

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from ragrouter.routers.base import Router
from ragrouter.routers.dataset import CANNOT_ANSWER, paradigms_of
from ragrouter.routers.features import Binner, Features


class QueryProjector(nn.Module):
    def __init__(self, dq: int, d: int = 64):
        super().__init__()
        self.proj = nn.Linear(dq, d)

    def forward(self, q):
        return self.proj(q)


class CorpusEmbedder(nn.Module):
    """One learnt ``d_bin``-d embedding per (indicator, bin), concatenated, projected to ``d``."""

    def __init__(self, bin_sizes: list[int], d_bin: int = 16, d: int = 64):
        super().__init__()
        self.embs = nn.ModuleList(nn.Embedding(n, d_bin) for n in bin_sizes)
        self.proj = nn.Linear(d_bin * len(bin_sizes), d)

    def forward(self, cbins):
        return self.proj(torch.cat([e(cbins[:, j]) for j, e in enumerate(self.embs)], dim=1))


class QCInput(nn.Module):
    """The 64-d (Q or C) or 128-d (Q+C) input representation."""

    def __init__(self, dq: int | None, bin_sizes: list[int] | None, d: int = 64, d_bin: int = 16):
        super().__init__()
        self.q = QueryProjector(dq, d) if dq else None
        self.c = CorpusEmbedder(bin_sizes, d_bin, d) if bin_sizes else None
        self.out_dim = d * ((self.q is not None) + (self.c is not None))

    def forward(self, q, c):
        parts = []
        if self.q is not None:
            parts.append(self.q(q))
        if self.c is not None:
            parts.append(self.c(c))
        return torch.cat(parts, dim=1)


@contextlib.contextmanager
def torch_threads(n: int):
    """Run with ``n`` torch intra-op threads, restoring the previous setting afterwards."""
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _stratified_split(y: np.ndarray, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, val): ``fraction`` of each class (at least one when it has ≥ 2 rows)."""
    val = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        k = int(round(fraction * len(idx)))
        if len(idx) >= 2:
            k = max(k, 1)
        val.extend(rng.permutation(idx)[:k])
    val = np.sort(np.asarray(val, dtype=int))
    train = np.setdiff1d(np.arange(len(y)), val)
    return train, val


class NeuralRouter(Router):
    """Shared plumbing: input preparation, the training loop, early stopping, prediction."""

    family = "neural"
    uses_text_encoder = True
    defaults: dict = dict(d=64, d_bin=16, epochs=40, patience=6, batch_size=256, lr=2e-3,
                          weight_decay=1e-4, val_fraction=0.1, threads=1, n_bins=10)

    def __init__(self, seed: int = 0, **params):
        merged = {**self.defaults, **params}
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            raise TypeError(f"router {self.name!r}: unknown parameter {unknown[0]!r} (known: {', '.join(sorted(self.defaults))})")
        super().__init__(seed, **merged)

    # -- inputs ---------------------------------------------------------------------------
    def _prepare(self, X: Features, fit: bool) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        if fit:
            self.feature_set_ = X.feature_set
            self.use_q_, self.use_c_ = X.use_q, X.use_c
        elif X.feature_set != self.feature_set_:
            raise ValueError(f"router {self.name!r} was fitted on feature set {self.feature_set_!r}, got {X.feature_set!r}")
        if self.use_q_:
            q = X.q_dense()
            if fit:
                self.q_mean_ = q.mean(axis=0)
                self.q_std_ = q.std(axis=0) + 1e-6
                self.dq_ = q.shape[1]
            elif q.shape[1] != self.dq_:
                raise ValueError(f"router {self.name!r} was fitted on {self.dq_}-d query inputs, got {q.shape[1]}-d")
            out["q"] = torch.from_numpy(((q - self.q_mean_) / self.q_std_).astype(np.float32))
        if self.use_c_:
            if fit:
                self.binner_ = Binner(self.params["n_bins"]).fit(X.c_raw)
            out["c"] = torch.from_numpy(self.binner_.transform(X.c_raw))
        return out

    def _input(self) -> QCInput:
        return QCInput(self.dq_ if self.use_q_ else None, self.binner_.sizes if self.use_c_ else None,
                       self.params["d"], self.params["d_bin"])

    # -- hooks ----------------------------------------------------------------------------
    @abstractmethod
    def _build(self) -> nn.Module:
        """The torch module of this router."""

    def _logits(self, module: nn.Module, batch: dict) -> torch.Tensor:
        return module(batch.get("q"), batch.get("c"))

    def _extra(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> dict[str, torch.Tensor]:
        """Per-row training targets besides the label (rewards, positive masks, clusters)."""
        return {}

    def _loss(self, module: nn.Module, batch: dict, epoch: int) -> torch.Tensor:
        return F.cross_entropy(self._logits(module, batch), batch["y"])

    def _val_score(self, module: nn.Module, batch: dict) -> float:
        """Higher is better; default: minus the validation cross-entropy."""
        return -float(F.cross_entropy(self._logits(module, batch), batch["y"]))

    def _early_stop_from(self) -> int:
        return 0

    # -- fit / predict --------------------------------------------------------------------
    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        with torch_threads(self.params["threads"]):
            self._train(X, y, meta)

    def _train(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        p = self.params
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        data = self._prepare(X, fit=True)
        if len(self.classes_) == 1:  # nothing to learn; predict_proba returns the one class
            self.module_, self.history_, self.epochs_run_ = None, [], 0
            return
        data.update(self._extra(X, y, meta))
        data["y"] = torch.from_numpy(np.searchsorted(self.classes_, y).astype(np.int64))
        self.module_ = self._build()
        tr, va = _stratified_split(y, p["val_fraction"], rng)
        if len(va) == 0 or len(tr) < 2:
            tr, va = np.arange(len(y)), np.arange(len(y))
        val_batch = {k: v[torch.from_numpy(va)] for k, v in data.items()}
        opt = torch.optim.AdamW(self.module_.parameters(), lr=p["lr"], weight_decay=p["weight_decay"], foreach=True)
        best, best_state, bad = -np.inf, copy.deepcopy(self.module_.state_dict()), 0
        self.history_ = []
        bs = int(p["batch_size"])
        for epoch in range(int(p["epochs"])):
            self.module_.train()
            order = tr[rng.permutation(len(tr))]
            for start in range(0, len(order), bs):
                idx = order[start:start + bs]
                if len(idx) < 2:  # batch norm needs two rows
                    continue
                ti = torch.from_numpy(idx)
                batch = {k: v[ti] for k, v in data.items()}
                loss = self._loss(self.module_, batch, epoch)
                opt.zero_grad()
                loss.backward()
                opt.step()
            self.module_.eval()
            with torch.no_grad():
                score = self._val_score(self.module_, val_batch)
            self.history_.append(score)
            if epoch < self._early_stop_from():
                best, best_state = score, copy.deepcopy(self.module_.state_dict())
                continue
            if score > best + 1e-5:
                best, best_state, bad = score, copy.deepcopy(self.module_.state_dict()), 0
            else:
                bad += 1
                if bad >= p["patience"]:
                    break
        self.module_.load_state_dict(best_state)
        self.module_.eval()
        self.epochs_run_ = len(self.history_)

    def _predict_proba(self, X: Features) -> np.ndarray:
        if len(self.classes_) == 1:
            return np.ones((len(X), 1))
        batch = self._prepare(X, fit=False)
        self.module_.eval()
        with torch_threads(self.params["threads"]), torch.no_grad():
            return torch.softmax(self._logits(self.module_, batch), dim=1).double().numpy()


# ------------------------------------------------------------------------------------------
class _DNN(nn.Module):
    def __init__(self, inp: QCInput, n_classes: int, dropout: float):
        super().__init__()
        self.inp = inp
        self.net = nn.Sequential(
            nn.Linear(inp.out_dim, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(128, n_classes),
        )

    def forward(self, q, c):
        return self.net(self.inp(q, c))


class DNNRouter(NeuralRouter):
    """3-layer MLP 256 → 128 → classes with batch norm."""

    name = "dnn"
    defaults = {**NeuralRouter.defaults, "dropout": 0.1}

    def _build(self):
        return _DNN(self._input(), len(self.classes_), self.params["dropout"])


# ------------------------------------------------------------------------------------------
class _TwoTower(nn.Module):
    def __init__(self, inp: QCInput, n_classes: int, d: int, tau: float):
        super().__init__()
        self.inp = inp
        self.tower = nn.Sequential(nn.Linear(inp.out_dim, 128), nn.ReLU(), nn.Linear(128, d))
        self.paradigms = nn.Embedding(n_classes, d)
        self.tau = tau

    def embed(self, q, c):
        return F.normalize(self.tower(self.inp(q, c)), dim=1)

    def forward(self, q, c):
        return self.embed(q, c) @ F.normalize(self.paradigms.weight, dim=1).T / self.tau


class TwoTowerRouter(NeuralRouter):
    """Query tower + learnt paradigm embeddings, cosine / τ scoring."""

    name = "two_tower"
    defaults = {**NeuralRouter.defaults, "tau": 0.1}

    def _build(self):
        return _TwoTower(self._input(), len(self.classes_), self.params["d"], self.params["tau"])


# ------------------------------------------------------------------------------------------
class _AdaptiveRAG(nn.Module):
    def __init__(self, dq: int | None, bin_sizes: list[int] | None, n_classes: int, d: int, d_bin: int,
                 bottleneck: int, dropout: float):
        super().__init__()
        self.use_q, self.use_c = dq is not None, bin_sizes is not None
        if self.use_q:
            self.down = nn.Linear(dq, bottleneck)
            self.up = nn.Linear(bottleneck, dq)
            nn.init.zeros_(self.up.weight)
            nn.init.zeros_(self.up.bias)
            self.proj = nn.Linear(dq, d)
            self.norm = nn.LayerNorm(d)
        if self.use_c:
            self.corpus = CorpusEmbedder(bin_sizes, d_bin, d)
            if self.use_q:
                self.film = nn.Linear(d, 2 * d)
        self.head = nn.Sequential(nn.ReLU(), nn.Dropout(dropout), nn.Linear(d, n_classes))

    def forward(self, q, c):
        if self.use_q:
            q = q + self.up(F.gelu(self.down(q)))  # residual adapter on the frozen LM encoding
            h = self.norm(self.proj(q))
            if self.use_c:
                gamma, beta = self.film(self.corpus(c)).chunk(2, dim=1)
                h = h * (1 + gamma) + beta
        else:
            h = self.corpus(c)
        return self.head(h)


class AdaptiveRAGRouter(NeuralRouter):
    """Frozen LM encoding + residual adapter, FiLM-conditioned on the corpus embedding, linear head."""

    name = "adaptive_rag"
    defaults = {**NeuralRouter.defaults, "bottleneck": 64, "dropout": 0.1}

    def _build(self):
        return _AdaptiveRAG(self.dq_ if self.use_q_ else None, self.binner_.sizes if self.use_c_ else None,
                            len(self.classes_), self.params["d"], self.params["d_bin"],
                            self.params["bottleneck"], self.params["dropout"])


# ------------------------------------------------------------------------------------------
class _RewardMLP(nn.Module):
    def __init__(self, inp: QCInput, n_arms: int, d_arm: int = 16):
        super().__init__()
        self.inp = inp
        self.arms = nn.Embedding(n_arms, d_arm)
        self.net = nn.Sequential(nn.Linear(inp.out_dim + d_arm, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, q, c):
        x = self.inp(q, c)  # (B, D)
        B, A = x.shape[0], self.arms.num_embeddings
        pairs = torch.cat([x[:, None, :].expand(B, A, x.shape[1]), self.arms.weight[None].expand(B, A, -1)], dim=2)
        return self.net(pairs).squeeze(-1)  # (B, A) predicted rewards


def outcome_matrix(meta: pd.DataFrame, classes: np.ndarray, router: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(correct, tokens, f1) arrays of shape (n, len(classes)) aligned to ``classes``;
    ``cannot_answer`` (or any non-paradigm class) has zeros."""
    if meta is None:
        raise ValueError(f"router {router!r} needs meta with 'correct__<paradigm>', 'tokens__<paradigm>' and 'f1__<paradigm>' columns")
    paradigms = set(paradigms_of(meta))
    n = len(meta)
    out = [np.zeros((n, len(classes))) for _ in range(3)]
    for k, cls in enumerate(classes):
        if cls in paradigms:
            for arr, prefix in zip(out, ("correct__", "tokens__", "f1__")):
                if prefix + cls not in meta.columns:
                    raise ValueError(f"router {router!r}: meta lacks column {prefix + cls!r}")
                arr[:, k] = meta[prefix + cls].to_numpy(float)
    return out[0], out[1], out[2]


class MBARAGRouter(NeuralRouter):
    """Contextual multi-armed bandit with a reward MLP (ε-greedy or UCB exploration)."""

    name = "mba_rag"
    defaults = {**NeuralRouter.defaults, "epochs": 40, "exploration": "epsilon", "eps_start": 1.0, "eps_min": 0.05,
                "decay_epochs": 10, "ucb_c": 0.5, "cost_weight": 0.05, "temperature": 0.1}

    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        if self.params["exploration"] not in ("epsilon", "ucb"):
            raise ValueError(f"router 'mba_rag': exploration must be 'epsilon' or 'ucb' (got {self.params['exploration']!r})")
        if meta is None:
            outcome_matrix(None, self.classes_, self.name)  # raises the clear error
        arms = sorted(set(paradigms_of(meta)) | {CANNOT_ANSWER} | set(self.classes_))
        self.classes_ = np.asarray(arms)
        self._pulls = np.ones(len(arms))
        super()._fit(X, y, meta)

    def _extra(self, X, y, meta):
        correct, tokens, _ = outcome_matrix(meta, self.classes_, self.name)
        paradigm_cols = [k for k, c in enumerate(self.classes_) if c in set(paradigms_of(meta))]
        self.token_scale_ = float(max(tokens[:, paradigm_cols].mean(axis=0).max(), 1.0))
        reward = correct - self.params["cost_weight"] * tokens / self.token_scale_
        return {"reward": torch.from_numpy(reward.astype(np.float32))}

    def _build(self):
        return _RewardMLP(self._input(), len(self.classes_))

    def _logits(self, module, batch):
        return module(batch.get("q"), batch.get("c")) / self.params["temperature"]

    def _loss(self, module, batch, epoch):
        pred = module(batch.get("q"), batch.get("c"))
        B, A = pred.shape
        with torch.no_grad():
            if self.params["exploration"] == "epsilon":
                p = self.params
                eps = max(p["eps_min"], p["eps_start"] * (1.0 - epoch / max(p["decay_epochs"], 1)))
                greedy = pred.argmax(dim=1)
                explore = torch.rand(B) < eps
                arm = torch.where(explore, torch.randint(0, A, (B,)), greedy)
            else:
                t = self._pulls.sum()
                bonus = torch.from_numpy(self.params["ucb_c"] * np.sqrt(np.log(t) / self._pulls)).float()
                arm = (pred + bonus[None, :]).argmax(dim=1)
            self._pulls += np.bincount(arm.numpy(), minlength=A)
        chosen = pred.gather(1, arm[:, None]).squeeze(1)
        observed = batch["reward"].gather(1, arm[:, None]).squeeze(1)  # bandit feedback: pulled arm only
        return F.mse_loss(chosen, observed)

    def _val_score(self, module, batch):
        pred = module(batch.get("q"), batch.get("c"))
        return float(batch["reward"].gather(1, pred.argmax(dim=1, keepdim=True)).mean())

    def _early_stop_from(self) -> int:
        return int(self.params["decay_epochs"]) if self.params["exploration"] == "epsilon" else 0


# ------------------------------------------------------------------------------------------
class _DCEncoder(nn.Module):
    def __init__(self, inp: QCInput, n_classes: int, d: int, tau: float):
        super().__init__()
        self.inp = inp
        self.enc = nn.Sequential(nn.Linear(inp.out_dim, 128), nn.ReLU(), nn.Linear(128, d))
        self.paradigms = nn.Embedding(n_classes, d)
        self.tau = tau

    def embed(self, q, c):
        return F.normalize(self.enc(self.inp(q, c)), dim=1)

    def forward(self, q, c):
        return self.embed(q, c) @ F.normalize(self.paradigms.weight, dim=1).T / self.tau


class RouterDCRouter(NeuralRouter):
    """Dual contrastive learning: sample–paradigm + λ · sample–sample (cluster) losses."""

    name = "router_dc"
    defaults = {**NeuralRouter.defaults, "tau": 0.1, "tau_ss": 0.2, "lambda_ss": 1.0, "k_pos": 2, "n_clusters": 8}

    def _extra(self, X, y, meta):
        from sklearn.cluster import KMeans

        K = len(self.classes_)
        label_idx = np.searchsorted(self.classes_, y)
        pos = np.zeros((len(y), K), dtype=bool)
        pos[np.arange(len(y)), label_idx] = True
        if meta is not None and self.params["k_pos"] > 1 and paradigms_of(meta):
            correct, _, f1 = outcome_matrix(meta, self.classes_, self.name)
            score = np.where(correct > 0, f1, -np.inf)
            score[np.arange(len(y)), label_idx] = np.inf  # the label first
            order = np.argsort(-score, axis=1)[:, : int(self.params["k_pos"])]
            extra = np.zeros_like(pos)
            np.put_along_axis(extra, order, True, axis=1)
            pos |= extra & (correct > 0) & (y != CANNOT_ANSWER)[:, None]
        # clusters of the fixed training inputs (standardised query input, one-hot bins)
        views = []
        if self.use_q_:
            q = X.q_dense()
            views.append((q - self.q_mean_) / self.q_std_)
        if self.use_c_:
            bins = self.binner_.transform(X.c_raw)
            views.extend(np.eye(s, dtype=np.float32)[bins[:, j]] for j, s in enumerate(self.binner_.sizes))
        inp = np.hstack(views)
        k = int(max(2, min(self.params["n_clusters"], len(y) // 10, len(np.unique(inp, axis=0)))))
        clusters = KMeans(n_clusters=k, n_init=3, random_state=self.seed).fit_predict(inp)
        return {"pos": torch.from_numpy(pos), "cluster": torch.from_numpy(clusters.astype(np.int64))}

    def _build(self):
        return _DCEncoder(self._input(), len(self.classes_), self.params["d"], self.params["tau"])

    def _loss(self, module, batch, epoch):
        z = module.embed(batch.get("q"), batch.get("c"))
        logits = z @ F.normalize(module.paradigms.weight, dim=1).T / module.tau  # (B, K)
        pos = batch["pos"]
        neg_lse = torch.logsumexp(logits.masked_fill(pos, float("-inf")), dim=1, keepdim=True)  # (B, 1)
        per_pos = -(logits - torch.logaddexp(logits, neg_lse))  # -log e^s+ / (e^s+ + Σ e^s-)
        l_sp = ((per_pos * pos).sum(dim=1) / pos.sum(dim=1)).mean()
        # sample–sample: one random in-batch positive from the same cluster, negatives elsewhere
        cl = batch["cluster"]
        B = len(cl)
        sim = z @ z.T / self.params["tau_ss"]
        same = (cl[:, None] == cl[None, :]) & ~torch.eye(B, dtype=torch.bool)
        other = cl[:, None] != cl[None, :]
        valid = same.any(dim=1) & other.any(dim=1)
        if self.params["lambda_ss"] > 0 and valid.any():
            pick = torch.rand(B, B).masked_fill(~same, -1.0).argmax(dim=1)
            s_pos = sim.gather(1, pick[:, None])  # (B, 1)
            s_neg = sim.masked_fill(~other, float("-inf"))
            l_ss = -(s_pos.squeeze(1) - torch.logsumexp(torch.cat([s_pos, s_neg], dim=1), dim=1))
            l_ss = l_ss[valid].mean()
        else:
            l_ss = torch.zeros(())
        return l_sp + self.params["lambda_ss"] * l_ss
