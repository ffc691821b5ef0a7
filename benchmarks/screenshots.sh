#!/usr/bin/env bash
# Screenshots of what the MLflow UI shows for trained routers: the runs table and the compare
# view, taken with headless Chromium (Debian's `chromium` package: apt-get install chromium).
#
#   benchmarks/screenshots.sh [OUT_DIR]          # default OUT_DIR: benchmarks/screenshots
#
# It makes a demo-sized synthetic store in a temporary folder (ragrouter/report/synthetic.py:
# two corpora, one judge, every paradigm run), runs `routers train` on it with a temporary
# MLflow store, starts `cli.py mlflow-ui` on a free port, and writes
#   OUT_DIR/runs_table.png   the experiment's runs table (one row per trained router)
#   OUT_DIR/runs_table_routers_view.png   the same on the shared 'routers' view (metric columns)
#   OUT_DIR/compare.png      MLflow's compare view of every run
#   OUT_DIR/home.png, runs_from_home.png   a fresh profile's home page, and the experiment clicked
#                            there opening on its runs table (benchmarks/mlflow_home_screenshots.py)
#   OUT_DIR/registered_model.png   the router promoted by `routers train --promote`, with its alias
# then stops the UI (SIGTERM: its whole process group) and removes the temporary folder.
# Set RAGROUTER_SCREENSHOT_DB / RAGROUTER_SCREENSHOT_MLFLOW to use an existing store instead.
# The HTML report: benchmarks/report_screenshot.sh [REPORT_DIR] [OUT_PNG] (same Chromium).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$REPO/benchmarks/screenshots}"
PY="${PYTHON:-$REPO/.venv/bin/python}"
CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$CHROMIUM" ]; then
    echo "screenshots.sh: no chromium on PATH (Debian: apt-get install chromium)" >&2
    exit 2
fi
mkdir -p "$OUT"
WORK="$(mktemp -d)"
UI_PID=""
cleanup() {
    if [ -n "$UI_PID" ] && kill -0 "$UI_PID" 2>/dev/null; then
        kill -TERM "$UI_PID"
        wait "$UI_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
export MLFLOW_DISABLE_TELEMETRY=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

DB="${RAGROUTER_SCREENSHOT_DB:-}"
MLFLOW_URI="${RAGROUTER_SCREENSHOT_MLFLOW:-}"
if [ -z "$DB" ]; then
    DB="duckdb:///$WORK/store.duckdb"
    MLFLOW_URI="sqlite:///$WORK/mlflow/mlflow.db"
    "$PY" - "$WORK" <<'EOF'
import sys
from pathlib import Path

from tests.support.router_store import make_store

make_store(Path(sys.argv[1]) / "store.duckdb", seed=0)
EOF
    RAGROUTER__routers__mlflow_uri="$MLFLOW_URI" RAGROUTER__routers__encoders='[onehot]' RAGROUTER__routers__folds=3 \
        "$PY" "$REPO/cli.py" --db "$DB" routers train --router lr --router xgboost --router dnn \
        --router best_fixed --router random --features qc --features c --promote correct_rate
fi

PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
RAGROUTER__routers__mlflow_uri="$MLFLOW_URI" "$PY" "$REPO/cli.py" mlflow-ui --port "$PORT" > "$WORK/ui.out" 2>&1 &
UI_PID=$!
URL="http://127.0.0.1:$PORT"
for _ in $(seq 1 240); do
    if curl -fsS "$URL/health" > /dev/null 2>&1; then break; fi
    sleep 0.5
done
curl -fsS "$URL/health" > /dev/null
cat "$WORK/ui.out"

EXP_ID="$(curl -fsS "$URL/api/2.0/mlflow/experiments/get-by-name?experiment_name=ragrouter" \
          | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["experiment"]["experiment_id"])')"
RUN_IDS="$(curl -fsS -X POST -H 'Content-Type: application/json' "$URL/api/2.0/mlflow/runs/search" \
           -d "{\"experiment_ids\": [\"$EXP_ID\"], \"max_results\": 50}" \
           | "$PY" -c 'import json, sys; print(json.dumps([r["info"]["run_id"] for r in json.load(sys.stdin)["runs"]]))')"
COMPARE="$URL/#/compare-runs?runs=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$RUN_IDS")&experiments=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "[\"$EXP_ID\"]")"

shot() {  # shot URL FILE
    local profile
    profile="$(mktemp -d "$WORK/chromium-XXXX")"
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --window-size=1600,1000 --virtual-time-budget=20000 \
        --hide-scrollbars --screenshot="$2" "$1" > "$WORK/chromium.log" 2>&1 || {
        cat "$WORK/chromium.log" >&2
        return 1
    }
    echo "wrote $2"
}
shot "$URL/#/experiments/$EXP_ID/runs" "$OUT/runs_table.png"
shot "$URL/#/experiments/$EXP_ID/runs?viewStateShareKey=routers" "$OUT/runs_table_routers_view.png"
shot "$COMPARE" "$OUT/compare.png"
# a fresh profile from the home page: the experiment opens on its runs table; the registered router
MODEL="$(curl -fsS "$URL/api/2.0/mlflow/registered-models/search?max_results=10" \
         | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["registered_models"][0]["name"])')"
"$PY" "$REPO/benchmarks/mlflow_home_screenshots.py" "$URL" "$OUT" ragrouter "$MODEL"
