"""Judge the calibration set of DB with the previous prompt (judge-v3) and its rules (a refusal is
incomplete; no unanswerable rule), beside the current judge-v4: the 'before' of issue 30 item 3.
usage: PYTHONPATH=. .venv/bin/python benchmarks/bench_judge_prompt_v3.py DB N CORPUS"""
import sys

from ragrouter.config import Config
from ragrouter.db.engine import make_engine
from ragrouter.evaluation import calibration as cal
from ragrouter.evaluation import judge as jd
from ragrouter.stages.services import Services

OLD_SYSTEM = (
    "You grade an answer against a gold answer. Judge only whether the answer's conclusion "
    "matches the gold answer, not its style or length. Labels: "
    "'correct' = it states the gold answer's key information without contradicting it; "
    "'incorrect' = it contradicts the gold answer or states a different answer; "
    "'incomplete' = it is partly right but misses critical information, or it refuses or says "
    "it cannot answer. Return JSON {\"label\": \"correct|incorrect|incomplete\", \"reason\": \"one short sentence\"}."
)


def old_rule(answer, unanswerable=False):
    return jd.RuleVerdict("incomplete", jd.REFUSAL_REASON, True) if jd.is_refusal(answer) else None


db, n, corpus = sys.argv[1], int(sys.argv[2]), sys.argv[3]
jd.SYSTEM, jd.PROMPT_VERSION, jd.rule_verdict = OLD_SYSTEM, "judge-v3", old_rule
engine = make_engine(db)
cset = cal.ensure_set(engine, n=n, corpus=corpus)
services = Services(Config.load(env={}), engine)
try:
    (rep, fig), = cal.judge_set(services, ["local-qwen-1.5b"], cset, progress=False).values()
finally:
    services.finish()
print(cal.render(fig, "qwen2.5-coder-1.5b (prompt judge-v3, old rules)"))
