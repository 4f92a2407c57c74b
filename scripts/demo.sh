#!/usr/bin/env bash
# The demo: starts the bundled demo API on a free loopback port, runs the demo connector
# sandboxed against it (granting only that host:port), and shows what it read.
# Usage: scripts/demo.sh [RECORDS] [PROFILE_DIR]   (`just demo` builds everything first)
set -euo pipefail

records=${1:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${2:-$root/target/release}
plugin=$root/target/plugins/demo-source.wasm
out_dir=$root/target/demo
mkdir -p "$out_dir"

for f in "$bin/host" "$bin/demo-api" "$plugin"; do
    [[ -e $f ]] || { echo "missing $f: run \`just demo\`, which builds it" >&2; exit 1; }
done

# The API prints "listening on 127.0.0.1:PORT" first; read that line from its stdout.
coproc API { exec "$bin/demo-api" --port 0 --records "$records" --accounts 5; }
api_pid=$API_PID
trap 'kill "$api_pid" 2>/dev/null || true' EXIT
read -r -t 30 first_line <&"${API[0]}" || { echo "the demo API did not start" >&2; exit 1; }
addr=${first_line#listening on }
echo "== demo API on http://$addr serving $records items in 5 accounts"

config=$out_dir/config.json
printf '{"base_url": "http://%s", "page_size": 100}\n' "$addr" >"$config"
output=$out_dir/output.jsonl

echo "== host run $plugin --config $config --allow-host http://$addr"
status=0
"$bin/host" run "$plugin" --config "$config" --allow-host "http://$addr" >"$output" || status=$?

echo "== first records:"
grep -m 3 '"type":"RECORD"' "$output" || true
echo "== messages by type:"
grep -o '^{"type":"[A-Z_]*"' "$output" | sort | uniq -c | sed 's/{"type":"\([A-Z_]*\)"/\1/' || true
echo "== records by stream:"
grep '"type":"RECORD"' "$output" | grep -o '"stream":"[a-z_]*"' | sort | uniq -c | sed 's/"stream":"\([a-z_]*\)"/\1/' || true
echo "== last state:"
grep '"type":"STATE"' "$output" | tail -n 1 || true
echo "== summary:"
grep '"type":"LOG"' "$output" | tail -n 1 | sed 's/.*"message":"\([^"]*\)".*/\1/'
echo "== the full output is in $output (exit status $status)"
exit "$status"
