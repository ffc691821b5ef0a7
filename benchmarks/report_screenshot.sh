#!/usr/bin/env bash
# Screenshot of an HTML report (`cli.py report` writes REPORT_DIR/report.html) as headless
# Chromium renders it, offline (file://, no network), so anyone can see what the page shows.
#
#   benchmarks/report_screenshot.sh [REPORT_DIR] [OUT_PNG]
#       REPORT_DIR  default: reports/latest          (any folder holding a report.html)
#       OUT_PNG     default: benchmarks/screenshots/report.png
#
# Writes OUT_PNG, the whole page (its height measured by a first, scripted render of a copy of
# the page; the report itself holds no script), and OUT_PNG's pages as <name>_page_NN.png
# (PAGE_HEIGHT pixels each, readable one by one). Settings (environment): WIDTH (default 1400
# px), PAGE_HEIGHT (default 1800), MAX_HEIGHT (default 60000; a longer page is cut there).
# Needs Debian's `chromium` package (apt-get install chromium) and the repository's .venv (PIL).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${1:-$REPO/reports/latest}"
OUT="${2:-$REPO/benchmarks/screenshots/report.png}"
PY="${PYTHON:-$REPO/.venv/bin/python}"
WIDTH="${WIDTH:-1400}"
PAGE_HEIGHT="${PAGE_HEIGHT:-1800}"
MAX_HEIGHT="${MAX_HEIGHT:-60000}"
CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$CHROMIUM" ]; then
    echo "report_screenshot.sh: no chromium on PATH (Debian: sudo apt-get install chromium)" >&2
    exit 2
fi
HTML="$DIR/report.html"
if [ ! -f "$HTML" ]; then
    echo "report_screenshot.sh: $HTML does not exist (write one with: python cli.py report --out $DIR)" >&2
    exit 2
fi
HTML="$(cd "$(dirname "$HTML")" && pwd)/report.html"
mkdir -p "$(dirname "$OUT")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

chrome() {  # chrome ARGS... (one headless run, its own profile, no network)
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
        --disable-component-update --disable-sync --hide-scrollbars --force-device-scale-factor=1 \
        --user-data-dir="$(mktemp -d "$WORK/profile-XXXX")" --proxy-server=127.0.0.1:9 \
        --virtual-time-budget=10000 "$@" 2>> "$WORK/chromium.log"
}

# 1. the page's height: a copy that writes document height into a <meta> once loaded
"$PY" - "$HTML" "$WORK/measure.html" <<'EOF'
import sys
from pathlib import Path

page = Path(sys.argv[1]).read_text(encoding="utf-8")
probe = ("<script>addEventListener('load', () => { const m = document.createElement('meta'); "
         "m.name = 'page-height'; m.content = String(document.documentElement.scrollHeight); "
         "document.head.appendChild(m); });</script>")
Path(sys.argv[2]).write_text(page.replace("</body>", probe + "</body>", 1), encoding="utf-8")
EOF
HEIGHT="$(chrome --window-size="$WIDTH,$PAGE_HEIGHT" --dump-dom "file://$WORK/measure.html" \
          | sed -n 's/.*<meta name="page-height" content="\([0-9]*\)".*/\1/p' | head -n 1)"
if [ -z "$HEIGHT" ]; then
    cat "$WORK/chromium.log" >&2
    echo "report_screenshot.sh: could not measure the page height" >&2
    exit 1
fi
if [ "$HEIGHT" -gt "$MAX_HEIGHT" ]; then
    echo "page is $HEIGHT px high: cut at MAX_HEIGHT=$MAX_HEIGHT" >&2
    HEIGHT="$MAX_HEIGHT"
fi

# 2. the whole page, then its pages
chrome --window-size="$WIDTH,$HEIGHT" --screenshot="$OUT" "file://$HTML" > /dev/null || {
    cat "$WORK/chromium.log" >&2
    exit 1
}
"$PY" - "$OUT" "$PAGE_HEIGHT" <<'EOF'
import sys
from pathlib import Path

from PIL import Image

out, step = Path(sys.argv[1]), int(sys.argv[2])
for old in out.parent.glob(f"{out.stem}_page_*.png"):
    old.unlink()
img = Image.open(out)
w, h = img.size
n = -(-h // step)
for i in range(n):
    img.crop((0, i * step, w, min(h, (i + 1) * step))).save(out.parent / f"{out.stem}_page_{i + 1:02d}.png")
print(f"wrote {out} ({w}x{h} px) and {n} pages {out.stem}_page_01..{n:02d}.png")
EOF
