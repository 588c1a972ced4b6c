#!/usr/bin/env bash
# Rebuild the figures under docs/ from the bundled example, as the README shows them:
#   - docs/example-report/: `chunkwise report` of the example study (PNG, HTML, markdown);
#   - docs/dashboard-pareto.png: optuna-dashboard's Pareto-front page for that study, taken
#     with headless Chromium (Debian package `chromium`).
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
for _ in $(seq 100); do
    if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/api/meta')" 2>/dev/null; then
        break
    fi
    sleep 0.2
done
# Flags: no sandbox as root, and no background networking (this machine has no internet).
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$work/chromium" --hide-scrollbars \
    --window-size=1400,1000 --virtual-time-budget=15000 \
    --screenshot="$PWD/docs/dashboard-pareto.png" "http://127.0.0.1:$port/dashboard/studies/1" 2>/dev/null
echo "docs rebuilt: docs/example-report/ and docs/dashboard-pareto.png"
