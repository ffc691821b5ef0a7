"""The promoted router model takes what the README says: ``question``, ``corpus`` and an optional
``query_type`` (MLflow ColSpec, required=False). Before, the signature held only question and
corpus, MLflow dropped a caller's ``query_type`` ("Found extra inputs ... will be ignored") and a
``summary`` question came back as whatever type the model inferred."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from ragrouter.answering import ask as ask_mod  # noqa: E402
from ragrouter.answering import routing  # noqa: E402
from ragrouter.answering import promotion  # noqa: E402
from tests.support.router_store import config_for, make_store  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
QUESTION = "What year was the bridge opened?"


@pytest.fixture(scope="module")
def promoted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("signature")
    uri = f"sqlite:///{tmp / 'mlflow' / 'mlflow.db'}"
    cfg = config_for(uri)
    _, engine = make_store(tmp / "s.duckdb", seed=5)
    res = routing.train(engine, cfg, routing.store_dataset(engine, cfg), ["lr"], ["qc"], log=lambda m: None)
    lr = res[res["router"] == "lr"].iloc[0]
    out = promotion.promote(engine, cfg, ask_mod.TrainedRouter("lr", "qc", str(lr["encoder"]), str(lr["run_id"])),
                            echo=lambda m: None)
    yield {"tmp": tmp, "uri": uri, "cfg": cfg, "engine": engine, "out": out}
    from ragrouter.db import engine as eng

    eng.dispose_all()


def test_the_signature_names_query_type_as_an_optional_column(promoted):
    import mlflow

    mlflow.set_tracking_uri(promoted["uri"])
    info = mlflow.models.get_model_info(promoted["out"]["model_uri"])
    cols = {c["name"]: c for c in info.signature.inputs.to_dict()}
    assert list(cols) == ["question", "corpus", "query_type"]
    assert cols["query_type"]["type"] == "string" and cols["query_type"]["required"] is False
    assert cols["question"]["required"] is True and cols["corpus"]["required"] is True
    outs = [c["name"] for c in info.signature.outputs.to_dict()]
    assert outs[-2:] == ["paradigm", "query_type"] and len(outs) > 3


def test_a_fresh_python_routes_a_given_summary_as_summary(promoted, tmp_path):
    """models:/name@champion loaded with mlflow.pyfunc only, in a Python started outside the
    clone with nothing of ours on sys.path: a row with query_type 'summary' comes back 'summary'
    with the probabilities the router gives a summary question; a row without it is inferred; a
    misspelt type is refused in one line. The model's pickled class lives in ragrouter, so
    ragrouter is imported, but only from the copy of the code inside the model's artefacts."""
    out = promoted["out"]
    script = textwrap.dedent(f"""
        import json, sys, warnings
        import mlflow, pandas as pd
        assert "ragrouter" not in sys.modules
        assert not [p for p in sys.path if p.startswith({str(REPO)!r}) and not p.startswith({str(REPO / '.venv')!r})]
        mlflow.set_tracking_uri({promoted['uri']!r})
        m = mlflow.pyfunc.load_model("models:/{out['name']}@champion")
        meta = json.load(open(m._model_impl.context.artifacts["routing"]))
        corpus = sorted(meta["indicators"])[0]
        q = {QUESTION!r}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            given = m.predict(pd.DataFrame([{{"question": q, "corpus": corpus, "query_type": "summary"}},
                                            {{"question": q, "corpus": corpus, "query_type": "Reasoning "}}]))
            mixed = m.predict(pd.DataFrame([{{"question": q, "corpus": corpus, "query_type": "summary"}},
                                            {{"question": q, "corpus": corpus}}]))
            absent = m.predict(pd.DataFrame([{{"question": q, "corpus": corpus}}]))
        try:
            m.predict(pd.DataFrame([{{"question": q, "corpus": corpus, "query_type": "sumary"}}]))
        except Exception as exc:
            print("ERR", str(exc).strip().splitlines()[-1])
        files = sorted({{str(getattr(mod, "__file__", "") or "") for k, mod in sys.modules.items()
                         if k == "ragrouter" or k.startswith("ragrouter.")}})
        print(json.dumps({{"given": given.to_dict("records"), "mixed": mixed.to_dict("records"),
                           "absent": absent.to_dict("records"), "corpus": corpus,
                           "warnings": [str(w.message) for w in caught], "ragrouter_files": files}}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.strip().splitlines()
    got = json.loads([line for line in lines if line.startswith("{")][-1])
    assert not [w for w in got["warnings"] if "extra inputs" in w.lower()], got["warnings"]
    assert "Found extra inputs" not in p.stderr
    summary, reasoning = got["given"]
    assert summary["query_type"] == "summary" and reasoning["query_type"] == "reasoning"
    inferred = got["absent"][0]["query_type"]
    assert inferred in ("factual", "reasoning", "summary") and inferred != "summary"  # else the test would not bite
    assert got["mixed"][0]["query_type"] == "summary" and got["mixed"][1]["query_type"] == inferred
    # the probabilities are the router's for a summary question, not for the inferred type
    engine, cfg = promoted["engine"], promoted["cfg"]
    as_summary = ask_mod.route(engine, cfg, got["corpus"], QUESTION, query_type="summary", run_id=out["run_id"])
    as_inferred = ask_mod.route(engine, cfg, got["corpus"], QUESTION, query_type=inferred, run_id=out["run_id"])
    assert as_summary.probabilities != pytest.approx(as_inferred.probabilities, abs=1e-6)
    for k, v in as_summary.probabilities.items():
        assert summary[k] == pytest.approx(v, abs=1e-9) and got["mixed"][0][k] == pytest.approx(v, abs=1e-9)
    for k, v in as_inferred.probabilities.items():
        assert got["absent"][0][k] == pytest.approx(v, abs=1e-9)
    top = max(as_summary.probabilities, key=as_summary.probabilities.get)
    assert summary["paradigm"] == top or top in promotion.NON_PARADIGM
    assert any(line.startswith("ERR unknown query_type sumary (known: factual, reasoning, summary")
               for line in lines), p.stdout + p.stderr[-2000:]
    # ragrouter is loaded only from the model's own code copy, never from this clone
    files = got["ragrouter_files"]
    assert files and all("/code/ragrouter/" in f and not f.startswith(str(REPO) + "/ragrouter") for f in files), files
