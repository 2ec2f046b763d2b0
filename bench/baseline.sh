#!/usr/bin/env bash
# Baseline benchmark (issue 2): a generated dump synced from loopback into an
# fs sink by rsharvest, and in the same run the naive pipeline
# `curl -o && unzip && md5sum && sha256sum` over the same packages, one
# package at a time. Prints payload MB/s, resources/s and peak RSS for each,
# and their ratio.
#
#   bench/baseline.sh [RESOURCES] [MEAN_SIZE] [WORKDIR]
#
# Defaults: 20000 resources of ~52 KB (≈ 1 GB payload) under a temp dir.
set -euo pipefail
N=${1:-20000}
SIZE=${2:-52000}
WORK=${3:-$(mktemp -d /tmp/rsharvest-bench.XXXXXX)}
cd "$(dirname "$0")/.."
mkdir -p "$WORK"
go build -o "$WORK/rsharvest" ./cmd/rsharvest
BIN="$WORK/rsharvest"

if [ ! -f "$WORK/src-$N-$SIZE/.well-known/resourcesync" ]; then
  "$BIN" gen --out "$WORK/src-$N-$SIZE" --resources "$N" --size "$SIZE" --seed 1 >/dev/null 2>&1
fi
SRC="$WORK/src-$N-$SIZE"
PAYLOAD=$(cd "$SRC" && python3 - <<'PY'
import glob, zipfile
print(sum(i.file_size for z in glob.glob('packages/*.zip') for i in zipfile.ZipFile(z).infolist() if i.filename != 'manifest.xml'))
PY
)
"$BIN" serve --dir "$SRC" >"$WORK/serve.out" 2>/dev/null &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q serving "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^serving .* at \(http[^ ]*\)$/\1/p' "$WORK/serve.out")

measure() { # name, command… → prints "name seconds peak_rss_kb"
  local name=$1; shift
  sync
  /usr/bin/time -f "%e %M" -o "$WORK/time.$name" "$@" >"$WORK/out.$name" 2>&1
  echo "$name $(cat "$WORK/time.$name")"
}

rm -rf "$WORK/mirror" "$WORK/state.db"*
R1=$(measure rsharvest "$BIN" baseline --source "$URL" --sink "fs:$WORK/mirror" --state "$WORK/state.db" --progress none --log-level warn)

naive() {
  rm -rf "$WORK/naive"; mkdir -p "$WORK/naive"
  for z in "$SRC"/packages/*.zip; do
    b=$(basename "$z" .zip)
    curl -sf -o "$WORK/naive/$b.zip" "${URL}packages/$b.zip" &&
      unzip -q -o "$WORK/naive/$b.zip" -d "$WORK/naive/$b" &&
      (cd "$WORK/naive/$b" && find . -type f ! -name manifest.xml -print0 | xargs -0 md5sum >/dev/null &&
        find . -type f ! -name manifest.xml -print0 | xargs -0 sha256sum >/dev/null)
  done
}
export -f naive; export WORK SRC URL
R2=$(measure naive bash -c naive)

python3 - "$N" "$PAYLOAD" "$R1" "$R2" <<'PY'
import sys
n, payload = int(sys.argv[1]), int(sys.argv[2])
rows = [a.split() for a in sys.argv[3:]]
print(f"dump: {n} resources, {payload/1e6:.0f} MB payload")
print(f"{'pipeline':<12} {'seconds':>8} {'MB/s':>8} {'res/s':>8} {'peak RSS MB':>12}")
t = {}
for name, secs, rss in rows:
    s = float(secs); t[name] = s
    print(f"{name:<12} {s:8.2f} {payload/1e6/s:8.1f} {n/s:8.0f} {int(rss)/1024:12.1f}")
print(f"rsharvest / naive speed ratio: {t['naive']/t['rsharvest']:.2f}x")
PY
