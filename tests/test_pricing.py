"""Money next to tokens: prices per backend in run --dry-run, status and the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragrouter import config as config_module
from ragrouter.config import Config
from ragrouter.llm import pricing
from ragrouter.llm.gateway import Gateway
from ragrouter.report import money

try:
    from tests.fake_openai import FakeOpenAI
except ModuleNotFoundError:  # rootdir-less import mode
    from fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parent.parent
KEY_ENV = "RAGROUTER_TEST_PRICE_KEY"
PRICES = {"input": 2.0, "output": 8.0, "cached_input": 0.5}


def test_cost_arithmetic_and_bad_prices_name_the_setting():
    p = config_module.Prices(2.0, 8.0, 0.5)
    # 1,000 prompt tokens of which 400 cached, 250 completion tokens
    assert p.cost(1000, 250, 400) == pytest.approx((600 * 2.0 + 400 * 0.5 + 250 * 8.0) / 1e6)
    assert config_module.parse_prices("b", {"price_per_million": {"input": 1, "output": 3}}).cached_input == 1.0
    with pytest.raises(config_module.PriceError, match=r"backends\.b\.price_per_million\.output"):
        config_module.parse_prices("b", {"price_per_million": {"input": 1, "output": -3}})
    with pytest.raises(config_module.PriceError, match="unknown key"):
        config_module.parse_prices("b", {"price_per_million": {"input": 1, "output": 3, "cache": 1}})
    assert pricing.usd(None) == "-" and pricing.usd(1234.4) == "$1,234" and pricing.usd(0.5) == "$0.50"


def _config(srv) -> dict:
    backend = {"kind": "openai", "base_url": srv.base_url, "model": "paid-model", "api_key_env": KEY_ENV,
               "concurrency": 2, "timeout_s": 5, "retries": 0, "price_per_million": PRICES}
    return {"backends": {"paid": backend},
            "roles": {"generators": ["paid"], "extractor": "paid", "judge": "paid", "query_generator": "paid",
                      "embedder": "paid"}}


def test_billed_money_in_status_counts_provider_cached_tokens(store, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with FakeOpenAI(cached_prompt_tokens=3) as srv:
        cfg = Config({**Config.load().data, **_config(srv)}, source="t")
        with Gateway(cfg, store) as gw:
            replies = [gw.chat("paid", [{"role": "user", "content": f"question number {i} about rivers"}],
                               temperature=0.1, max_tokens=20, stage="answer", phase="gen") for i in range(3)]
            gw.flush()
    from ragrouter.commands.status import collect
    from ragrouter.stages.base import Scope

    data = collect(store, Scope(config=cfg))
    (row,) = [r for r in data["money"]["billed"] if r["stage"] == "answer"]
    prompt = sum(r.prompt_tokens for r in replies)
    completion = sum(r.completion_tokens for r in replies)
    assert row["prompt_tokens"] == prompt and row["cached_prompt_tokens"] == 9
    expected = ((prompt - 9) * 2.0 + 9 * 0.5 + completion * 8.0) / 1e6
    assert row["usd"] == pytest.approx(expected, rel=1e-6)
    assert data["money"]["total_usd"] == pytest.approx(expected, rel=1e-6)
    assert data["money"]["prices"] == [{"backend": "paid", "model": "paid-model", **PRICES}]
    # the report says which prices it used and what was billed
    from ragrouter.report.build import build_report

    md = build_report(store, Path(os.environ.get("TMPDIR", "/tmp")) / f"rep-{os.getpid()}", config=cfg)
    text = md.markdown.read_text()
    assert "## Cost in money" in text and "| paid | paid-model | 2 | 8 | 0.5 |" in text
    assert f"Total billed: **{pricing.usd(expected)}**" in text


def test_reasoning_tokens_are_priced_once_inside_the_completion_tokens(store, monkeypatch):
    """OpenAI's completion_tokens already include the hidden reasoning (billed as output): the
    ledger keeps reasoning_tokens beside them and the money counts them once."""
    monkeypatch.setenv(KEY_ENV, "k")
    with FakeOpenAI(provider="openai", reasoning_tokens=40) as srv:
        spec = _config(srv)
        spec["backends"]["paid"].update(model="o4-mini", preset="openai-reasoning", reasoning_allowance=500)
        cfg = Config({**Config.load().data, **spec}, source="t")
        with Gateway(cfg, store) as gw:
            reply = gw.chat("paid", [{"role": "user", "content": "why is the sky blue"}],
                            temperature=1.0, max_tokens=20, stage="answer", phase="gen")
            gw.flush()
    with store.connect() as conn:
        (row,) = [r for r in pricing.billed_by_stage(conn, cfg) if r["stage"] == "answer"]
    assert row["reasoning_tokens"] == 40 and row["completion_tokens"] == reply.completion_tokens > 40
    assert row["usd"] == pytest.approx((row["prompt_tokens"] * 2.0 + reply.completion_tokens * 8.0) / 1e6, rel=1e-9)
    assert "of which reasoning" in money.markdown_section(store, cfg)


def _cli(*args, env):
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=REPO, timeout=180)


def test_dry_run_and_status_print_dollars(tmp_path, monkeypatch):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"The river {i} flows into the sea near the city."
                                                                   " " * 3 + "It is long. " * 20})
                              for i in range(3)) + "\n")
    with FakeOpenAI() as srv:
        cfg_path = tmp_path / "priced.yaml"
        cfg_path.write_text(yaml.safe_dump(_config(srv)))
        env = {"RAGROUTER_DB": f"duckdb:///{tmp_path / 's.duckdb'}", KEY_ENV: "k"}
        assert _cli("db", "upgrade", env=env).returncode == 0
        r = _cli("ingest", "--corpus", "toy", "--format", "jsonl", str(docs), env=env)
        assert r.returncode == 0, r.stderr
        r = _cli("--config", str(cfg_path), "run", "--stage", "chunk", "--quiet", env=env)
        assert r.returncode == 0, r.stderr
        dry = _cli("--config", str(cfg_path), "run", "--stage", "extract", "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        assert srv.stats()["total"] == 0  # a dry run spends nothing
    assert "usd_max" in dry.stdout and "$" in dry.stdout
    assert "paid (paid-model): in 2 / out 8 / cached 0.5" in dry.stdout
    line = next(ln for ln in dry.stdout.splitlines() if ln.strip().startswith("extract"))
    cells = line.split()
    prompt, completion, cap = (int(cells[i].replace(",", "")) for i in (5, 6, 7))
    assert completion <= cap and cells[8] in ("prior", "cap") or cells[8].startswith("history:")
    assert cells[9] == pricing.usd((prompt * 2.0 + completion * 8.0) / 1e6)
    assert cells[10] == pricing.usd((prompt * 2.0 + cap * 8.0) / 1e6)
    st = _cli("--config", str(cfg_path), "status", env=env)
    assert st.returncode == 0 and "billed in total: $0.00" in st.stdout
