"""What a fresh browser sees in `cli.py mlflow-ui` (issue 33 item 4), in headless Chromium over
the DevTools protocol (benchmarks/review_screenshots.py's Browser). Called by screenshots.sh:

    .venv/bin/python benchmarks/mlflow_home_screenshots.py BASE_URL OUT_DIR EXPERIMENT MODEL

With a new, empty profile it opens BASE_URL (MLflow's home page), clicks the experiment
EXPERIMENT in the home page's list, and fails unless the page that opens is the experiment's
runs table (its URL's tab is ``runs`` and a run name is shown, not the GenAI Traces page); then it
opens the registered model MODEL and fails unless its ``champion`` alias is shown. Writes

    OUT_DIR/home.png                 the home page of the fresh profile
    OUT_DIR/runs_from_home.png       the experiment as it opens from there: its runs table
    OUT_DIR/registered_model.png     the registered router with its alias
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.review_screenshots import Browser  # noqa: E402


async def run(base: str, out: Path, experiment: str, model: str, profile: Path) -> None:
    b = Browser(profile)
    await b.open()
    try:
        await b.send("Page.navigate", {"url": base + "/"})
        await b.wait_text(experiment)
        await asyncio.sleep(2)
        await b.shot(out / "home.png")
        print("home page, fresh profile: workflow setting =",
              await b.eval("localStorage.getItem('mlflow.workflowType_v1')"))
        await b.click_text(experiment, tags="a")
        await b.wait_text(" · ")  # a run name: 'lr · qc · onehot'
        await asyncio.sleep(3)
        href = await b.eval("location.href")
        tabs = await b.eval("[...document.querySelectorAll('[role=tab], [role=radio], a')].map(e => e.innerText)"
                            ".filter(t => t && t.length < 20).join('|')")
        await b.shot(out / "runs_from_home.png")
        print(f"clicked '{experiment}' on the home page -> {href}")
        if "/runs" not in href or "/traces" in href:
            raise SystemExit(f"the experiment did not open on its runs table: {href} (tabs: {tabs})")
        await b.send("Page.navigate", {"url": f"{base}/#/models/{model}"})
        await b.wait_text("champion")
        await asyncio.sleep(2)
        await b.shot(out / "registered_model.png")
        print(f"registered model {model}: alias 'champion' shown")
    finally:
        await b.close()


def main(argv: list[str]) -> int:
    base, out, experiment, model = argv[1], Path(argv[2]), argv[3], argv[4]
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        asyncio.run(run(base.rstrip("/"), out, experiment, model, Path(profile)))
    print(json.dumps({"wrote": [str(out / n) for n in ("home.png", "runs_from_home.png", "registered_model.png")]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
