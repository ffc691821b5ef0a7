"""A judge on non-answers: how often it calls "correct" an answer that adds nothing to the question.

The cases are the non-answer family (ragrouter/evaluation/calibration_nonanswer.py: the question
restated, echoed, quoted, its topic only, a generic sentence; all of true label incomplete) made
from the first N answerable questions of CORPUS in a store (ordered by a stable hash of their id,
as judge calibrate orders them). Each is put to the judge with the judge stage's prompt and
decoding settings (one sample); the same reply is then labelled three ways:

- model: the judge model's own verdict (no rule);
- figures: with the figures rule only (the judge before the restatement check);
- rules: with the figures rule and the restatement check (the judge stage's default).

false-correct = cases labelled correct (all cases are not correct).

Usage: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_judge_nonanswer.py DB CORPUS N [--judge BACKEND] [--list]``
(default judge: local-qwen-1.5b). Model calls go through the store's gateway and its cache, so a
second run costs no call.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from ragrouter.config import Config
from ragrouter.db.engine import make_engine
from ragrouter.evaluation import calibration as cal
from ragrouter.evaluation import calibration_nonanswer as na
from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.precision import judge_figures
from ragrouter.stages.services import Services


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    judge = argv[argv.index("--judge") + 1] if "--judge" in argv else "local-qwen-1.5b"
    args = [a for a in args if a != judge]
    db, corpus, n = args[0], args[1], int(args[2])
    engine = make_engine(db)
    with engine.connect() as conn:
        sources = [s for s in cal.load_sources(conn, corpus) if not s.unanswerable]
    sources = sorted(sources, key=lambda s: cal.stable_hash("select", s.external_id))[:n]
    cases = [(s, c) for s in sources for c in na.build_cases(s)]
    services = Services(Config.load(env={}), engine)
    try:
        stage = cal.CalibrationStage(judge)
        kwargs = stage._kwargs(services.config, 0)

        def ask(item):
            s, c = item
            res = services.gateway.chat(judge, jd.messages(s.question, s.answer, c.answer), **kwargs)
            return jd.parse_label(res.data)

        with ThreadPoolExecutor(2) as pool:
            replies = list(pool.map(ask, cases))
        services.gateway.flush()
    finally:
        services.finish()
    counts: dict = defaultdict(lambda: defaultdict(int))
    for (s, c), (raw, reason) in zip(cases, replies):
        labels = {"model": raw, "figures": judge_figures(raw, s.question, s.answer, c.answer).label,
                  "rules": jd.apply_gate(jd.Gate(), raw, s.question, s.answer, c.answer)}
        for key in (c.kind, "all"):
            counts[key]["n"] += 1
            for variant, label in labels.items():
                counts[key][variant] += label == "correct"
        if "--list" in argv:
            print(f"{c.kind}: model {raw} / figures {labels['figures']} / rules {labels['rules']} | {c.answer} "
                  f"| gold {s.answer[:60]!r} | reason {reason[:80]!r}")
    print(f"judge {judge}, corpus {corpus}, {len(sources)} questions, {len(cases)} cases (all of true label incomplete)")
    print(f"{'kind':<22} {'N':>4} {'false-correct: model':>22} {'figures rule':>14} {'figures + restatement':>22}")
    for kind in [*na.KINDS, "all"]:
        c = counts[kind]
        if c["n"]:
            print(f"{kind:<22} {c['n']:>4} {c['model']:>14} / {c['n']:<5} {c['figures']:>6} / {c['n']:<5}"
                  f" {c['rules']:>14} / {c['n']:<5}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
