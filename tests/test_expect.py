"""ragrouter/stages/expect.py: the reply-length history a dry run reads is aggregated by the
store (one row per stage, model and cap) and equals the per-call computation, on DuckDB and
PostgreSQL alike."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from sqlalchemy import insert

from ragrouter.config import Config
from ragrouter.db import models
from ragrouter.db.engine import write_lock
from ragrouter.stages.expect import Expectations

CALLS = [  # (kind, stage, model, params, completion tokens)
    ("chat", "answer", "m1", {"max_tokens": 100, "temperature": 0.7}, 40),
    ("chat", "answer", "m1", {"max_tokens": 100}, 60),
    ("chat", "answer", "m1", {"max_tokens": 100}, 130),        # over its cap: the share counts 1
    ("chat", "answer", "m1", {"max_tokens": 20}, 10),
    ("chat", "answer", "m1", {"max_completion_tokens": 50}, 25),  # reasoning preset: no max_tokens
    ("chat", "answer", "m1", {"max_tokens": None, "max_completion_tokens": 50}, 5),
    ("chat", "judge", "m2", {"max_tokens": 300}, 30),
    ("chat", "judge", "m2", {"temperature": 0.1}, 99),          # no cap: not counted
    ("embedding", "embed", "e", {"max_tokens": 100}, 0),        # not a chat call
]


def _reference():
    shares, lengths = defaultdict(list), defaultdict(list)
    for kind, stage, model, params, completion in CALLS:
        cap = params.get("max_tokens") or params.get("max_completion_tokens")
        if kind != "chat" or not cap:
            continue
        shares[(stage, model)].append(min(1.0, completion / cap))
        lengths[(stage, model, cap)].append(completion)
    return ({k: (len(v), sum(v) / len(v)) for k, v in shares.items()},
            {k: (len(v), sum(v) / len(v)) for k, v in lengths.items()})


def _fill(engine):
    rows = [dict(request_hash=hashlib.sha256(str(i).encode()).hexdigest(), kind=kind, backend="b", model=model,
                 stage=stage, phase="p", params=params, prompt_tokens=1, completion_tokens=completion,
                 token_source="usage", latency_s=0.1, attempts=1)
            for i, (kind, stage, model, params, completion) in enumerate(CALLS)]
    with write_lock(engine), engine.begin() as conn:
        conn.execute(insert(models.LLMCall), rows)


def check(engine):
    _fill(engine)
    config = Config.load(env={})
    exp = Expectations(engine, config)
    shares, lengths = _reference()
    assert set(exp._shares) == set(shares) and set(exp._lengths) == set(lengths)
    for k, (n, mean) in shares.items():
        assert exp._shares[k][0] == n and abs(exp._shares[k][1] - mean) < 1e-9
    for k, (n, mean) in lengths.items():
        assert exp._lengths[k][0] == n and abs(exp._lengths[k][1] - mean) < 1e-9
    # what a dry run reads of it: answer m1 with cap 100 has 3 calls (< history_min 5): the mean
    # share of the stage's 6 capped calls applies; with history_min 3 the cap's own mean
    assert exp.share("answer", "m1") == (shares[("answer", "m1")][1], "history:6")
    assert exp.reply("answer", "m1", 100) == (round(100 * shares[("answer", "m1")][1]), "history:6")
    exp.history_min = 3
    assert exp.reply("answer", "m1", 100) == (round((40 + 60 + 130) / 3), "history:3")


def test_reply_history_is_aggregated_by_the_store(store):
    check(store)


def test_reply_history_on_postgres(pg_store):
    check(pg_store)
