"""Query–corpus routers (paper §3.5, §4.1, App. D): dataset, features, the router zoo,
cross-validated evaluation, cost-aware labels, and MLflow tracking (``ragrouter.routers.tracking``,
imported on demand because MLflow is heavy).

Typical use::

    from ragrouter.routers import synthetic_dataset, cross_validate, minilm_encoder
    df = synthetic_dataset(2000, seed=0)
    res = cross_validate(df, "xgboost", "qc")
    res.metrics["routing_accuracy"], res.predictions.head()
"""

from ragrouter.routers.base import Router
from ragrouter.routers.dataset import (
    CANNOT_ANSWER, DEFAULT_PARADIGMS, INDICATORS, QUERY_TYPES, RouterDatasetError, class_order, load_router_dataset,
    oracle_labels, paradigms_of, synthetic_dataset, validate_router_dataset,
)
from ragrouter.routers.evaluate import (
    DEFAULT_LAMBDAS, METRICS, CVResult, aiq, avg_tokens, cost_aware_labels, cost_quality_curve, correct_rate,
    cross_validate, fallback_paradigm, fixed_paradigm_points, iter_cross_validations, macro_f1, mrr, plan,
    quality_frontier, route_outcomes, routing_accuracy, token_scale_of,
)
from ragrouter.routers.features import (
    ENCODERS, FEATURE_SETS, Binner, CachedEncoder, Features, HashEncoder, build_features, minilm_encoder,
)
from ragrouter.routers.registry import BASELINES, CLASSICAL, NEURAL, ROUTERS, make_router

__all__ = [
    "Router", "ROUTERS", "CLASSICAL", "NEURAL", "BASELINES", "make_router",
    "CANNOT_ANSWER", "DEFAULT_PARADIGMS", "INDICATORS", "QUERY_TYPES", "RouterDatasetError", "class_order",
    "load_router_dataset", "oracle_labels", "paradigms_of", "synthetic_dataset", "validate_router_dataset",
    "DEFAULT_LAMBDAS", "METRICS", "CVResult", "aiq", "avg_tokens", "cost_aware_labels", "cost_quality_curve",
    "correct_rate", "cross_validate", "fallback_paradigm", "fixed_paradigm_points", "iter_cross_validations",
    "macro_f1", "mrr", "plan", "quality_frontier", "route_outcomes", "routing_accuracy", "token_scale_of",
    "ENCODERS", "FEATURE_SETS", "Binner", "CachedEncoder", "Features", "HashEncoder", "build_features",
    "minilm_encoder",
]
