"""What a user can trust on a finished store (issue 15): status from what the store holds,
and dry runs that say what the run then bills.

The store is the answer-stage test's toy corpus on the fake OpenAI-compatible endpoint (a
deterministic scripted model), run through the demo's pipeline with a config that differs
from configs/default.yaml (as configs/demo.yaml does).
"""

from __future__ import annotations

import pytest

from ragrouter.commands import status
from ragrouter.config import Config
from ragrouter.evaluation import judge as jd
from ragrouter.stages.base import Scope
from tests.fake_openai import FakeOpenAI
from tests.test_stages_answer import fake_config, ingest, responder, run

DEMO_PIPELINE = ["chunk", "extract", "embed", "metrics", "answer", "judge", "score"]


def judging_responder(req: dict):
    """The answer test's model, plus a judge that calls an answer correct when it names a
    word of the gold answer."""
    if req["messages"][0]["content"] == jd.SYSTEM:
        user = req["messages"][-1]["content"]
        gold = user.split("Gold answer: ", 1)[1].split("\n\nAnswer to grade:", 1)[0]
        answer = user.split("Answer to grade: ", 1)[1]
        ok = any(w.lower() in answer.lower() for w in gold.split())
        return {"label": "correct" if ok else "incorrect", "reason": "scripted"}
    return responder(req)


def test_status_without_config_reads_what_the_store_holds(store):
    ingest(store)
    with FakeOpenAI(responder=judging_responder, embedding_dim=32) as srv:
        cfg = fake_config(srv)
        reports, _ = run(store, cfg, *DEMO_PIPELINE)
    assert all(r.failed == 0 for r in reports), [r.errors for r in reports]
    default = Config.load(env={})
    # What the old status showed without --config: the default config's expectations.
    by_config = {s["stage"]: s for s in status.collect(store, Scope(config=default))["stages"]}
    assert by_config["answer"]["pending"] > 0 and by_config["answer"]["done"] == 0
    # From the store: every stage the run ran is done, under the config its runs recorded.
    data = status.collect(store, Scope(config=default), from_store=True)
    assert data["expectations"] == "store"
    got = {s["stage"]: s for s in data["stages"]}
    for name in DEMO_PIPELINE:
        s = got[name]
        assert s["ran"] and s["expected"] > 0 and s["done"] == s["expected"] and s["pending"] == 0, s
    assert got["answer"]["expected"] == 6 * 5 and got["judge"]["expected"] == 30
    # Stages no run of this store ran are "not run", not pending work of another config.
    assert not got["querygen"]["ran"] and got["querygen"]["pending"] == 0
    # The recorded config is the run's own (settings as the run had them).
    with store.connect() as conn:
        (config, ran), = status.stored_configs(conn)
    assert config.get("chunking.window") == 24 and ran == set(DEMO_PIPELINE)
