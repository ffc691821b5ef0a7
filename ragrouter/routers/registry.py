"""The router registry: a plain dict from name to class (RouteLLM's ``routers/routers.py`` shape)."""

from __future__ import annotations

from ragrouter.routers.base import Router
from ragrouter.routers.baselines import BestFixedRouter, ByQueryTypeRouter, OracleRouter, RandomRouter
from ragrouter.routers.classical import LogisticRegressionRouter, MLPRouter, SVMRouter, XGBoostRouter
from ragrouter.routers.neural import AdaptiveRAGRouter, DNNRouter, MBARAGRouter, RouterDCRouter, TwoTowerRouter

ROUTERS: dict[str, type[Router]] = {
    "lr": LogisticRegressionRouter,
    "svm": SVMRouter,
    "xgboost": XGBoostRouter,
    "mlp": MLPRouter,
    "dnn": DNNRouter,
    "two_tower": TwoTowerRouter,
    "adaptive_rag": AdaptiveRAGRouter,
    "mba_rag": MBARAGRouter,
    "router_dc": RouterDCRouter,
    "random": RandomRouter,
    "best_fixed": BestFixedRouter,
    "oracle": OracleRouter,
    "by_query_type": ByQueryTypeRouter,
}
CLASSICAL = tuple(n for n, c in ROUTERS.items() if c.family == "classical")
NEURAL = tuple(n for n, c in ROUTERS.items() if c.family == "neural")
BASELINES = tuple(n for n, c in ROUTERS.items() if c.family == "baseline")


def make_router(name: str, seed: int = 0, **params) -> Router:
    """A new, unfitted router by registry name."""
    try:
        cls = ROUTERS[name]
    except KeyError:
        raise ValueError(f"unknown router {name!r} (known: {', '.join(ROUTERS)})") from None
    return cls(seed=seed, **params)
