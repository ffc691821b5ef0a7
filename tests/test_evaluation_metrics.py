"""Tests for ragrouter.evaluation: sentence splitter and the App. C.1 metrics (eqs. 10–15)."""

from __future__ import annotations

import numpy as np
import pytest

from ragrouter.evaluation.metrics import (
    SemanticF1,
    SentenceEmbeddingCache,
    faithfulness,
    faithfulness_batch,
    soft_coverage,
    soft_coverage_batch,
)
from ragrouter.common.sentences import split_sentences
from ragrouter.llm.encoder import get_encoder, minilm_path

# --------------------------------------------------------------------------- sentence splitter


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", []),
        ("   \n\n  ", []),
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        (
            "Dr. Smith met Mr. Jones at St. Mary's. They talked.",
            ["Dr. Smith met Mr. Jones at St. Mary's.", "They talked."],
        ),
        (
            "Use a solvent, e.g. Acetone or ethanol, i.e. Polar ones. Then wait.",
            ["Use a solvent, e.g. Acetone or ethanol, i.e. Polar ones.", "Then wait."],
        ),
        ("The rate rose 3.5 percent. It was 2.75 in 2019. Then it fell.",
         ["The rate rose 3.5 percent.", "It was 2.75 in 2019.", "Then it fell."]),
        ("See Fig. 3 and No. 5 for details. I said no. Then I left.",
         ["See Fig. 3 and No. 5 for details.", "I said no.", "Then I left."]),
        ("The U.S. Army arrived at 5 p.m. sharp. J. K. Rowling wrote it.",
         ["The U.S. Army arrived at 5 p.m. sharp.", "J. K. Rowling wrote it."]),
        ("Apples, pears, etc. Bananas too. Apples etc. are fruit.",
         ["Apples, pears, etc.", "Bananas too.", "Apples etc. are fruit."]),
        ('He said "Go home." Then he left.', ['He said "Go home."', "Then he left."]),
        ("Wait... What?! Fine.", ["Wait...", "What?!", "Fine."]),
        ("Version v1.2.3 is out. Visit example.com today.", ["Version v1.2.3 is out.", "Visit example.com today."]),
        (
            "Answer:\n1. First point.\n2) Second point\n- bullet a\n* bullet b\n• bullet c\n## Heading\nText",
            ["Answer:", "First point.", "Second point", "bullet a", "bullet b", "bullet c", "Heading", "Text"],
        ),
        (
            "This sentence is hard\nwrapped in the middle.\nNew line here.\n\nNew paragraph",
            ["This sentence is hard wrapped in the middle.", "New line here.", "New paragraph"],
        ),
        ("Title line\nBody starts here.", ["Title line", "Body starts here."]),
        ("北京是中国的首都。上海很大！", ["北京是中国的首都。", "上海很大！"]),
        ("---\n***\n. . .", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_split_sentences_docstring_example():
    import doctest

    from ragrouter.common import sentences

    result = doctest.testmod(sentences)
    assert result.attempted == 1 and result.failed == 0


def test_split_sentences_is_deterministic_and_typed():
    text = "Alpha beta. Gamma delta! " * 50
    assert split_sentences(text) == split_sentences(text)
    assert len(split_sentences(text)) == 100
    with pytest.raises(TypeError, match="expects str"):
        split_sentences(None)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def enc():
    return get_encoder()


class DictEncoder:
    """A fake encoder with hand-set vectors, for exact thresholds; counts what it encodes."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.seen: list[str] = []

    def encode(self, texts, batch_size=32):
        self.seen.extend(texts)
        return np.stack([self.table[t] for t in texts])


def _direct_matrix(enc, rows: list[str], cols: list[str]) -> np.ndarray:
    a = enc.encode(rows)
    b = enc.encode(cols)
    return a @ b.T


# --------------------------------------------------------------------------- semantic F1

CANDS = [
    "The cat sat on the mat.",
    "Paris is the capital of France.",
    "Stock prices fell sharply in March.",
    "Aspirin reduces fever and inflammation; it also thins the blood.",
    "I cannot answer",
]
REFS = [
    "A cat was sitting on the mat.",
    "The capital of France is Paris.",
    "The weather is nice today.",
    "Aspirin lowers fever, reduces inflammation and has an anticoagulant effect.",
    "The treaty was signed in 1648 in Westphalia.",
]


@pytest.fixture(scope="module")
def sf1():
    return SemanticF1()


@pytest.fixture(scope="module")
def reference_f1():
    from bert_score import BERTScorer

    scorer = BERTScorer(model_type=str(minilm_path()), num_layers=6, lang="en")
    return scorer.score(CANDS, REFS)[2].numpy()


def test_semantic_f1_equals_bert_score(sf1, reference_f1):
    ours = np.array(sf1.score(CANDS, REFS))
    np.testing.assert_allclose(ours, reference_f1, atol=1e-6, rtol=0)
    assert ours[1] > ours[2] + 0.3  # paraphrase vs unrelated
    assert sf1.name == "bertscore:all-MiniLM-L6-v2:L6"


def test_semantic_f1_prf_is_harmonic_mean(sf1):
    for p, r, f in sf1.score_prf(CANDS[:3], REFS[:3]):
        assert f == pytest.approx(2 * p * r / (p + r), abs=1e-6)


def test_semantic_f1_identical_is_one(sf1):
    assert sf1.score(["Paris is the capital of France."], ["Paris is the capital of France."])[0] == pytest.approx(
        1.0, abs=1e-5
    )


def test_semantic_f1_empty_candidates(sf1, reference_f1):
    cands = ["", CANDS[0], "   ", CANDS[1]]
    refs = [REFS[0], REFS[0], REFS[1], REFS[1]]
    scores = sf1.score(cands, refs)
    assert scores[0] == 0.0 and scores[2] == 0.0
    np.testing.assert_allclose(scores[1], reference_f1[0], atol=1e-5)
    np.testing.assert_allclose(scores[3], reference_f1[1], atol=1e-5)
    assert sf1.score(["", ""], ["a", "b"]) == [0.0, 0.0]
    assert sf1.score([], []) == []


def test_semantic_f1_bad_input(sf1, tmp_path):
    with pytest.raises(ValueError, match="2 candidates but 1 references"):
        sf1.score(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no Hugging Face model folder"):
        SemanticF1(model_path=tmp_path)


def test_semantic_f1_configurable_layer():
    from bert_score import BERTScorer

    sf3 = SemanticF1(model_path=minilm_path(), num_layers=3)
    assert sf3.name.endswith(":L3")
    ours = np.array(sf3.score(CANDS[:3], REFS[:3]))
    ref = BERTScorer(model_type=str(minilm_path()), num_layers=3, lang="en").score(CANDS[:3], REFS[:3])[2].numpy()
    np.testing.assert_allclose(ours, ref, atol=1e-6, rtol=0)


# --------------------------------------------------------------------------- soft coverage


def test_soft_coverage_identical_is_one(enc):
    text = "Paris is the capital of France. It lies on the Seine."
    assert soft_coverage(text, text, enc) == pytest.approx(1.0, abs=1e-5)


def test_soft_coverage_empty_answer(enc):
    assert soft_coverage("", "Paris is the capital of France.", enc) == 0.0
    assert soft_coverage("  \n ", "Paris is the capital of France.", enc) == 0.0
    assert soft_coverage("Paris.", "", enc) == 0.0


def test_soft_coverage_matches_numpy(enc):
    answer = "Paris is the capital of France. The city has many museums. Bread is popular."
    gold = "The capital of France is Paris. The Louvre is in Paris."
    ans_s = split_sentences(answer)
    gold_s = split_sentences(gold)
    assert len(ans_s) == 3 and len(gold_s) == 2
    sims = _direct_matrix(enc, gold_s, ans_s)
    expected = float(sims.max(axis=1).mean())
    assert soft_coverage(answer, gold, enc) == pytest.approx(expected, abs=1e-5)
    assert 0.3 < expected < 0.99


def test_soft_coverage_exact_with_hand_set_vectors():
    enc = DictEncoder({"G1.": [1, 0, 0], "G2.": [0, 1, 0], "A1.": [0.6, 0.8, 0], "A2.": [0, 0, 1]})
    # gold G1 → best 0.6 (A1), G2 → best 0.8 (A1): mean 0.7
    assert soft_coverage("A1. A2.", "G1. G2.", enc) == pytest.approx(0.7, abs=1e-6)


# --------------------------------------------------------------------------- faithfulness


def test_faithfulness_identical_is_one(enc):
    answer = "Paris is the capital of France. It lies on the Seine."
    hard, soft = faithfulness(answer, ["Paris is the capital of France.", "It lies on the Seine."], enc)
    assert hard == 1.0
    assert soft == pytest.approx(1.0, abs=1e-5)


def test_faithfulness_one_of_two_sentences_supported(enc):
    answer = "Paris is the capital of France. Bananas are rich in potassium."
    retrieved = ["Paris is the capital of France. It lies on the Seine.", "The Eiffel Tower was built in 1889."]
    ans_s = split_sentences(answer)
    ctx_s = [s for t in retrieved for s in split_sentences(t)]
    best = _direct_matrix(enc, ans_s, ctx_s).max(axis=1)
    assert best[0] >= 0.7 > best[1]  # the case really is "exactly one passes"
    hard, soft = faithfulness(answer, retrieved, enc)
    assert hard == 0.5
    assert soft == pytest.approx(float(best.mean()), abs=1e-5)


def test_faithfulness_threshold_is_inclusive_and_configurable():
    enc = DictEncoder({"A1.": [1, 0], "A2.": [0.6, 0.8], "C1.": [1, 0]})
    # best cosines: A1 → 1.0, A2 → 0.6
    assert faithfulness("A1. A2.", ["C1."], enc, tau=0.6) == pytest.approx((1.0, 0.8), abs=1e-6)
    assert faithfulness("A1. A2.", ["C1."], enc, tau=0.61) == pytest.approx((0.5, 0.8), abs=1e-6)
    assert faithfulness("A1. A2.", ["C1."], enc) == pytest.approx((0.5, 0.8), abs=1e-6)


def test_faithfulness_no_context_or_answer(enc):
    assert faithfulness("Paris is the capital of France.", [], enc) == (0.0, 0.0)
    assert faithfulness("Paris is the capital of France.", ["", "  "], enc) == (0.0, 0.0)
    assert faithfulness("", ["Paris is the capital of France."], enc) == (0.0, 0.0)
    with pytest.raises(TypeError, match="context #0 is a str"):
        faithfulness_batch(["a"], ["not a list"], enc)


# --------------------------------------------------------------------------- batch variants


def test_batch_variants_equal_single_and_encode_each_sentence_once():
    table = {
        "A1.": [1, 0, 0],
        "A2.": [0.6, 0.8, 0],
        "G1.": [0, 1, 0],
        "G2.": [0, 0, 1],
        "C1.": [0.8, 0.6, 0],
        "C2.": [0, 0.6, 0.8],
    }
    answers = ["A1. A2.", "A2.", "A1. A2.", ""]
    golds = ["G1. G2.", "G1.", "G1.", "G1."]
    contexts = [["C1. C2."], ["C1."], ["C2.", "C1."], ["C1."]]
    enc = DictEncoder(table)
    cov = soft_coverage_batch(answers, golds, enc)
    assert sorted(enc.seen) == sorted(["A1.", "A2.", "G1.", "G2."])  # each distinct sentence once
    single = [soft_coverage(a, g, DictEncoder(table)) for a, g in zip(answers, golds)]
    assert cov == pytest.approx(single, abs=1e-7)
    assert cov[3] == 0.0

    enc = DictEncoder(table)
    faith = faithfulness_batch(answers, contexts, enc, tau=0.7)
    assert sorted(enc.seen) == sorted(["A1.", "A2.", "C1.", "C2."])
    single = [faithfulness(a, c, DictEncoder(table), tau=0.7) for a, c in zip(answers, contexts)]
    assert faith == single
    # run 0: A1 → max(0.8, 0) = 0.8; A2 → max(0.96, 0.48) = 0.96 → hard 1.0, soft 0.88
    assert faith[0] == pytest.approx((1.0, 0.88), abs=1e-6)
    assert faith[3] == (0.0, 0.0)

    with pytest.raises(ValueError, match="2 answers but 1 gold"):
        soft_coverage_batch(["a", "b"], ["a"], enc)


def test_shared_cache_encodes_across_calls():
    table = {"A1.": [1, 0], "G1.": [0, 1], "C1.": [0.6, 0.8]}
    enc = DictEncoder(table)
    cache = SentenceEmbeddingCache(enc, max_items=10)
    soft_coverage_batch(["A1."], ["G1."], enc, cache=cache)
    faith = faithfulness_batch(["A1."], [["C1."]], enc, cache=cache)
    assert enc.seen == ["A1.", "G1.", "C1."]
    assert cache.encoded == 3 and cache.hits == 1 and len(cache) == 3
    assert faith == [pytest.approx((0.0, 0.6), abs=1e-6)]
    with pytest.raises(ValueError, match="different encoder"):
        soft_coverage_batch(["A1."], ["G1."], DictEncoder(table), cache=cache)


def test_cache_evicts_least_recently_used():
    table = {f"S{i}.": [1.0, float(i)] for i in range(5)}
    enc = DictEncoder(table)
    cache = SentenceEmbeddingCache(enc, max_items=2)
    cache.embed(["S0.", "S1."])
    cache.embed(["S0."])  # S0 becomes most recent
    cache.embed(["S2."])  # evicts S1
    cache.embed(["S0.", "S1."])
    assert enc.seen == ["S0.", "S1.", "S2.", "S1."]
    out = cache.embed(["S2.", "S1."])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)


def test_batch_with_real_encoder_matches_single(enc):
    answers = ["Paris is the capital of France. Bananas are yellow.", "The Seine flows through Paris."]
    golds = ["The capital of France is Paris.", "Paris lies on the Seine river."]
    contexts = [["Paris is the capital of France."], ["The Seine is a river in France. It flows through Paris."]]
    cov = soft_coverage_batch(answers, golds, enc)
    faith = faithfulness_batch(answers, contexts, enc)
    for i in range(2):
        assert cov[i] == pytest.approx(soft_coverage(answers[i], golds[i], enc), abs=1e-5)
        h, s = faithfulness(answers[i], contexts[i], enc)
        assert faith[i][0] == h
        assert faith[i][1] == pytest.approx(s, abs=1e-5)


def test_coverage_faithfulness_batch_is_both_metrics_from_one_encoder_call():
    from ragrouter.evaluation.metrics import coverage_faithfulness_batch

    table = {
        "A1.": [1, 0, 0], "A2.": [0.6, 0.8, 0], "G1.": [0, 1, 0], "G2.": [0, 0, 1],
        "C1.": [0.8, 0.6, 0], "C2.": [0, 0.6, 0.8], "C3.": [0, 0, 1],
    }
    answers = ["A1. A2.", "A2.", "A1. A2.", "", "A1."]
    golds = ["G1. G2.", "G1.", "G1.", "G1.", "G2. A1."]
    contexts = [["C1. C2."], None, ["C2.", "C1."], ["C3."], []]
    enc = DictEncoder(table)
    calls = []
    real_encode = enc.encode
    enc.encode = lambda texts, batch_size=32: calls.append(list(texts)) or real_encode(texts, batch_size)
    cache = SentenceEmbeddingCache(enc, max_items=100)
    cov, faith = coverage_faithfulness_batch(answers, golds, contexts, enc, tau=0.7, cache=cache)
    assert len(calls) == 1 and sorted(calls[0]) == sorted(["A1.", "A2.", "G1.", "G2.", "C1.", "C2."])  # C3: no answer
    assert cov == soft_coverage_batch(answers, golds, DictEncoder(table))
    sep = faithfulness_batch(answers, [c or [] for c in contexts], DictEncoder(table), tau=0.7)
    assert faith == [None if c is None else f for c, f in zip(contexts, sep)]
    assert faith[0] == pytest.approx((1.0, 0.88), abs=1e-6) and faith[3] == (0.0, 0.0) and faith[4] == (0.0, 0.0)
    assert cov[4] == pytest.approx(0.5, abs=1e-6)  # G2 → 0 (A1 ⟂ G2), A1 → 1
    # only context sentences stay memoised: the next batch encodes its answers, not C1/C2
    assert sorted(cache._vecs) == ["C1.", "C2."]
    coverage_faithfulness_batch(["A2. G2."], ["G1."], [["C1."]], enc, cache=cache)
    assert sorted(calls[1]) == ["A2.", "G1.", "G2."]
    with pytest.raises(ValueError, match="2 answers but 1 contexts"):
        coverage_faithfulness_batch(["a", "b"], ["a", "b"], [None], enc)


def test_semantic_f1_of_a_pair_does_not_depend_on_its_batch(sf1):
    """bert-score pads a batch of pairs with cosine-0 positions, which beat a token's negative
    best cosine: its batched F1 of a pair depends on the other pairs' lengths. Ours is the
    pair's F1 alone, whatever it is batched with."""
    from bert_score import BERTScorer

    ref = BERTScorer(model_type=str(minilm_path()), num_layers=6, lang="en")
    long_c, long_r = " ".join(CANDS[:4]) * 3, " ".join(REFS[:4]) * 3
    cand = ("In most cases, however, the entire cervix must be removed. Ultrasound is usually done at the same "
            "time to help pinpoint the suspicious areas. Differentiated cancers usually grow and spread slowly.")
    gold = "Radiation therapy and systemic therapy are treatments for BCC besides surgery."
    alone = float(ref.score([cand], [gold])[2][0])
    batched = float(ref.score([long_c, cand], [long_r, gold])[2][1])
    assert abs(batched - alone) > 1e-5  # the artefact is real for this pair
    for c, r in [(cand, gold), *zip(CANDS, REFS)]:
        alone = float(ref.score([c], [r])[2][0])
        assert sf1.score([c], [r])[0] == pytest.approx(alone, abs=1e-6)
        assert sf1.score([long_c, c, c], [long_r, r, REFS[0]])[1] == pytest.approx(alone, abs=1e-6)
