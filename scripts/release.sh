#!/usr/bin/env bash
# Builds the release binary, the build users should run: linux/amd64,
# statically linked, with libdeflate (Debian's libdeflate-dev, through
# pkg-config and cgo) as the inflater of small deflated entries. It checks
# what it built: no dynamic dependency at all, and --version naming
# libdeflate. Prints the binary's path.
#
#   scripts/release.sh [OUT]   # default dist/rsharvest-linux-amd64
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-dist/rsharvest-linux-amd64}"

if ! pkg-config --exists libdeflate 2>/dev/null; then
  echo "release.sh: needs libdeflate-dev and pkg-config (apt-get install libdeflate-dev pkg-config)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
# osusergo, netgo: the pure Go user and DNS lookups, so that the static
# binary calls no glibc NSS at run time.
CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go build -trimpath \
  -tags 'libdeflate osusergo netgo' \
  -ldflags '-s -w -linkmode external -extldflags "-static"' \
  -o "$out" ./cmd/rsharvest

if ldd "$out" >/dev/null 2>&1; then
  echo "release.sh: $out is dynamically linked:" >&2
  ldd "$out" >&2
  exit 1
fi
if ! "$out" --version | grep -q 'inflater libdeflate'; then
  echo "release.sh: $out does not inflate with libdeflate: $("$out" --version)" >&2
  exit 1
fi
echo "$out"
