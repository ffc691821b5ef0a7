"""The paradigms' hyperparameters, read from the config, and the config hash.

Every value comes from the config (``configs/default.yaml`` sections ``generation``,
``extraction``, ``retrieval``, ``paradigms``; defaults are the paper's Tables 10 and 11);
nothing is hard-coded here. :func:`paradigm_config` returns, for one paradigm, exactly the
settings that can change its output, plus the versions of the prompts it uses and
:data:`ALGORITHM_VERSION`; :func:`config_hash` hashes that dict. The answer stage stores both
(``paradigm_runs.config`` / ``config_hash``), so a changed hyperparameter or an edited prompt
(bump its version in :mod:`ragrouter.paradigms.prompts`) yields new runs instead of reusing
old ones.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from ragrouter.config import Config, ConfigError
from ragrouter.paradigms import prompts

# Bump when a behaviour choice of this library changes results (packing, ordering, fusion,
# accumulation), just as prompt versions are bumped when a prompt changes.
ALGORITHM_VERSION = "paradigms-v1"

BASE_RETRIEVERS = ("naive", "graph")
# GraphRetriever's PPR personalisation over the seeds (``retrieval.seed_weighting``):
# ``similarity`` p_i ∝ sim_i (the paper's eq. 7); ``specificity`` p_i ∝ sim_i / |P_i|, |P_i| the
# chunks node i is extracted from (HippoRAG's node specificity: a hub named by every question
# no longer takes the walk's restart mass; benchmarks/README.md, "Graph seeds that are not hubs")
SEED_WEIGHTINGS = ("similarity", "specificity")
PAPER_SEED_WEIGHTING = "similarity"


@dataclass(frozen=True)
class Settings:
    """All hyperparameters the paradigms read (one frozen snapshot of the config)."""

    # generation (Table 10)
    gen_temperature: float
    gen_max_tokens: int
    # LLM-only (Table 11)
    llm_only_temperature: float
    llm_only_max_tokens: int
    # query entity extraction (GraphRetriever phase 1; extraction settings, Table 5)
    extract_temperature: float
    extract_max_tokens: int
    # retrieval (Tables 10, 11)
    token_budget: int
    top_k: int
    min_similarity: float
    seed_entities: int
    entity_top_k: int
    ppr_alpha: float
    ppr_min_score: float
    ppr_max_nodes: int
    ppr_tol: float | None
    max_triples: int
    rrf_k: int
    # IterativeRAG (Table 11)
    iter_base_retriever: str
    iter_max_rounds: int
    iter_eval_temperature: float
    # which embedder the vectors come from (a different one changes every retrieval)
    embedder: str
    # GraphRetriever seed threshold (Algorithm 4's tau_entity; per embedder model like min_similarity)
    entity_min_similarity: float = 0.4
    # PPR personalisation over the seeds (SEED_WEIGHTINGS)
    seed_weighting: str = PAPER_SEED_WEIGHTING
    # per-call timeouts handed to the gateway (None: the backend's timeout_s); no effect on outputs
    gen_timeout_s: float | None = None
    extract_timeout_s: float | None = None
    # a client's sampling for the answer calls (serve: 'stop', 'seed'); none in the config
    gen_stop: tuple[str, ...] = ()
    gen_seed: int | None = None
    # IterativeRAG's self-evaluation cap when a client's max_tokens replaced the answers' (None: gen_max_tokens)
    eval_max_tokens: int | None = None

    def for_answer(self, *, max_tokens: int | None = None, temperature: float | None = None,
                   stop: tuple[str, ...] | list[str] | None = None, seed: int | None = None) -> "Settings":
        """These settings with a client's generation parameters (serve): ``max_tokens`` and
        ``temperature`` replace the answer calls' (direct and generation; the self-evaluation
        keeps its own cap and temperature), ``stop`` and ``seed`` are sent with them. Each
        changes :func:`config_hash`, so such a run is never mixed with the configured ones."""
        out: dict[str, Any] = {}
        if max_tokens is not None:
            out.update(gen_max_tokens=int(max_tokens), llm_only_max_tokens=int(max_tokens),
                       eval_max_tokens=self.eval_max_tokens or self.gen_max_tokens)
        if temperature is not None:
            out.update(gen_temperature=float(temperature), llm_only_temperature=float(temperature))
        if stop:
            out["gen_stop"] = tuple(stop)
        if seed is not None:
            out["gen_seed"] = int(seed)
        return replace(self, **out) if out else self

    def answer_sampling(self) -> dict:
        """The answer calls' ``stop``/``seed`` keyword arguments for the gateway (only those set)."""
        out: dict[str, Any] = {}
        if self.gen_stop:
            out["stop"] = list(self.gen_stop)
        if self.gen_seed is not None:
            out["seed"] = self.gen_seed
        return out

    @classmethod
    def from_config(cls, config: Config) -> "Settings":
        """Read and check every setting; a bad value raises :class:`ConfigError` naming it."""

        def num(path: str, kind=float, lo: float | None = None, hi: float | None = None, default: Any = ...):
            value = config.get(path, default)
            if value is None and default is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
                raise ConfigError(f"{config.source}: setting '{path}' must be a {'whole ' if kind is int else ''}number, got {value!r}")
            value = kind(value)
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ConfigError(f"{config.source}: setting '{path}' = {value} is outside [{lo}, {hi}]")
            return value

        base = config.get("paradigms.iterative.base_retriever")
        if base not in BASE_RETRIEVERS:
            raise ConfigError(
                f"{config.source}: setting 'paradigms.iterative.base_retriever' must be one of "
                f"{', '.join(BASE_RETRIEVERS)}, got {base!r}"
            )
        weighting = config.get("retrieval.seed_weighting", PAPER_SEED_WEIGHTING)
        if weighting not in SEED_WEIGHTINGS:
            raise ConfigError(
                f"{config.source}: setting 'retrieval.seed_weighting' must be one of "
                f"{', '.join(SEED_WEIGHTINGS)}, got {weighting!r}"
            )
        embedder = config.get("roles.embedder")
        gen_max = num("generation.max_tokens", int, 1)
        embedder_model = str(config.backend(embedder).get("model", embedder)) if embedder else ""

        def per_embedder(path: str) -> float:
            """A number, or a mapping embedder model → number with an optional ``default``."""
            value = config.get(path)
            if isinstance(value, dict):
                if embedder_model in value:
                    value, where = value[embedder_model], f"{path}.{embedder_model}"
                elif "default" in value:
                    value, where = value["default"], f"{path}.default"
                else:
                    raise ConfigError(f"{config.source}: setting '{path}' has no value for embedder model "
                                      f"'{embedder_model}' and no 'default'")
            else:
                where = path
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= value <= 1.0:
                raise ConfigError(f"{config.source}: setting '{where}' must be a number in [-1, 1], got {value!r}")
            return float(value)

        def timeout(path: str) -> float | None:
            value = config.get(path, None)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"{config.source}: setting '{path}' must be a positive number of seconds "
                                  f"or null, got {value!r}")
            return float(value)

        return cls(
            gen_temperature=num("generation.temperature", float, 0.0, 2.0),
            gen_max_tokens=gen_max,
            llm_only_temperature=num("paradigms.llm_only.temperature", float, 0.0, 2.0),
            llm_only_max_tokens=num("paradigms.llm_only.max_tokens", int, 1, default=gen_max),
            extract_temperature=num("extraction.temperature", float, 0.0, 2.0),
            extract_max_tokens=num("extraction.max_tokens", int, 1),
            token_budget=num("retrieval.token_budget", int, 0),
            top_k=num("retrieval.top_k", int, 1),
            min_similarity=per_embedder("retrieval.min_similarity"),
            seed_entities=num("retrieval.seed_entities", int, 1),
            entity_top_k=num("retrieval.entity_top_k", int, 1),
            ppr_alpha=num("retrieval.ppr_alpha", float, 0.0, 1.0),
            ppr_min_score=num("retrieval.ppr_min_score", float, 0.0),
            ppr_max_nodes=num("retrieval.ppr_max_nodes", int, 0),
            ppr_tol=num("retrieval.ppr_tol", float, 0.0, default=None),
            max_triples=num("retrieval.max_triples", int, 0),
            rrf_k=num("retrieval.rrf_k", int, 0),
            iter_base_retriever=base,
            iter_max_rounds=num("paradigms.iterative.max_rounds", int, 0),
            iter_eval_temperature=num("paradigms.iterative.eval_temperature", float, 0.0, 2.0),
            embedder=str(embedder),
            entity_min_similarity=per_embedder("retrieval.entity_min_similarity"),
            seed_weighting=weighting,
            gen_timeout_s=timeout("generation.timeout_s"),
            extract_timeout_s=timeout("extraction.timeout_s"),
        )


def _sampling(s: Settings) -> dict:
    # only when a client set them (serve): the configured runs keep their hash
    return {**({"stop": list(s.gen_stop)} if s.gen_stop else {}),
            **({"seed": s.gen_seed} if s.gen_seed is not None else {})}


def _generation(s: Settings) -> dict:
    return {"temperature": s.gen_temperature, "max_tokens": s.gen_max_tokens, **_sampling(s)}


def _naive(s: Settings) -> dict:
    return {"embedder": s.embedder, "token_budget": s.token_budget, "top_k": s.top_k, "min_similarity": s.min_similarity}


def _graph(s: Settings) -> dict:
    # seed_weighting enters the hash only when it is not the paper's: runs made before the
    # setting existed (which weighted by similarity) keep their hash and are reused, while
    # specificity-weighted runs get a new one and are never mixed with them
    weighting = {} if s.seed_weighting == PAPER_SEED_WEIGHTING else {"seed_weighting": s.seed_weighting}
    return {
        **weighting,
        "embedder": s.embedder,
        "token_budget": s.token_budget,
        "entity_min_similarity": s.entity_min_similarity,
        "seed_entities": s.seed_entities,
        "entity_top_k": s.entity_top_k,
        "ppr_alpha": s.ppr_alpha,
        "ppr_min_score": s.ppr_min_score,
        "ppr_max_nodes": s.ppr_max_nodes,
        "ppr_tol": s.ppr_tol,
        "max_triples": s.max_triples,
        "extract_temperature": s.extract_temperature,
        "extract_max_tokens": s.extract_max_tokens,
    }


# GraphRAG's own context: triples + source sentences, filled greedily (Algorithm 4 phase 3).
# Only the graph paradigm's hash carries it; hybrid and iterative contexts are passages.
GRAPH_CONTEXT_VERSION = "triples+source-sentences-greedy-v1"


def paradigm_config(paradigm: str, config: Config | Settings, *, base_retriever: str | None = None) -> dict:
    """The settings and prompt versions that determine ``paradigm``'s output (JSON-able).

    ``base_retriever`` overrides ``paradigms.iterative.base_retriever`` (``iterative_naive``).
    Unknown paradigm names raise ``KeyError`` naming the known ones.
    """
    s = config if isinstance(config, Settings) else Settings.from_config(config)
    if paradigm == "llm_only":
        params = {"temperature": s.llm_only_temperature, "max_tokens": s.llm_only_max_tokens, **_sampling(s)}
        used = ("direct",)
    elif paradigm == "naive":
        params = {**_generation(s), **_naive(s)}
        used = ("generation",)
    elif paradigm == "graph":
        params = {**_generation(s), **_graph(s), "context": GRAPH_CONTEXT_VERSION}
        used = ("generation", "entities")
    elif paradigm == "hybrid":
        params = {**_generation(s), **_naive(s), **_graph(s), "rrf_k": s.rrf_k}
        used = ("generation", "entities")
    elif paradigm in ("iterative", "iterative_naive"):
        base = base_retriever or ("naive" if paradigm == "iterative_naive" else s.iter_base_retriever)
        if base not in BASE_RETRIEVERS:
            raise ValueError(f"iterative base retriever must be one of {', '.join(BASE_RETRIEVERS)}, got {base!r}")
        params = {
            **_generation(s),
            **(_naive(s) if base == "naive" else _graph(s)),
            "base_retriever": base,
            "max_rounds": s.iter_max_rounds,
            "eval_temperature": s.iter_eval_temperature,
        }
        if s.eval_max_tokens is not None and s.eval_max_tokens != s.gen_max_tokens:
            params["eval_max_tokens"] = s.eval_max_tokens
        used = ("direct", "generation", "self_eval") + (("entities",) if base == "graph" else ())
    else:
        raise KeyError(f"unknown paradigm {paradigm!r}")
    return {
        "paradigm": paradigm,
        "params": dict(sorted(params.items())),
        "prompts": prompts.versions(*used),
        "algorithm": ALGORITHM_VERSION,
    }


def config_hash(paradigm: str, config: Config | Settings, *, base_retriever: str | None = None) -> str:
    """16 hex digits of sha256 over :func:`paradigm_config` (stable across processes)."""
    blob = json.dumps(paradigm_config(paradigm, config, base_retriever=base_retriever), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def settings_dict(s: Settings) -> dict:
    """All settings as a plain dict (for traces and debugging)."""
    return asdict(s)
