"""How well the reasoning checks' reader (the judge's chain reading) agrees with the truth, on
2WikiMultihopQA's own two-hop questions (issue #19).

The grounding and shortcut checks of a generated reasoning query both ask the judge to read:
all the chain's texts (grounding must find the answer) and each hop's text alone (shortcut
must not). Whether a rejection says something about the *question* or only about the *reader*
depends on how that reader does on questions known to need both hops. The substitute corpus
ships them: its compositional questions ("When was the director of film X born?") with their
two evidence triples. A case is kept when

* both evidence pages are in the corpus (film X's page, the bridge's own page);
* the first page writes the bridge, the second writes the answer and not the first page's
  title, and the first does not write the answer — so the second page alone cannot say who
  "the director of film X" is, and the first alone cannot answer.

For each reader prompt (``v3`` = :data:`ragrouter.querygen.prompts.GROUNDED_CHAIN` as it is now;
``v2`` = the previous text, kept here as the baseline), every case is read as the checks read
it (:meth:`ragrouter.querygen.checks.Evaluator.read`, the same verdict and content-word gate):

* *grounding*: both pages → should be correct (the reader's recall on real two-hop questions);
* *shortcut, page 2 / page 1*: one page alone → should not be correct (a "correct" here is a
  false shortcut: the reader guessed, e.g. took the description for the page's subject);
* *accepted*: grounding correct and neither page alone correct — what the two checks would let
  through of questions that deserve it.

    PYTHONPATH=. python benchmarks/bench_chain_reader.py --db duckdb:////tmp/qg/reader.duckdb \\
        --config /tmp/qg/idle.yaml --n 24

Every call goes through the gateway's cache and ledger (stage ``validate``), so a re-run sends
nothing; the judge is the config's ``roles.judge``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ragrouter.config import Config
from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.common.stats import wilson_interval
from ragrouter.paradigms.prompts import REFUSAL, Prompt
from ragrouter.querygen import checks, prompts
from ragrouter.querygen.stages import evaluator
from ragrouter.stages.services import Services

WIKI = Path(__file__).resolve().parents[2] / "shared" / "data" / "musique" / "2wikimultihopqa_substitute"

V2 = Prompt(  # the reader before v3 (session 9), for comparison
    name="grounded_chain",
    version="qcheck-grounded-chain-v2",
    system=(
        "Answer a question using only the texts. The question may describe someone or something instead "
        "of naming it (for example 'the director of the film X' or 'the year Y died'). First, for every "
        "such description, write the description and who or what the texts say it is; then the answer to "
        "what the question asks about them, in a few words. If the texts do not contain the answer, the "
        f"answer is exactly: {REFUSAL} "
        'Reply with JSON only: {"steps": [{"description": "...", "is": "..."}], "answer": "..."}'
    ),
    user="{texts}\n\nQuestion: {question}\n\nReturn the JSON now.",
)
READERS = {"v2": V2, "v3": prompts.GROUNDED_CHAIN}


def cases(n: int) -> list[dict]:
    """The first ``n`` compositional questions that need both their pages (module docstring)."""
    corpus = json.loads((WIKI / "2wikimultihopqa_corpus.json").read_text())
    questions = json.loads((WIKI / "2wikimultihopqa_questions.json").read_text())
    pages: dict[str, list[str]] = {}
    for p in corpus:
        pages.setdefault(p["title"], []).append(p["text"])
    out = []
    for q in questions:
        ev = q.get("evidence") or []
        if q.get("question_type") != "compositional" or len(ev) != 2 or ev[0][2] != ev[1][0]:
            continue
        first, bridge = ev[0][0], ev[0][2]
        if len(pages.get(first, [])) != 1 or len(pages.get(bridge, [])) != 1:
            continue
        p1, p2 = pages[first][0], pages[bridge][0]
        has = checks.contains_phrase
        if not has(p1, bridge) or not has(p2, q["answer"]) or has(p2, first) or has(p1, q["answer"]):
            continue
        out.append({"id": q["id"], "question": q["question"], "answer": q["answer"], "first": first,
                    "bridge": bridge, "texts": [p1, p2]})
        if len(out) >= n:
            break
    return out


def read_case(ev: checks.Evaluator, case: dict) -> dict:
    q = checks.CheckQuery(0, "reasoning", case["question"], case["answer"], case["texts"], case["texts"])
    out = {}
    for name, texts in (("grounding", case["texts"]), ("page2", case["texts"][1:]), ("page1", case["texts"][:1])):
        check = "grounding" if name == "grounding" else "shortcut"
        answer, _ids, _reading = ev.read(q, texts, check)
        label, _reason, _j = ev.verdict(q.question, q.answer, answer, check)
        out[name] = {"answer": answer, "label": label}
    return out


def rate(k: int, n: int) -> str:
    if not n:
        return "–"
    lo, hi = wilson_interval(k, n)
    return f"{k}/{n} ({100 * k / n:.0f} %, 95 % Wilson {100 * lo:.0f}–{100 * hi:.0f} %)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="a store for the gateway's cache and ledger")
    ap.add_argument("--config", default=None)
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--readers", nargs="+", default=list(READERS), choices=list(READERS))
    ap.add_argument("--show", action="store_true", help="print every case's answers")
    args = ap.parse_args()
    config = Config.load(args.config)
    engine = eng.make_engine(args.db)
    migrate.upgrade(engine)
    picked = cases(args.n)
    services = Services(config, engine)
    current = prompts.GROUNDED_CHAIN
    try:
        ev = evaluator(services)
        print(f"judge {config.get('roles.judge')}; {len(picked)} two-hop questions of the 2Wiki substitute")
        print("| reader | grounding correct | shortcut: page 2 alone correct | page 1 alone correct | accepted |")
        print("|---|---|---|---|---|")
        for name in args.readers:
            prompts.GROUNDED_CHAIN = READERS[name]  # grounded_chain_messages reads the module's prompt
            t0 = time.perf_counter()
            res = [read_case(ev, c) for c in picked]
            n = len(res)
            ok = [r["grounding"]["label"] == "correct" for r in res]
            s2 = [r["page2"]["label"] == "correct" for r in res]
            s1 = [r["page1"]["label"] == "correct" for r in res]
            acc = sum(g and not a and not b for g, a, b in zip(ok, s2, s1))
            print(f"| {name} (`{READERS[name].version}`) | {rate(sum(ok), n)} | {rate(sum(s2), n)} | "
                  f"{rate(sum(s1), n)} | {rate(acc, n)} |   ({time.perf_counter() - t0:.0f} s)")
            if args.show:
                for c, r in zip(picked, res):
                    print(f"    {c['question']} [{c['answer']}] → " + "; ".join(
                        f"{k}: {v['answer'][:60]!r} {v['label']}" for k, v in r.items()))
    finally:
        prompts.GROUNDED_CHAIN = current
        services.finish()


if __name__ == "__main__":
    main()
