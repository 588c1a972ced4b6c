#!/usr/bin/env bash
# Rebuild the figures under docs/ from the bundled example, as the README shows them:
#   - docs/example-report/: `chunkwise report` of the example study (PNG, HTML, markdown);
#   - docs/dashboard-pareto.png: chunkwise's Pareto plot on that study's optuna-dashboard page,
#     taken with headless Chromium (Debian package `chromium` or `chromium-headless-shell`);
#   - docs/images/review.png: `chunkwise review` on the example's corpus and a copy of its questions
#     (the example's file is never touched), taken the same way.
# The README and the user guide (docs/guide/) show them; `mkdocs build` builds the site.
#
#   bash docs/build.sh          # from the repository root, with the project installed
#   bash docs/build.sh review   # only the review page's screenshot (no tuning)
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d -t chunkwise-docs.XXXXXX)
dashboard_pid=
review_pid=
cleanup() {
    if [ -n "$dashboard_pid" ]; then kill "$dashboard_pid" 2>/dev/null || true; fi
    if [ -n "$review_pid" ]; then kill "$review_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
storage="sqlite:///$work/example.db"

browser=$(command -v chromium || command -v chromium-headless-shell) || {
    echo "no headless Chromium: install the Debian package chromium or chromium-headless-shell" >&2; exit 1; }
# Flags: no sandbox as root, and no background networking (this machine has no internet).
screenshot() {  # screenshot WIDTH,HEIGHT OUT.png URL
    "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
        --disable-component-update --disable-sync --user-data-dir="$work/chromium" --hide-scrollbars \
        --window-size="$1" --virtual-time-budget=15000 --screenshot="$2" "$3" 2>/dev/null
}

# The review page: `chunkwise review` on the bundled example, its questions copied so the example's
# file is not touched (and the page names the file as handbook-queries.jsonl), on a free port of
# 127.0.0.1; the address it prints carries the page's secret token.
review_screenshot() {
    mkdir -p "$work/review" docs/images
    cp examples/handbook-queries.jsonl "$work/review/handbook-queries.jsonl"
    (cd "$work/review" && exec chunkwise review --corpus "$OLDPWD/examples/handbook" \
        --queries handbook-queries.jsonl >"$work/review.out" 2>"$work/review.log") &
    review_pid=$!
    local url=
    for _ in $(seq 300); do
        url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[A-Za-z0-9_-]*' "$work/review.out" || true)
        if [ -n "$url" ] || ! kill -0 "$review_pid" 2>/dev/null; then break; fi
        sleep 0.2
    done
    if [ -z "$url" ]; then
        echo "chunkwise review printed no address:" >&2; cat "$work/review.out" "$work/review.log" >&2; exit 1
    fi
    screenshot 1280,800 "$work/review.png" "$url"
    kill "$review_pid"; wait "$review_pid" 2>/dev/null || true; review_pid=
    # A 64-colour palette keeps the committed PNG small; the page must show the first question
    # with its excerpt highlighted (the page's yellow mark), else the screenshot is of something else.
    python3 - "$work/review.png" docs/images/review.png <<'SHRINK'
import sys
from PIL import Image

page = Image.open(sys.argv[1]).convert("RGB")
marked = sum(n for n, (r, g, b) in page.getcolors(1 << 22) if r > 240 and 200 < g < 235 and b < 120)
if marked < 1000:  # the excerpt's mark, about 10,000 pixels at 1280x800
    sys.exit("the review page shows no highlighted excerpt: docs/build.sh took something else")
page.quantize(64, method=Image.Quantize.MEDIANCUT).save(sys.argv[2], optimize=True)
SHRINK
}

if [ "${1:-}" = review ]; then
    review_screenshot
    echo "docs rebuilt: docs/images/review.png"
    exit 0
fi

chunkwise tune studies/example.yaml --storage "$storage"
rm -rf docs/example-report
chunkwise report --study example --storage "$storage" -o docs/example-report --plotly cdn
# The report names the temporary storage; the committed copy should not.
sed -i "s#$work/##g" docs/example-report/report.md

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
chunkwise dashboard --storage "$storage" --port "$port" 2>"$work/dashboard.log" &
dashboard_pid=$!
for _ in $(seq 300); do
    if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/api/meta')" 2>/dev/null; then
        break
    fi
    sleep 0.2
done
screenshot 1400,2600 "$work/page.png" "http://127.0.0.1:$port/dashboard/studies/1"
# The page at 1400 px: optuna-dashboard's own cards (fixed heights), then chunkwise's plot, whose
# card this cuts out; a page laid out otherwise (another optuna-dashboard) has no green ring there.
python3 - "$work/page.png" docs/dashboard-pareto.png <<'CROP'
import sys
from PIL import Image

card = Image.open(sys.argv[1]).convert("RGB").crop((56, 1742, 736, 2242))
if (44, 160, 44) not in {colour for _, colour in card.getcolors(1 << 20)}:  # the recommended trial's ring
    sys.exit("chunkwise's plot is not where docs/build.sh crops the dashboard page: adjust the box")
card.save(sys.argv[2])
CROP
review_screenshot
echo "docs rebuilt: docs/example-report/, docs/dashboard-pareto.png and docs/images/review.png"
