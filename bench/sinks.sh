#!/usr/bin/env bash
# Sinks benchmark (issue 5): the same generated dump synced from loopback
# into each sink configuration, in one run: fs, S3 (a real MinIO on
# loopback), Elasticsearch-style (a real ZincSearch on loopback), and
# several sinks at once. Prints seconds, payload MB/s,
# resources/s and CPU seconds for each.
#
#   bench/sinks.sh [RESOURCES] [MEAN_SIZE] [WORKDIR]
#
# Defaults: 20000 resources of ~52 KB (≈ 1 GB). WORKDIR should be on tmpfs
# (/dev/shm) to measure rsharvest and the servers rather than the disk.
set -euo pipefail
N=${1:-20000}
SIZE=${2:-52000}
WORK=${3:-$(mktemp -d /tmp/rsharvest-sinks.XXXXXX)}
cd "$(dirname "$0")/.."
mkdir -p "$WORK"
go build -o "$WORK/rsharvest" ./cmd/rsharvest
BIN="$WORK/rsharvest"
MINIO=$(scripts/servers.sh minio)
ZINC=$(scripts/servers.sh zincsearch)
SRC="$WORK/src-$N-$SIZE"
if [ ! -f "$SRC/.well-known/resourcesync" ]; then
  "$BIN" gen --out "$SRC" --resources "$N" --size "$SIZE" --seed 1 >/dev/null 2>&1
fi
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT
"$BIN" serve --dir "$SRC" >"$WORK/serve.out" 2>/dev/null &
PIDS+=($!)
export AWS_ACCESS_KEY_ID=rsharvest AWS_SECRET_ACCESS_KEY=rsharvest-bench-secret
MPORT=$((20000 + RANDOM % 20000))
rm -rf "$WORK/minio-data"; mkdir -p "$WORK/minio-data"
MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY \
  "$MINIO" server "$WORK/minio-data" --address "127.0.0.1:$MPORT" --console-address "127.0.0.1:$((MPORT + 1))" >"$WORK/minio.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$MPORT/minio/health/live" >/dev/null && break; sleep 0.2; done
curl -sf -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "http://127.0.0.1:$MPORT/bench" >/dev/null
ZPORT=$((MPORT + 2))
rm -rf "$WORK/zinc-data"; mkdir -p "$WORK/zinc-data"
ZINC_SENTRY=false ZINC_TELEMETRY=false ZINC_PROFILER=false ZINC_FIRST_ADMIN_USER=admin ZINC_FIRST_ADMIN_PASSWORD=Bench-pass-1 \
  ZINC_DATA_PATH="$WORK/zinc-data" ZINC_SERVER_ADDRESS=127.0.0.1 ZINC_SERVER_PORT=$ZPORT ZINC_WAL_SYNC_INTERVAL=100ms \
  "$ZINC" >"$WORK/zinc.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ZPORT/healthz" >/dev/null && break; sleep 0.2; done
export ES_USERNAME=admin ES_PASSWORD=Bench-pass-1
ES_URL=${ES_URL:-http://127.0.0.1:$ZPORT/es/bench}
for _ in $(seq 50); do grep -q serving "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^serving .* at \(http[^ ]*\)$/\1/p' "$WORK/serve.out")
S3="s3://bench/run?endpoint=127.0.0.1:$MPORT&secure=false&region=us-east-1"

run() { # name, sink flags…
  local name=$1; shift
  rm -rf "$WORK/mirror" "$WORK/state.db"*
  sync
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time.$name" "$BIN" baseline --source "$URL" --state "$WORK/state.db" \
    --progress none --log-level warn --report "$WORK/$name.json" "$@" >/dev/null
  echo "$name $(cat "$WORK/time.$name")"
}
ROWS=()
ROWS+=("$(run fs --sink "fs:$WORK/mirror")")
ROWS+=("$(run s3 --sink "$S3")")
ROWS+=("$(run fs+s3 --sink "fs:$WORK/mirror" --sink "$S3")")
ROWS+=("$(run es --sink "es:$ES_URL")")
ROWS+=("$(run fs+s3+es --sink "fs:$WORK/mirror" --sink "$S3" --sink "es:$ES_URL")")
python3 - "$WORK" "${ROWS[@]}" <<'PY'
import json, sys
work = sys.argv[1]
print(f"{'sinks':<10} {'seconds':>8} {'MB/s':>7} {'res/s':>7} {'CPU s':>6} {'RSS MB':>7}")
for row in sys.argv[2:]:
    name, secs, user, sys_, rss = row.split()
    rep = json.load(open(f"{work}/{name}.json"))
    s = float(secs); b = rep["bytes"]["written"]; n = rep["resources"]["written"]
    print(f"{name:<10} {s:8.2f} {b/1e6/s:7.1f} {n/s:7.0f} {float(user)+float(sys_):6.1f} {int(rss)/1024:7.0f}   status {rep['status']}")
PY
