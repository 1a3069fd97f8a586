#!/usr/bin/env bash
# Loads moetier serve's monitor page in headless Chromium (Debian's `chromium`) after it has polled the stats
# endpoint a few times, saves the DOM (OUT_DIR/monitor.dom.html) and a screenshot (OUT_DIR/monitor.png, 1280x900),
# and prints the key numbers the page shows (ids and data-value attributes: see src/server/monitor.html).
#
#   scripts/monitor_check.sh http://127.0.0.1:8080/ OUT_DIR
#
# Exit status: 0 when #status says "live" and #tps-decode's data-value is a number > 0 (the page polled the
# server and shows a decode rate); 1 otherwise; 2 on bad usage or when chromium/python3 is missing or fails.
# MONITOR_BUDGET_MS (default 4000): virtual time the page runs for before the DOM is taken (it polls every
# second); MONITOR_TIMEOUT_S (default 60): wall-clock limit of each chromium run.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 URL OUT_DIR" >&2
  exit 2
fi
url=$1
out=$2
budget=${MONITOR_BUDGET_MS:-4000}
limit=${MONITOR_TIMEOUT_S:-60}
for tool in chromium python3 timeout; do
  command -v "$tool" >/dev/null || { echo "monitor_check: $tool not found" >&2; exit 2; }
done
mkdir -p "$out"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

# Each run gets a fresh profile (no first-run dialogs, no lock shared with another chromium).
browse() {
  timeout "$limit" chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$profile" --hide-scrollbars --virtual-time-budget="$budget" "$@" "$url"
}
if ! browse --dump-dom >"$out/monitor.dom.html" 2>"$out/chromium-dom.log"; then
  echo "monitor_check: chromium --dump-dom failed (log: $out/chromium-dom.log)" >&2
  exit 2
fi
if ! browse --window-size=1280,900 --screenshot="$out/monitor.png" >/dev/null 2>"$out/chromium-shot.log"; then
  echo "monitor_check: chromium --screenshot failed (log: $out/chromium-shot.log)" >&2
  exit 2
fi

python3 - "$out/monitor.dom.html" <<'PY'
import html.parser
import math
import sys

IDS = ["status", "tps-decode", "tps-prefill", "hit-rate", "mib-per-token", "stall-share", "queue-depth",
       "requests-total"]


class Grab(html.parser.HTMLParser):
    """Text and data-value of the elements with the ids above (they hold text only, no child elements)."""

    def __init__(self):
        super().__init__()
        self.found = {}
        self.open = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") in IDS:
            self.open = a["id"]
            self.found[self.open] = {"data-value": a.get("data-value"), "text": ""}

    def handle_endtag(self, tag):
        self.open = None

    def handle_data(self, data):
        if self.open:
            self.found[self.open]["text"] += data


g = Grab()
with open(sys.argv[1], encoding="utf-8") as f:
    g.feed(f.read())
ok = True
for i in IDS:
    e = g.found.get(i)
    if e is None:
        print(f"{i}: MISSING")
        ok = False
        continue
    dv = e["data-value"]
    print(f"{i}: text={e['text'].strip()!r}" + ("" if dv is None else f" data-value={dv!r}"))
status = g.found.get("status", {}).get("text", "").strip()
if status != "live":
    print(f"monitor_check: FAIL: status is {status!r}, not 'live'")
    ok = False
try:
    tps = float(g.found.get("tps-decode", {}).get("data-value") or "nan")
except ValueError:
    tps = math.nan
if not (tps > 0):
    print("monitor_check: FAIL: tps-decode's data-value is not a number > 0")
    ok = False
print("monitor_check: " + ("OK" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
