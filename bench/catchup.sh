#!/usr/bin/env bash
# Catch-up benchmark (issue 3): a baseline of a generated dump, then an
# incremental run over its Change Dump of 10 packages, from loopback into an
# fs sink. Prints the catch-up's time, resources/s, and bytes downloaded
# against the total size of the change packages.
#
#   bench/catchup.sh [RESOURCES] [MEAN_SIZE] [WORKDIR]
#
# Defaults: 20000 resources of ~52 KB; 10 change packages of 650 changes each
# (≈ 25 % of the resources changed, ≈ 5 % deleted). Then the same catch-up again
# (every winner already held: nothing should be downloaded).
set -euo pipefail
N=${1:-20000}
SIZE=${2:-52000}
WORK=${3:-$(mktemp -d /tmp/rsharvest-catchup.XXXXXX)}
PER=$(( N * 72 / 2000 ))
cd "$(dirname "$0")/.."
mkdir -p "$WORK"
go build -o "$WORK/rsharvest" ./cmd/rsharvest
BIN="$WORK/rsharvest"
SRC="$WORK/src-$N-$SIZE-changes"
if [ ! -f "$SRC/.well-known/resourcesync" ]; then
  "$BIN" gen --out "$SRC" --resources "$N" --size "$SIZE" --seed 1 \
    --change-packages 10 --changes-per-package "$PER" --delete-share 0.17 --create-share 0.05 --closed >/dev/null 2>&1
fi
"$BIN" serve --dir "$SRC" >"$WORK/serve.out" 2>/dev/null &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q serving "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^serving .* at \(http[^ ]*\)$/\1/p' "$WORK/serve.out")

rm -rf "$WORK/mirror" "$WORK/state.db"*
"$BIN" baseline --source "$URL" --sink "fs:$WORK/mirror" --state "$WORK/state.db" --progress none --log-level warn >/dev/null
sync
/usr/bin/time -f "%e %M" -o "$WORK/time.inc" "$BIN" incremental --source "$URL" --sink "fs:$WORK/mirror" --state "$WORK/state.db" \
  --progress none --log-level warn --report "$WORK/inc.json" >/dev/null
CHANGE_BYTES=$(du -cb "$SRC"/changes/*.zip | tail -1 | cut -f1)
python3 - "$WORK/inc.json" "$(cat "$WORK/time.inc")" "$CHANGE_BYTES" "$N" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
secs, rss = sys.argv[2].split()
secs = float(secs); total = int(sys.argv[3]); n = int(sys.argv[4])
r = rep["resources"]; b = rep["bytes"]
done = r["written"] + r["deleted"] + r["unchanged"]
print(f"catch-up of {rep['packages']['total']} change packages ({total/1e6:.0f} MB) over a {n}-resource baseline")
print(f"  {secs:.2f} s, {done/secs:.0f} resources/s, {b['written']/1e6/secs:.1f} MB/s written, peak RSS {int(rss)/1024:.0f} MB")
print(f"  resources: {r['written']} written, {r['deleted']} deleted, {r['unchanged']} unchanged, {r['failed']} failed")
print(f"  downloaded {b['downloaded']/1e6:.1f} MB of {total/1e6:.1f} MB of change packages ({100*b['downloaded']/total:.0f} %)")
PY

# Again over the same range: everything is held already.
/usr/bin/time -f "%e %M" -o "$WORK/time.inc2" "$BIN" incremental --source "$URL" --sink "fs:$WORK/mirror" --state "$WORK/state.db" \
  --from 2026-01-01T00:00:00Z --progress none --log-level warn --report "$WORK/inc2.json" >/dev/null
python3 - "$WORK/inc2.json" "$(cat "$WORK/time.inc2")" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1])); secs = float(sys.argv[2].split()[0])
print(f"repeated catch-up: {secs:.2f} s, downloaded {rep['bytes']['downloaded']} bytes, {rep['resources']['unchanged']} unchanged, {rep['resources']['written']} written")
PY
