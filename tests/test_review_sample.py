"""The review sample (ragrouter.review.sample.stratified, issue 34): seeded, strata take turns,
so a small sample covers every stratum before any stratum gives two."""

from __future__ import annotations

from collections import Counter

from ragrouter.review.sample import stratified


def test_strata_take_turns_and_the_seed_fixes_the_sample():
    items = [{"id_key": i, "s": s} for i, s in enumerate(["a"] * 30 + ["b"] * 5 + ["c"] * 2)]
    six = stratified(items, lambda it: it["s"], 6, seed=3)
    assert Counter(it["s"] for it in six) == {"a": 2, "b": 2, "c": 2}
    nine = stratified(items, lambda it: it["s"], 9, seed=3)
    counts = Counter(it["s"] for it in nine)
    assert counts["c"] == 2 and sorted((counts["a"], counts["b"])) == [3, 4]  # c is used up, a and b go on
    assert [it["id_key"] for it in stratified(items, lambda it: it["s"], 6, seed=3)] == [it["id_key"] for it in six]
    assert {it["id_key"] for it in stratified(items, lambda it: it["s"], 6, seed=4)} != {it["id_key"] for it in six}
    # the input order does not matter, only the seed
    assert [it["id_key"] for it in stratified(items[::-1], lambda it: it["s"], 6, seed=3)] == [it["id_key"] for it in six]
    assert len(stratified(items, lambda it: it["s"], 100, seed=0)) == 37
