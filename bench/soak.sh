#!/usr/bin/env bash
# Soak (issue 7): a baseline and catch-ups of a source that injects transient
# faults (fixed seed) and publishes one more Change Dump package every 2 s,
# for DURATION; then the same source without faults and a final sync, which
# must exit 0. Prints the faults injected by kind and the harvester's
# retries. TestSoak does the same and also checks the mirror and the state
# store against the source's truth:
#
#   RSHARVEST_SOAK=10m go test -run TestSoak -timeout 30m ./cli/
#
#   bench/soak.sh [DURATION_SECONDS] [SEED] [WORKDIR]
set -euo pipefail
SECS=${1:-60}
SEED=${2:-1}
WORK=${3:-$(mktemp -d /tmp/rsharvest-soak.XXXXXX)}
cd "$(dirname "$0")/.."
mkdir -p "$WORK"
go build -o "$WORK/rsharvest" ./cmd/rsharvest
BIN="$WORK/rsharvest"
rm -rf "$WORK/src" "$WORK/mirror" "$WORK/state.db"* "$WORK"/report-*.json
"$BIN" gen --out "$WORK/src" --resources 800 --packages 6 --seed 29 --size 4096 --index-threshold 4 \
  --change-packages $((SECS / 2 + 8)) --changes-per-package 30 --delete-share 0.1 --create-share 0.1 >/dev/null 2>&1

serve() { # serve OUT [flags…]: start the server (at the address gen wrote the source for), wait for its URL
  local out=$1; shift
  "$BIN" serve --dir "$WORK/src" "$@" >"$out" 2>/dev/null &
  SERVER=$!
  for _ in $(seq 100); do grep -q '^serving' "$out" 2>/dev/null && break; sleep 0.1; done
  URL=$(sed -n 's/^serving .* at \(http[^ ]*\)$/\1/p' "$out")
}
trap 'kill $SERVER 2>/dev/null || true' EXIT
serve "$WORK/serve.out" --publish 0 --publish-every 2s \
  --fault-rate 0.1 --fault-seed "$SEED" --faults transient --fault-stall 3s --fault-drip-max 500ms
SYNC=(sync --sink "fs:$WORK/mirror" --state "$WORK/state.db" --progress none --log-level error
  --concurrency 3 --workers 2 --retries 5 --stall-timeout 1s)
declare -A CODES=()
END=$((SECONDS + SECS)) RUNS=0
while [ $SECONDS -lt $END ]; do
  RUNS=$((RUNS + 1))
  code=0; "$BIN" "${SYNC[@]}" --source "$URL" --report "$WORK/report-$RUNS.json" >/dev/null 2>&1 || code=$?
  CODES[$code]=$(( ${CODES[$code]:-0} + 1 ))
  case $code in 0|1|3) ;; *) echo "run $RUNS: exit $code under transient faults" >&2; exit 1 ;; esac
done
kill -INT $SERVER; wait $SERVER || true
STEP=$(sed -n 's/^published change package \([0-9]*\)$/\1/p' "$WORK/serve.out" | tail -1)
echo "$RUNS syncs under faults in ${SECS}s, $(for c in "${!CODES[@]}"; do printf 'exit %s: %s; ' "$c" "${CODES[$c]}"; done)${STEP:-0} change packages published"
grep '^faults injected' "$WORK/serve.out"
python3 - "$WORK" <<'PY'
import glob, json, sys
t = {"requests": 0, "retries": 0, "resumes": 0, "restarts": 0}
for p in glob.glob(sys.argv[1] + "/report-*.json"):
    for k in t: t[k] += json.load(open(p))["fetch"][k]
print("harvester: " + ", ".join(f"{v} {k}" for k, v in t.items()))
PY
# The same source, same address, no faults: the final sync must succeed.
serve "$WORK/serve2.out" --publish "${STEP:-0}"
"$BIN" "${SYNC[@]}" --source "$URL" --report "$WORK/final.json" | tail -4
echo "final fault-free sync: ok; mirror in $WORK/mirror"
