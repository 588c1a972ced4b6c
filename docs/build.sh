#!/usr/bin/env bash
# Rebuild the figures under docs/ from the bundled example, as the README shows them:
#   - docs/example-report/: `chunkwise report` of the example study (PNG, HTML, markdown);
#   - docs/dashboard-pareto.png: chunkwise's Pareto plot on that study's optuna-dashboard page,
#     taken with headless Chromium (Debian package `chromium` or `chromium-headless-shell`).
#
#   bash docs/build.sh          # from the repository root, with the project installed
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d -t chunkwise-docs.XXXXXX)
dashboard_pid=
cleanup() {
    if [ -n "$dashboard_pid" ]; then kill "$dashboard_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
storage="sqlite:///$work/example.db"

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
browser=$(command -v chromium || command -v chromium-headless-shell) || {
    echo "no headless Chromium: install the Debian package chromium or chromium-headless-shell" >&2; exit 1; }
# Flags: no sandbox as root, and no background networking (this machine has no internet).
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$work/chromium" --hide-scrollbars \
    --window-size=1400,2600 --virtual-time-budget=15000 \
    --screenshot="$work/page.png" "http://127.0.0.1:$port/dashboard/studies/1" 2>/dev/null
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
echo "docs rebuilt: docs/example-report/ and docs/dashboard-pareto.png"
