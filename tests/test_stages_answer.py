"""The answer stage through the runner, the CLI and the real gateway, against the fake endpoint.

* chunk → extract → embed → answer on a small corpus: one paradigm_runs row per (query,
  paradigm, generator), its ledger calls linked by phase, token costs per phase; a second run
  makes no HTTP request and changes nothing.
* ``kill -9`` of a ``cli.py run --stage answer`` worker at random moments, ten times, then a
  run to the end: the final store equals the store of an uninterrupted run of the same stage
  (same rows, same answers and tokens, same calls per run), with no duplicate and no orphan.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from sqlalchemy import text

from ragrouter.config import Config
from ragrouter.graph import extract as ex
from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.db.engine import write_lock
from ragrouter.paradigms import prompts
from tests.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parent.parent
PARADIGMS = ["llm_only", "naive", "graph", "hybrid", "iterative"]

DOCS = {
    "d1": ("Marie Curie was born in Warsaw. Marie Curie discovered polonium. Polonium is named after Poland. "
           "Warsaw is the capital of Poland."),
    "d2": ("Pierre Curie married Marie Curie. Pierre Curie studied magnetism. "
           "The Curie temperature is named after Pierre Curie."),
    "d3": ("Polonium is highly radioactive. Radioactivity was studied by Henri Becquerel. "
           "Henri Becquerel shared the Nobel Prize with the Curies."),
    "d4": ("The Sorbonne is a university in Paris. Marie Curie taught at the Sorbonne. "
           "Paris is the capital of France."),
}
QUESTIONS = [
    ("q1", "Where was Marie Curie born?", "Warsaw", "factual"),
    ("q2", "What element did Marie Curie discover?", "Polonium", "factual"),
    ("q3", "Which country is the element discovered by Marie Curie named after?", "Poland", "reasoning"),
    ("q4", "Who shared the Nobel Prize with the Curies, and what did he study?", "Henri Becquerel, radioactivity",
     "reasoning"),
    ("q5", "Summarise the work of Pierre Curie.", "He studied magnetism and married Marie Curie.", "summary"),
    ("q6", "Summarise what the texts say about Paris.", "Paris is the capital of France, home of the Sorbonne.",
     "summary"),
]
_SENT = re.compile(r"([A-Z][a-z]+(?: [A-Z][a-z]+)*) ((?:[a-z]+ ?)+?) (?:the )?([A-Z][a-z]+(?: [A-Z][a-z]+)*)")


def responder(req: dict):
    """A deterministic model: every reply is a function of the request only."""
    system, user = req["messages"][0]["content"], req["messages"][-1]["content"]
    if system.startswith(ex.SYSTEM):
        return {"triples": [[s, r.strip(), o] for s, r, o in _SENT.findall(user)][:15]}
    if system == prompts.PROMPTS["entities"].system:
        names = re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)*", user.split("\n")[-1])
        return {"entities": [n for n in names if n not in ("Where", "What", "Which", "Who", "Summarise")]}
    if system == prompts.PROMPTS["self_eval"].system:
        words = len(user.split())
        return {"reason": "checked", "sufficient": words % 3 == 0,
                "sub_question": "" if words % 5 == 0 else f"What else about {words % 7}?"}
    question = user.rsplit("Question:", 1)[-1].strip().split("\n")[0]
    return f"Answer to '{question[:60]}' from {len(user)} characters."


def fake_config(srv, workdir: Path | None = None) -> Config:
    data = copy.deepcopy(Config.load(env={}).data)
    data["backends"] = {
        "fake-gen": {"kind": "openai", "base_url": srv.base_url, "model": "fake-model", "concurrency": 4,
                     "retries": 0, "timeout_s": 10},
        "fake-embed": {"kind": "openai", "base_url": srv.base_url, "model": "fake-embed", "concurrency": 4,
                       "retries": 0, "timeout_s": 10},
    }
    data["roles"] = {"generators": ["fake-gen"], "extractor": "fake-gen", "judge": "fake-gen",
                     "query_generator": "fake-gen", "embedder": "fake-embed"}
    data["paradigms"]["enabled"] = PARADIGMS
    data["paradigms"]["iterative"]["max_rounds"] = 2
    data["chunking"]["window"] = 24
    data["chunking"]["overlap"] = 4
    # the scripted judges plant their verdicts and the scripted answers do not state the golds'
    # figures: the figures rule (tests/test_judge_figures.py) would overrule the plan
    data["judge"]["figures"] = False
    if workdir is not None:  # the same settings as a file, for the CLI
        (workdir / "cfg.yaml").write_text(yaml.safe_dump(data))
    return Config(data, source="<test>")


def ingest(engine) -> None:
    from ragrouter.ingest import store as ingest_store
    from ragrouter.ingest.records import Dataset, Document, Question

    ds = Dataset(documents=[Document(k, "", v) for k, v in DOCS.items()],
                 questions=[Question(i, q, a, t) for i, q, a, t in QUESTIONS])
    with write_lock(engine), engine.begin() as conn:
        ingest_store.write_dataset(conn, "toy", "test", ds, [])


def run(engine, config, *names):
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    services = Services(config, engine)
    try:
        reports = [run_stage(registry.all_stages()[n], services, Scope(corpus="toy", config=config), progress=False)
                   for n in names]
        stats = services.__dict__["gateway"].stats() if "gateway" in services.__dict__ else {}
    finally:
        services.finish()
    return reports, stats


def rows(engine, sql: str, **params) -> list[tuple]:
    with write_lock(engine), engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params).all()]


def _json(v):
    return json.loads(v) if isinstance(v, str) else v


def test_answer_stage_rows_phases_tokens_and_a_free_second_run(store):
    ingest(store)
    with FakeOpenAI(responder=responder, embedding_dim=32) as srv:
        cfg = fake_config(srv)
        (chunk, extract, embed, answer), _ = run(store, cfg, "chunk", "extract", "embed", "answer")
        assert (chunk.failed, extract.failed, embed.failed) == (0, 0, 0) and extract.done > len(DOCS)
        assert (answer.pending, answer.done, answer.failed) == (30, 30, 0)
        requests = srv.stats()["total"]

        runs = rows(store, "SELECT r.id, q.external_id, r.paradigm, r.answer, r.gen_in_tokens, r.gen_out_tokens, "
                           "r.ret_in_tokens, r.iterations, r.retrieved_chunk_ids FROM paradigm_runs r "
                           "JOIN queries q ON q.id = r.query_id")
        assert len(runs) == 30 and {(r[1], r[2]) for r in runs} == {(q[0], p) for q in QUESTIONS for p in PARADIGMS}
        for rid, _qid, paradigm, answer_text, gen_in, gen_out, ret_in, iterations, chunk_ids in runs:
            assert answer_text.startswith("Answer to '") and gen_in > 0 and gen_out > 0
            calls = rows(store, "SELECT rc.phase, c.phase, c.prompt_tokens, c.completion_tokens FROM run_calls rc "
                                "JOIN llm_calls c ON c.id = rc.llm_call_id WHERE rc.run_id = :r ORDER BY rc.seq", r=rid)
            assert all(a == b for a, b, _, _ in calls), "a run's call is linked under another phase"
            by_phase: dict = {}
            for phase, _, pt, ct in calls:
                by_phase[phase] = (by_phase.get(phase, (0, 0))[0] + pt, by_phase.get(phase, (0, 0))[1] + ct)
            # the run's costs are its calls', phase by phase
            assert by_phase["generation"] == (gen_in, gen_out), paradigm
            assert by_phase.get("retrieval", (0, 0))[0] == ret_in, paradigm
            if paradigm in ("graph", "hybrid", "iterative"):  # query entities (+ self-evaluation)
                assert ret_in > 0 and set(by_phase) == {"retrieval", "generation"}
            else:
                assert ret_in == 0 and set(by_phase) == {"generation"}
            if paradigm == "llm_only":
                assert not _json(chunk_ids)
            if paradigm == "iterative":
                assert 0 <= iterations <= 2  # 0: the direct answer was judged sufficient
        rounds = {r[7] for r in runs if r[2] == "iterative"}
        assert rounds & {0} and rounds & {1, 2}, rounds  # both stop rules occurred
        assert rows(store, "SELECT COUNT(*) FROM llm_calls WHERE stage = 'answer'")[0][0] > 30

        before = rows(store, "SELECT id, answer FROM paradigm_runs ORDER BY id")
        (again,), stats = run(store, cfg, "answer")
        assert (again.pending, again.done) == (0, 0)
        assert srv.stats()["total"] == requests, "a second run sent requests"
        assert stats == {} or stats["billed_tokens"] == 0
        assert rows(store, "SELECT id, answer FROM paradigm_runs ORDER BY id") == before


# ------------------------------------------------------------------------------ kill -9


def _snapshot(url: str) -> dict:
    """The answer stage's rows on natural keys (no ids, no timings)."""
    engine = eng.make_engine(url)
    try:
        runs = rows(engine, "SELECT r.id, q.external_id, r.paradigm, r.generator, r.config_hash, r.answer, "
                            "r.retrieved_chunk_ids, r.context_tokens, r.iterations, r.ret_in_tokens, r.ret_out_tokens, "
                            "r.gen_in_tokens, r.gen_out_tokens FROM paradigm_runs r JOIN queries q ON q.id = r.query_id")
        calls = rows(engine, "SELECT rc.run_id, rc.seq, rc.phase, c.request_hash FROM run_calls rc "
                             "JOIN llm_calls c ON c.id = rc.llm_call_id")
        per_run: dict = {}
        for run_id, seq, phase, h in calls:
            per_run.setdefault(run_id, []).append((seq, phase, h))
        snap = {
            "runs": sorted((r[1:5], (r[5], str(_json(r[6])), *r[7:]), tuple(sorted(per_run.get(r[0], []))))
                           for r in runs),
            "n_runs": len(runs),
            "distinct_runs": len({r[1:5] for r in runs}),
            "orphan_links": rows(engine, "SELECT COUNT(*) FROM run_calls rc WHERE rc.run_id NOT IN "
                                         "(SELECT id FROM paradigm_runs) OR rc.llm_call_id NOT IN "
                                         "(SELECT id FROM llm_calls)")[0][0],
            "runs_without_calls": sum(1 for r in runs if r[0] not in per_run),
            "ledger_duplicates": rows(engine, "SELECT COUNT(*) - COUNT(DISTINCT request_hash) "
                                              "FROM llm_calls")[0][0],
            "leases": rows(engine, "SELECT COUNT(*) FROM work_leases")[0][0],
            "failures": rows(engine, "SELECT COUNT(*) FROM unit_failures WHERE stage = 'answer'")[0][0],
        }
    finally:
        eng.dispose_all()
    return snap


def _worker(url: str, workdir: Path) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "cli.py", "--db", url, "--config", str(workdir / "cfg.yaml"), "run",
                             "--stage", "answer", "--corpus", "toy", "--quiet"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_kill_9_ten_times_then_finish_equals_an_uninterrupted_run(tmp_path):
    prepared = tmp_path / "prepared.duckdb"
    with FakeOpenAI(responder=responder, embedding_dim=32, latency_s=0.02) as srv:
        cfg = fake_config(srv, tmp_path)
        engine = eng.make_engine(f"duckdb:///{prepared}")
        migrate.upgrade(engine)
        ingest(engine)
        run(engine, cfg, "chunk", "extract", "embed")
        eng.dispose_all()
        for name in ("calm", "killed"):
            shutil.copy(prepared, tmp_path / f"{name}.duckdb")

        calm = f"duckdb:///{tmp_path / 'calm.duckdb'}"
        start = srv.stats()["total"]
        p = _worker(calm, tmp_path)
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        calm_requests = srv.stats()["total"] - start
        assert calm_requests > 30

        killed = f"duckdb:///{tmp_path / 'killed.duckdb'}"
        rng = random.Random(7)
        kills, mid_stage = 0, 0
        start = srv.stats()["total"]
        while kills < 10:
            seen = srv.stats()["total"]
            target = seen + rng.randint(1, max(2, calm_requests // 8))
            p = _worker(killed, tmp_path)
            deadline = time.monotonic() + 120
            while p.poll() is None and srv.stats()["total"] < target and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.03))  # land inside a request, a write or a commit
            if p.poll() is not None:  # the stage finished before the kill: start again from scratch
                assert p.returncode == 0, p.stderr.read()[-3000:]
                break
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            p.stdout.close()
            p.stderr.close()
            kills += 1
            mid_stage += srv.stats()["total"] > seen
        p = _worker(killed, tmp_path)
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        assert kills == 10 and mid_stage == 10, (kills, mid_stage)
        # requests lost with the killed workers (in flight, or answered but not yet committed)
        # are asked again; nothing else is
        repeated = srv.stats()["total"] - start - calm_requests
        assert 0 <= repeated <= 10 * 2 * 4 * 4, repeated

    a, b = _snapshot(calm), _snapshot(killed)
    assert a["n_runs"] == a["distinct_runs"] == 30
    for snap in (a, b):
        assert snap["n_runs"] == snap["distinct_runs"], "duplicate paradigm runs"
        assert (snap["orphan_links"], snap["runs_without_calls"], snap["ledger_duplicates"]) == (0, 0, 0)
        assert (snap["leases"], snap["failures"]) == (0, 0)
    assert b["runs"] == a["runs"]
