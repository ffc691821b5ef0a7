"""The judge's figures rule alone on its test set (benchmarks/data/figures_cases.jsonl).

Each case is (question, gold, answer, human verdict). The rule only ever lowers a judge's
"correct" to "incomplete", so it is measured as if the judge had said "correct" to every answer:

- false-incomplete: a case a person judged correct that the rule lowers (share of correct cases);
- false-correct: a case a person judged incomplete or incorrect that the rule leaves correct
  (share of those cases), counting the cases it abstains on (it leaves them correct and marks
  them for a person's review);
- abstained: cases whose verdict the rule left alone because it could not compare a figure
  with confidence (share of all cases).

Usage: ``PYTHONPATH=. python benchmarks/bench_figures.py [cases.jsonl] [--list]`` (``--list`` names
every miss and abstention). No model is called; it takes a few seconds.

``--properties N [--seed S]`` measures the rule instead on N drawn quantities rendered by library
formatters (benchmarks/figure_forms.py: babel, pint, num2words): false-incomplete = equivalent
renderings lowered, false-correct = changed renderings left correct, per kind of quantity.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ragrouter.evaluation.precision import judge_figures, missing_figures

CASES = Path(__file__).parent / "data" / "figures_cases.jsonl"
HELDOUT = Path(__file__).parent / "data" / "figures_heldout.jsonl"
"""Pairs in finance, medicine, aviation and dates written in batches before the rule was changed
after them (split "heldout"; benchmarks/docs/figures-rule.md gives each batch's first measurement)."""
VERDICTS = ("correct", "incomplete", "incorrect")
FIELDS = ("id", "split", "domain", "question", "gold", "answer", "verdict")


def load(path: Path = CASES) -> list[dict]:
    """The cases of ``path``; a bad record raises ValueError naming the file and line."""
    rows = []
    for no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} line {no}: not JSON ({exc.msg})") from None
        missing = [f for f in FIELDS if f not in row]
        if missing or row["verdict"] not in VERDICTS or row["split"] not in ("dev", "test", "heldout"):
            raise ValueError(f"{path} line {no}: needs {', '.join(FIELDS)}; verdict one of {VERDICTS}, split dev/test")
        rows.append(row)
    return rows


def measure(rows: list[dict]) -> dict:
    """False-incomplete and false-correct of the rule alone over ``rows``, with the missed cases."""
    right = [r for r in rows if r["verdict"] == "correct"]
    wrong = [r for r in rows if r["verdict"] != "correct"]
    out = {id(r): judge_figures("correct", r["question"], r["gold"], r["answer"]) for r in rows}
    fi = [r for r in right if out[id(r)].label != "correct"]
    fc = [r for r in wrong if out[id(r)].label == "correct"]
    abstained = [r for r in rows if out[id(r)].review]
    return {"n": len(rows), "n_correct": len(right), "n_wrong": len(wrong),
            "false_incomplete": len(fi) / len(right) if right else 0.0,
            "false_correct": len(fc) / len(wrong) if wrong else 0.0, "fi_cases": fi, "fc_cases": fc,
            "abstained": abstained, "abstention": len(abstained) / len(rows) if rows else 0.0}


def groups(rows: list[dict]) -> dict[str, list[dict]]:
    out = {split: [r for r in rows if r["split"] == split] for split in ("dev", "test", "heldout")
           if any(r["split"] == split for r in rows)}
    for split in ("test", "heldout"):
        for batch in sorted({r.get("batch") for r in rows if r["split"] == split and r.get("batch")}, key=str):
            out[f"{split}, batch {batch}"] = [r for r in rows if r["split"] == split and r.get("batch") == batch]
    out["all"] = rows
    for domain in sorted({r["domain"] for r in rows}):
        out[f"all, {domain}"] = [r for r in rows if r["domain"] == domain]
    return out


def properties(n: int, seed: int = 0) -> dict[str, dict[str, int]]:
    """Counts per kind over ``n`` draws of benchmarks/figure_forms.py: same (renderings), lowered,
    differs (renderings), kept, abstained; and the misses."""
    import random

    from benchmarks.figure_forms import draw

    rnd, out = random.Random(seed), {}
    for _ in range(n):
        pair = draw(rnd)
        c = out.setdefault(pair.kind, {"draws": 0, "same": 0, "lowered": 0, "differs": 0, "kept": 0, "abstained": 0,
                                       "misses": []})
        c["draws"] += 1
        for answers, lowered_is_miss in ((pair.same, True), (pair.differs, False)):
            for answer in answers:
                res = judge_figures("correct", pair.question, pair.gold, answer)
                c["same" if lowered_is_miss else "differs"] += 1
                c["abstained"] += bool(res.review)
                if lowered_is_miss and res.label != "correct":
                    c["lowered"] += 1
                    c["misses"].append(("lowered", pair.gold, answer))
                elif not lowered_is_miss and res.label == "correct":
                    c["kept"] += 1
                    c["misses"].append(("kept", pair.gold, answer))
    return out


def _print_properties(n: int, seed: int, show: bool) -> None:
    counts = properties(n, seed)
    total = {k: sum(c[k] for c in counts.values()) for k in ("draws", "same", "lowered", "differs", "kept", "abstained")}
    print(f"{'kind':<22} {'draws':>6} {'false-incomplete':>24} {'false-correct':>22} {'abstained':>10}")
    for kind, c in sorted(counts.items()) + [("all", total)]:
        print(f"{kind:<22} {c['draws']:>6} {c['lowered']:>6} / {c['same']:<6} {100 * c['lowered'] / max(1, c['same']):5.2f} %"
              f" {c['kept']:>6} / {c['differs']:<6} {100 * c['kept'] / max(1, c['differs']):5.2f} % {c['abstained']:>10}")
    if show:
        for c in counts.values():
            for miss in c["misses"]:
                print(*miss, sep=" | ")


def main(argv: list[str]) -> int:
    if "--properties" in argv:
        n = int(argv[argv.index("--properties") + 1])
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
        _print_properties(n, seed, "--list" in argv)
        return 0
    paths = [a for a in argv if not a.startswith("--")]
    rows = load(Path(paths[0]) if paths else CASES)
    print(f"{'cases':<22} {'N':>4} {'false-incomplete':>22} {'false-correct':>20} {'abstained':>18}")
    for name, part in groups(rows).items():
        m = measure(part)
        print(f"{name:<22} {m['n']:>4} {len(m['fi_cases']):>6} / {m['n_correct']:<4} {100 * m['false_incomplete']:5.1f} %"
              f" {len(m['fc_cases']):>6} / {m['n_wrong']:<4} {100 * m['false_correct']:5.1f} %"
              f" {len(m['abstained']):>6} / {m['n']:<4} {100 * m['abstention']:5.1f} %")
    if "--list" in argv:
        m = measure(rows)
        for kind, cases in (("false-incomplete", m["fi_cases"]), ("false-correct", m["fc_cases"])):
            for r in cases:
                missing = ", ".join(sorted(missing_figures(r["question"], r["gold"], r["answer"])))
                print(f"{kind}: {r['id']} ({r['split']}) gold {r['gold']!r} answer {r['answer']!r} missing [{missing}]")
        for r in m["abstained"]:
            why = judge_figures("correct", r["question"], r["gold"], r["answer"]).review
            print(f"abstained: {r['id']} ({r['split']}, {r['verdict']}) gold {r['gold']!r} answer {r['answer']!r}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
