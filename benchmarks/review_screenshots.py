"""Screenshots of a review in MLflow's own trace UI, and a check that what a reviewer records
there is what `review pull` reads (issue 34), with headless Chromium (Debian's `chromium`).

    .venv/bin/python benchmarks/review_screenshots.py [OUT_DIR]   # default benchmarks/screenshots

It makes a small synthetic store in a temporary folder (ragrouter/report/synthetic.py), runs
`review start --n 6` into a temporary MLflow store, starts `cli.py mlflow-ui` on a free port,
and drives Chromium through the DevTools protocol (aiohttp's websocket client; no Selenium or
Playwright): it opens the first trace, shows its retriever span (the chunks) and LLM span (the
tokens), the judge's assessment, then records a human label on each trace exactly as a reviewer
does (+ beside the feedback 'label', Data Type String, the value, a rationale, Create), and
writes

    OUT_DIR/review_traces.png        the review experiment's Traces tab (judge label column)
    OUT_DIR/review_retriever.png     a trace's retriever span: the chunks put into the context
    OUT_DIR/review_judge.png         the judge's verdict as an LLM-judge assessment with its reason
    OUT_DIR/review_label_form.png    a human label being recorded
    OUT_DIR/review_label_done.png    the label recorded beside the judge's

then runs `review pull` and fails unless the store holds exactly the labels typed into the UI.
The UI and Chromium are stopped with SIGTERM to their process groups.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """Headless Chromium driven through the DevTools protocol."""

    def __init__(self, profile: Path, width: int = 1500, height: int = 1000):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", f"--remote-debugging-port={self.port}",
             f"--window-size={width},{height}", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.n = 0
        for _ in range(150):
            try:
                pages = [t for t in json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json"))
                         if t["type"] == "page"]
                if pages:
                    self.ws_url = pages[0]["webSocketDebuggerUrl"]
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("chromium did not start")

    async def open(self):
        import aiohttp

        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(self.ws_url, max_msg_size=0)
        await self.send("Page.enable")

    async def send(self, method, params=None):
        self.n += 1
        await self.ws.send_str(json.dumps({"id": self.n, "method": method, "params": params or {}}))
        while True:
            msg = json.loads((await self.ws.receive()).data)
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def eval(self, expr):
        r = await self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        return r.get("result", {}).get("value")

    async def shot(self, path: Path):
        path.write_bytes(base64.b64decode((await self.send("Page.captureScreenshot", {"format": "png"}))["data"]))

    async def mouse(self, x, y):
        for t in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", {"type": t, "x": x, "y": y, "button": "left", "clickCount": 1})
        await asyncio.sleep(0.6)

    async def click_text(self, text, tags="button, [role=button], [role=option], a, span, div, td"):
        pos = await self.eval(f"""(() => {{ const els = [...document.querySelectorAll({json.dumps(tags)})]
            .filter(e => e.innerText && e.innerText.trim() === {json.dumps(text)} && e.offsetParent !== null);
            if (!els.length) return null; const e = els[els.length - 1]; e.scrollIntoView({{block: 'center'}});
            const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
        if not pos:
            raise RuntimeError(f"nothing to click reads {text!r}")
        await self.mouse(*pos)

    async def click(self, component: str, index: int = 0):
        pos = await self.eval(f"""(() => {{ const e = document.querySelectorAll('[data-component-id="{component}"]')[{index}];
            if (!e) return null; e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
        if not pos:
            raise RuntimeError(f"no element {component}[{index}]")
        await self.mouse(*pos)

    async def wait_text(self, text, timeout=30):
        for _ in range(timeout * 5):
            if await self.eval(f"!!document.body && document.body.innerText.includes({json.dumps(text)})"):
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"the page never showed {text!r}")

    async def type_into(self, component: str, text: str):
        await self.click(component)
        await self.eval(f"""(() => {{ const i = document.querySelector('[data-component-id="{component}"]');
            const proto = i.tagName === 'TEXTAREA' ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
            Object.getOwnPropertyDescriptor(proto, 'value').set.call(i, '');
            i.dispatchEvent(new Event('input', {{bubbles: true}})); }})()""")
        await self.send("Input.insertText", {"text": text})
        await asyncio.sleep(0.3)

    async def close(self):
        await self.ws.close()
        await self.session.close()
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(10)


def cli(env, *args) -> str:
    out = subprocess.run([PY, str(REPO / "cli.py"), *args], env=env, capture_output=True, text=True, check=True)
    return out.stdout


async def review(base: str, exp_id: str, items: list[dict], out: Path, profile: Path) -> None:
    b = Browser(profile)
    await b.open()
    try:
        await b.send("Page.navigate", {"url": f"{base}/#/experiments/{exp_id}/traces"})
        await b.wait_text(items[0]["question"])
        await asyncio.sleep(2)
        for text in ("Got it",):  # first-visit hints
            try:
                await b.click_text(text)
            except RuntimeError:
                pass
        await b.eval("[...document.querySelectorAll('button')].filter(b => /close/i.test(b.getAttribute('aria-label') || ''))"
                     ".forEach(b => b.click())")  # the MLflow Assistant side panel
        await asyncio.sleep(1)
        await b.shot(out / "review_traces.png")
        for i, it in enumerate(items):
            await b.send("Page.navigate", {"url": f"{base}/#/experiments/{exp_id}/traces?traceId={it['trace_id']}"})
            await b.wait_text(it["root"])
            await asyncio.sleep(1)
            if i == 0:
                await b.click_text("retrieve")
                await asyncio.sleep(1)
                await b.shot(out / "review_retriever.png")
                await b.click_text(it["root"])
            await b.eval("(() => { const e = [...document.querySelectorAll('button')].find(b => b.innerText.trim().startsWith('Assess'));"
                         " if (e) e.click(); })()")
            await b.wait_text("Add feedback")
            if i == 0:
                await b.click("shared.model-trace-explorer.toggle-assessment-expanded")
                await asyncio.sleep(1)
                await b.shot(out / "review_judge.png")
            await b.click("shared.model-trace-explorer.add-feedback", 1)  # + beside 'label'
            await b.click("shared.model-trace-explorer.assessment-data-type-select")
            await b.click_text("String", tags="[role=option], [role=menuitem], [role=menuitemradio], li, span, div")
            await b.type_into("shared.model-trace-explorer.assessment-value-string-input", it["human"])
            await b.type_into("shared.model-trace-explorer.assessment-rationale-input", it["comment"])
            if i == 0:
                await b.shot(out / "review_label_form.png")
            await b.click_text("Create")
            await asyncio.sleep(2)
            await b.eval("""[...document.querySelectorAll('[data-component-id="shared.model-trace-explorer.toggle-assessment-expanded"]')]
                .forEach(e => e.click())""")  # the new label opens with its rationale (the judge's closes)
            await b.wait_text(it["comment"])
            if i == 0:
                await asyncio.sleep(1)
                await b.shot(out / "review_label_done.png")
    finally:
        await b.close()


def main(out: Path) -> int:
    from sqlalchemy import text

    sys.path.insert(0, str(REPO))
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate
    from ragrouter.report import synthetic

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        url = f"duckdb:///{tmp / 'store.duckdb'}"
        rows = synthetic.random_rows(3, n_corpora=1, queries_per_corpus=8, generators=("gen-a",), judges=("judge-x",),
                                     p_missing_run=0.0, p_old_config=0.0, p_correct=0.45, with_router=False)
        rows["human_labels"] = []  # only the labels typed into the UI
        engine = eng.make_engine(url)
        migrate.upgrade(engine)
        synthetic.insert_rows(engine, rows)
        eng.dispose_all()
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true",
               "RAGROUTER__routers__mlflow_uri": f"sqlite:///{tmp / 'mlflow' / 'mlflow.db'}"}
        print(cli(env, "--db", url, "review", "start", "--n", "6").strip())
        import mlflow

        mlflow.set_tracking_uri(env["RAGROUTER__routers__mlflow_uri"])
        exp = next(e for e in mlflow.search_experiments() if e.name.startswith("review-"))
        traces = mlflow.search_traces(locations=[exp.experiment_id], return_type="list")
        items = []
        for k, t in enumerate(sorted(traces, key=lambda t: int(t.info.tags["ragrouter.run_id"]))):
            judge = t.info.tags["ragrouter.judge_label"]
            human = judge if k % 3 else ("incorrect" if judge == "correct" else "correct")  # every third disagrees
            items.append({"question": t.info.request_preview, "root": t.data.spans[0].name, "human": human,
                          "comment": f"reviewer note {k}: {'agree' if human == judge else 'the judge is wrong'}",
                          "run_id": int(t.info.tags["ragrouter.run_id"]), "trace_id": t.info.trace_id})
        port = free_port()
        ui = subprocess.Popen([PY, str(REPO / "cli.py"), "mlflow-ui", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(300):
                try:
                    urllib.request.urlopen(base, timeout=1)
                    break
                except OSError:
                    time.sleep(0.2)
            asyncio.run(review(base, exp.experiment_id, items, out, tmp / "chrome"))
        finally:
            os.killpg(ui.pid, signal.SIGTERM)
            ui.wait(30)
        print(cli(env, "--db", url, "review", "pull").strip())
        engine = eng.make_engine(url)
        with engine.connect() as conn:
            got = {(int(r[0]), r[1], r[2]) for r in conn.execute(text("SELECT run_id, label, comment FROM human_labels"))}
        eng.dispose_all()
        typed = {(it["run_id"], it["human"], it["comment"]) for it in items}
        if got != typed:
            print(f"review_screenshots: the store holds {sorted(got)}, the UI was given {sorted(typed)}", file=sys.stderr)
            return 1
        print(f"review_screenshots: {len(got)} labels recorded in the MLflow UI and pulled; screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "benchmarks" / "screenshots"))
