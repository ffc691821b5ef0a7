"""The router registry: a plain dict from name to class (RouteLLM's ``routers/routers.py`` shape)."""

from __future__ import annotations

from ragrouter.extras import MissingExtra, available
from ragrouter.routers.base import Router
from ragrouter.routers.baselines import BestFixedRouter, ByQueryTypeRouter, OracleRouter, RandomRouter
from ragrouter.routers.classical import LogisticRegressionRouter, MLPRouter, SVMRouter, XGBoostRouter

NEURAL_NAMES = ("dnn", "two_tower", "adaptive_rag", "mba_rag", "router_dc")


def _without_torch(router: str) -> type[Router]:
    """A neural router's place in the zoo when torch (the [neural] extra) is not installed:
    listed with its family, refused in one line when made."""

    class Missing(Router):
        name = router
        family = "neural"
        uses_text_encoder = True
        missing_extra = "neural"

        def __init__(self, seed: int = 0, **params):
            raise MissingExtra(f"the neural router {router!r}", "neural", "torch")

        def _fit(self, X, y, meta):  # pragma: no cover - never made: __init__ refuses
            raise MissingExtra(f"the neural router {router!r}", "neural", "torch")

        def _predict_proba(self, X, **kw):  # pragma: no cover - never made: __init__ refuses
            raise MissingExtra(f"the neural router {router!r}", "neural", "torch")

    Missing.__name__ = Missing.__qualname__ = f"{router}_needs_torch"
    return Missing


if available("torch"):
    from ragrouter.routers.neural import AdaptiveRAGRouter, DNNRouter, MBARAGRouter, RouterDCRouter, TwoTowerRouter

    _NEURAL = dict(zip(NEURAL_NAMES, (DNNRouter, TwoTowerRouter, AdaptiveRAGRouter, MBARAGRouter, RouterDCRouter)))
else:  # a lean install: classical routers and baselines only
    _NEURAL = {n: _without_torch(n) for n in NEURAL_NAMES}

ROUTERS: dict[str, type[Router]] = {
    "lr": LogisticRegressionRouter,
    "svm": SVMRouter,
    "xgboost": XGBoostRouter,
    "mlp": MLPRouter,
    **_NEURAL,
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
