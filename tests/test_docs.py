"""The user documentation stays navigable and true to the code.

* the generated reference pages (docs/reference/cli.md, schema.md, config.md) equal what
  ``python -m ragrouter.docsgen`` makes from the code now;
* every click command and subcommand, and every key of configs/default.yaml, is in them;
* every relative link of README.md, docs/**/*.md and benchmarks/**/*.md reaches an existing
  file (and, for a Markdown target, an existing heading);
* README.md stays short, and the user docs speak of the product, not of its history.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml

from ragrouter import docsgen

ROOT = Path(__file__).resolve().parent.parent
REFRESH = f"run {docsgen.COMMAND} to refresh"
README_LIMIT = 15 * 1024
HISTORY = ROOT / "benchmarks" / "CHANGELOG.md"  # the benchmarks' history: issue numbers belong there
# "issue 29", "#33", "session 7", "this session": the project's history, not the product
HISTORY_WORDS = re.compile(r"\bissues? #?\d+|(?<![\w/])#\d{1,3}\b|\bsessions? \d+\b|\bthis session\b", re.I)


def markdown_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "benchmarks").rglob("*.md"))]
    return [f for f in files if f.is_file()]


def user_docs() -> list[Path]:
    return [f for f in markdown_files() if f != HISTORY]


def prose(text: str) -> str:
    """Markdown without fenced code blocks and inline code spans."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def headings(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text (duplicates numbered)."""
    seen: dict[str, int] = {}
    out = set()
    body = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)
    for match in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", body, flags=re.M):
        base = docsgen.anchor(match.group(1))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


@pytest.mark.parametrize("name", ["cli.md", "schema.md", "config.md"])
def test_generated_reference_equals_the_committed_page(name):
    path = ROOT / "docs" / "reference" / name
    assert path.exists(), f"docs/reference/{name} is missing: {REFRESH}"
    assert path.read_text(encoding="utf-8") == docsgen.pages()[name], f"docs/reference/{name} is stale: {REFRESH}"


def click_paths(cmd: click.Command, path: str) -> list[str]:
    out = []
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in sorted(cmd.list_commands(ctx)):  # the root group loads its commands when asked
            sub = cmd.get_command(ctx, name)
            if not sub.hidden:
                out.append(f"{path} {name}")
                out.extend(click_paths(sub, f"{path} {name}"))
    return out


def test_every_command_and_subcommand_is_in_the_cli_reference():
    from ragrouter.cli import cli

    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    titled = set(re.findall(r"^#{2,3} (ragrouter(?: [\w-]+)*)$", page, flags=re.M))
    paths = click_paths(cli, "ragrouter")
    assert len(paths) >= 30
    missing = [p for p in paths if p not in titled]
    assert not missing, f"commands missing from docs/reference/cli.md: {missing}; {REFRESH}"
    for cmd in ("ragrouter serve", "ragrouter review pull", "ragrouter plan"):
        assert cmd in paths


def yaml_keys(data, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        out.append(path)
        if isinstance(value, dict):
            out.extend(yaml_keys(value, path))
    return out


def test_every_config_key_is_in_the_config_reference():
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    keys = yaml_keys(data)
    assert "decisions.epsilon" in keys and "backends.openai.price_per_million.input" in keys
    missing = [k for k in keys if f"| `{k}` |" not in page]
    assert not missing, f"config keys missing from docs/reference/config.md: {missing[:10]}; {REFRESH}"


def test_every_relative_link_resolves():
    broken = []
    for path in markdown_files():
        text = path.read_text(encoding="utf-8")
        for target in LINK.findall(prose(text)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I):  # http:, https:, mailto:
                continue
            file_part, _, fragment = target.partition("#")
            dest = path if not file_part else (path.parent / file_part).resolve()
            where = f"{path.relative_to(ROOT)} -> {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in headings(dest.read_text(encoding="utf-8")):
                broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_checker_sees_a_broken_link_and_a_broken_anchor():
    text = "See [a](missing.md), [b](#nowhere) and `[c](not-a-link.md)`.\n\n## Real heading\n"
    assert LINK.findall(prose(text)) == ["missing.md", "#nowhere"]
    assert "real-heading" in headings(text) and "nowhere" not in headings(text)
    assert docsgen.anchor("ragrouter db upgrade") == "ragrouter-db-upgrade"
    assert docsgen.anchor("`v_oracle_label`: the rule") == "v_oracle_label-the-rule"


def test_readme_is_short_and_opens_with_the_two_setup_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= README_LIMIT, f"README.md is {len(text.encode())} bytes (limit {README_LIMIT})"
    first_block = re.search(r"```\n(.*?)```", text, flags=re.S).group(1)
    assert first_block.splitlines()[0].startswith("make run")
    assert first_block.splitlines()[1].startswith("make test")
    for page in ("docs/tutorial/", "docs/how-to/", "docs/reference/", "docs/explanation/"):
        assert f"]({page}" in text, page


def test_user_docs_speak_of_the_product_not_its_history():
    pattern = HISTORY_WORDS
    found = []
    for path in user_docs():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in pattern.finditer(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {match.group(0)!r}")
    assert not found, "history in the user docs (it belongs in benchmarks/CHANGELOG.md):\n" + "\n".join(found[:40])


def test_the_history_pattern_catches_what_it_should():
    pattern = HISTORY_WORDS
    for text in ("(issue 29)", "issue #19", "see #33", "Session 7, idle"):
        assert pattern.search(text), text
    for text in ("mlflow/mlflow#3144", "ollama/ollama#2677", "a session advisory lock", "round 2 of 3"):
        assert not pattern.search(text), text
