"""Ingest speed of PDFs as filings come, before and after: pypdf's layout mode (the reader
before) against PDFium with pypdf as the fallback (the reader now), in one run; and the time
and memory in which a .docx zip bomb and deeply nested HTML are refused.

The 20 filings are made by ReportLab (tests/support/documents.py): ``--pages`` pages each, a
heading, eight paragraphs and a table of segments per page (15 to 24 rows by region, five
years), their metadata title an accession number.
Two of them carry an array of 150,000 elements in their catalog (pikepdf adds it: what a
tagged filing's structure tree holds, over pypdf's default limit of 100,000) and two are
encrypted by qpdf with an empty user password.

Readers timed on the same files, one after the other, ``--repeat`` times (the best of each):

* ``before``: pypdf 7.1 with its default limits, layout mode (the reader of the ingest before);
* ``pypdf-raised``: the same with the limits raised (the fallback now);
* ``after``: what the ingest runs now (:func:`ragrouter.ingest.pdf.read`: PDFium, else pypdf).

Then one ``cli.py ingest --format files`` of the folder into a fresh DuckDB store (the whole
command: reading, token counts, the store), and the refusals, each in its own process (its
peak memory is that process's).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_ingest.py [--files 20] [--pages 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ragrouter.ingest import files, pdf  # noqa: E402
from tests.support import documents  # noqa: E402

COMPANIES = ["ACME", "Beta", "Gamma", "Delta", "Epsilon", "Zeta", "Eta", "Theta", "Iota", "Kappa", "Lambda", "Mu",
             "Nu", "Xi", "Omicron", "Pi", "Rho", "Sigma", "Tau", "Upsilon"]


def make_filings(folder: Path, n: int, pages: int) -> list[Path]:
    import pikepdf

    out = []
    for i in range(n):
        path = documents.filing_pdf(folder / f"{COMPANIES[i % 20]}-{i:02d}-10q.pdf", f"{COMPANIES[i % 20]} Corp",
                                    seed=i, pages=pages, paragraphs=8, years=5, regions=3)
        if i in (3, 11):  # the array over pypdf's default limit
            with pikepdf.open(path, allow_overwriting_input=True) as p:
                p.Root.PieceInfo = pikepdf.Dictionary(Filing=pikepdf.Dictionary(
                    Private=pikepdf.Array(list(range(150_000)))))
                p.save(path)
        if i in (7, 15):  # encrypted, no password needed to open
            tmp = path.with_suffix(".tmp.pdf")
            path.rename(tmp)
            documents.encrypt(tmp, path, user="")
            tmp.unlink()
        out.append(path)
    return out


def read_before(path: Path) -> int:
    """The reader before: pypdf, default limits, layout mode; the pages read (raises as it did)."""
    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted:
            reader.decrypt("")
        return sum(bool(p.extract_text(extraction_mode="layout")) for p in reader.pages)


def read_with(readers: tuple[str, ...]):
    def read(path: Path) -> int:
        return sum(bool(p.strip()) for p in pdf.read(path, readers=readers)[1])
    return read


def time_reader(read, paths: list[Path], repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        ok, pages, failed = 0, 0, []
        t0 = time.perf_counter()
        for path in paths:
            try:
                pages += read(path)
                ok += 1
            except Exception as exc:  # noqa: BLE001 - the reader before raised on two of them
                failed.append(f"{path.name}: {type(exc).__name__}: {str(exc)[:80]}")
        took = time.perf_counter() - t0
        if best is None or took < best["seconds"]:
            best = {"seconds": round(took, 2), "files_read": ok, "pages": pages, "failed": failed}
    return best


_PROBE = """
import json, resource, sys, time
from pathlib import Path
t = time.perf_counter()
from ragrouter.ingest import files
try:
    files.read_document(Path(sys.argv[1]), sys.argv[1])
    why = "read"
except files.Unreadable as exc:
    why = str(exc)
print(json.dumps({"seconds": round(time.perf_counter() - t, 3), "why": why,
                  "maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def refusals(folder: Path) -> dict:
    import docx

    base = folder / "base.docx"
    d = docx.Document()
    d.add_paragraph("base")
    d.save(base)
    bomb, html = folder / "bomb.docx", folder / "nested.html"
    unpacked = documents.docx_bomb(bomb, base)
    documents.nested_html(html)
    out = {}
    for path, what in ((bomb, f"zip bomb {bomb.stat().st_size / 2**20:.1f} MiB → {unpacked / 2**30:.1f} GiB"),
                       (html, f"nested HTML {html.stat().st_size / 1e6:.1f} MB, 500,000 deep")):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True, timeout=600,
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        got = json.loads(done.stdout)
        got["process_seconds"] = round(time.perf_counter() - t0, 2)
        out[what] = got
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--pages", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        folder = Path(tmp) / "filings"
        folder.mkdir()
        t0 = time.perf_counter()
        paths = make_filings(folder, args.files, args.pages)
        made = time.perf_counter() - t0
        result = {"files": len(paths), "pages_each": args.pages, "made_in_s": round(made, 1),
                  "load_1min": round(os.getloadavg()[0], 2), "readers": {}}
        for name, read in (("before", read_before), ("pypdf-raised", read_with(("pypdf",))),
                           ("after", read_with(("pdfium", "pypdf")))):
            result["readers"][name] = time_reader(read, paths, args.repeat)
        b, a = result["readers"]["before"]["seconds"], result["readers"]["after"]["seconds"]
        result["speedup_after_vs_before"] = round(b / a, 1) if a else None
        db = f"duckdb:///{Path(tmp) / 'store.duckdb'}"
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, str(REPO / "cli.py"), "--db", db, "--create", "ingest", "--corpus",
                               "filings", "--format", "files", "filings"], cwd=tmp, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        result["ingest_command"] = {"seconds": round(time.perf_counter() - t0, 1), "exit": done.returncode,
                                    "said": done.stdout.strip().splitlines()[-1:] + done.stderr.strip().splitlines()[-3:]}
        result["refusals"] = refusals(Path(tmp))
        result["load_1min_after"] = round(os.getloadavg()[0], 2)
        result["peak_rss_mib_this_process"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['files']} filings × {args.pages} pages (made in {result['made_in_s']} s), load "
          f"{result['load_1min']} → {result['load_1min_after']}")
    for name, r in result["readers"].items():
        print(f"  {name:13s} {r['seconds']:7.2f} s  files read {r['files_read']}/{len(paths)}  pages {r['pages']}"
              + (f"  failed: {'; '.join(r['failed'])}" if r["failed"] else ""))
    print(f"  after vs before: {result['speedup_after_vs_before']}× faster")
    print(f"  ingest --format files (whole command): {result['ingest_command']}")
    for what, r in result["refusals"].items():
        print(f"  {what}: refused in {r['seconds']} s ({r['process_seconds']} s with the interpreter), "
              f"peak {r['maxrss_mib']} MiB: {r['why'][:90]}")


if __name__ == "__main__":
    main()
