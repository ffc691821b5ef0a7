"""docs/FIDELITY.md: every config key its tables cite exists in configs/default.yaml, it covers
the paper's sections and the paradigm settings, and the config header points to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "FIDELITY.md"
DEFAULT = ROOT / "configs" / "default.yaml"
KEY = re.compile(r"`([A-Za-z0-9_.\-]+)`")
# sections whose every setting must have a row (the retrieval / graph / generation settings)
COMPLETE_SECTIONS = ("chunking", "extraction", "generation", "retrieval")


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header cells, body rows) of every Markdown table."""
    out, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            header, body = block[0], [r for r in block[2:]]
            out.append((header, body))
            block = []
    return out


def cited_keys(text: str, column: str = "config key") -> list[str]:
    keys = []
    for header, body in tables(text):
        col = [i for i, h in enumerate(header) if h.lower() == column]
        for row in body:
            for i in col:
                keys += KEY.findall(row[i]) if i < len(row) else []
    return keys


def resolve(data: dict, dotted: str):
    """The value at ``dotted`` (a path through mappings; a map key may contain dots, e.g. a model name)."""
    node, rest = data, dotted
    while rest:
        if not isinstance(node, dict):
            raise KeyError(dotted)
        for key in sorted(node, key=lambda k: -len(str(k))):  # longest key first
            k = str(key)
            if rest == k or rest.startswith(k + "."):
                node, rest = node[key], rest[len(k) + 1:]
                break
        else:
            raise KeyError(dotted)
    return node


def leaf_paths(node, prefix: str) -> list[str]:
    if isinstance(node, dict) and node and not {"default"} <= set(node):
        return [p for k, v in node.items() for p in leaf_paths(v, f"{prefix}.{k}")]
    return [prefix]  # a leaf, or a per-embedder map (cited as a whole)


@pytest.fixture(scope="module")
def doc() -> str:
    assert DOC.exists(), "docs/FIDELITY.md is missing"
    return DOC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def default() -> dict:
    return yaml.safe_load(DEFAULT.read_text(encoding="utf-8"))


def test_every_cited_config_key_exists_in_default_yaml(doc, default):
    keys = cited_keys(doc)
    assert len(keys) >= 40, "the tables cite suspiciously few config keys"
    missing = []
    for key in keys:
        try:
            resolve(default, key)
        except KeyError:
            missing.append(key)
    assert not missing, f"docs/FIDELITY.md cites keys that configs/default.yaml lacks: {missing}"


def test_every_demo_key_exists_in_the_demo_config(doc):
    from ragrouter.config import Config

    demo = Config.load(ROOT / "configs" / "demo.yaml", env={}).data
    keys = cited_keys(doc, "demo key")
    assert "demo.chunks" in keys and "retrieval.token_budget" in keys
    missing = [k for k in keys if not _exists(demo, k)]
    assert not missing, f"docs/FIDELITY.md's demo table cites keys that configs/demo.yaml lacks: {missing}"


def _exists(data: dict, key: str) -> bool:
    try:
        resolve(data, key)
        return True
    except KeyError:
        return False


def test_the_key_check_itself_rejects_unknown_keys(default):
    assert resolve(default, "retrieval.min_similarity.all-MiniLM-L6-v2") is not None
    assert resolve(default, "backends.local-qwen-0.5b.concurrency") == 2
    for bad in ("retrieval.no_such_key", "retrieval.top_k.deeper", "nosection"):
        with pytest.raises(KeyError):
            resolve(default, bad)
    fake = "| item | config key |\n|---|---|\n| x | `retrieval.top_k`, `a.b` |\n"
    assert cited_keys(fake) == ["retrieval.top_k", "a.b"]


def test_every_retrieval_graph_and_generation_setting_has_a_row(doc, default):
    cited = set(cited_keys(doc))
    wanted = [p for s in COMPLETE_SECTIONS for p in leaf_paths(default[s], s)]
    assert "retrieval.min_similarity" in wanted and "extraction.timeout_s" in wanted
    assert [p for p in wanted if p not in cited] == []


def test_the_doc_covers_the_papers_sections_and_algorithms(doc):
    for heading in ("## A.1", "## A.2", "A.3", "B Paradigms", "C Evaluation", "D Labels and routers",
                    "## The demo"):
        assert heading in doc, heading
    for item in ("Alg. 3", "Alg. 4", "eq. 9", "eqs. 7–8", "eqs. 10–12", "eq. 13", "eqs. 14–15",
                 "eq. 2", "eq. 4", "eq. 5", "eq. 6", "maximum degree centrality", "macro-F1", "C.R"):
        assert item in doc, item
    rows = sum(len(body) for _, body in tables(doc))
    assert rows >= 70


def test_default_yaml_header_points_to_the_table():
    header = "".join(line for line in DEFAULT.read_text(encoding="utf-8").splitlines(True)[:12]
                     if line.startswith("#"))
    assert "docs/FIDELITY.md" in header
    assert "Every hyperparameter defaults to the paper's value" not in header
