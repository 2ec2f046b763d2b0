#!/usr/bin/env bash
# List-based baseline benchmark (issue 4): N small resources GET one by one
# from a Resource List on loopback, with the default concurrency and with
# --concurrency 1 (one request at a time, as the reference Python client
# does), in the same run, into fs sinks on the same filesystem.
#
#   [LATENCY=2ms] bench/list.sh [RESOURCES] [MEAN_SIZE] [WORKDIR]
#
# LATENCY makes the loopback server wait before each answer, as a distant
# server would.
set -euo pipefail
N=${1:-20000}
SIZE=${2:-2000}
WORK=${3:-$(mktemp -d /tmp/rsharvest-list.XXXXXX)}
cd "$(dirname "$0")/.."
mkdir -p "$WORK"
go build -o "$WORK/rsharvest" ./cmd/rsharvest
BIN="$WORK/rsharvest"
SRC="$WORK/src-$N-$SIZE-list"
if [ ! -f "$SRC/.well-known/resourcesync" ]; then
  "$BIN" gen --out "$SRC" --resources "$N" --size "$SIZE" --seed 1 --write-resources --no-odd-names >/dev/null 2>&1
fi
"$BIN" serve --dir "$SRC" --latency "${LATENCY:-0s}" >"$WORK/serve.out" 2>/dev/null &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q serving "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^serving .* at \(http[^ ]*\)$/\1/p' "$WORK/serve.out")
run() { # name, extra flags…
  local name=$1; shift
  rm -rf "$WORK/mirror-$name" "$WORK/state-$name.db"*
  sync
  /usr/bin/time -f "%e %M" -o "$WORK/time.$name" "$BIN" baseline --source "$URL" --prefer list --sink "fs:$WORK/mirror-$name" \
    --state "$WORK/state-$name.db" --progress none --log-level warn --report "$WORK/$name.json" "$@" >/dev/null
  echo "$name $(cat "$WORK/time.$name")"
}
R1=$(run parallel)
R2=$(run serial --concurrency 1)
python3 - "$N" "$R1" "$R2" <<'PY'
import sys
n = int(sys.argv[1]); rows = [a.split() for a in sys.argv[2:]]
t = {}
print(f"list-based baseline of {n} resources from loopback")
for name, secs, rss in rows:
    s = float(secs); t[name] = s
    print(f"  {name:<9} {s:7.2f} s {n/s:8.0f} resources/s  peak RSS {int(rss)/1024:.0f} MB")
print(f"  ratio: {t['serial']/t['parallel']:.1f}x")
PY
