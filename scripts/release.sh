#!/usr/bin/env bash
# Builds the release binaries, stamped with the version (git describe) and
# the commit:
#   - linux/amd64, the fast build users should run: statically linked, with
#     libdeflate (Debian's libdeflate-dev, through pkg-config and cgo) as the
#     inflater of small deflated entries. Checked: no dynamic dependency at
#     all, and --version naming libdeflate.
#   - linux/arm64, the portable build: pure Go (no cgo), static.
# and SHA256SUMS beside them. Prints the paths.
#
#   scripts/release.sh [OUT]   # OUT: the amd64 binary, default dist/rsharvest-linux-amd64;
#                              # the arm64 one and SHA256SUMS go in OUT's directory
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-dist/rsharvest-linux-amd64}"
dir="$(dirname "$out")"
arm64="$dir/rsharvest-linux-arm64"

if ! pkg-config --exists libdeflate 2>/dev/null; then
  echo "release.sh: needs libdeflate-dev and pkg-config (apt-get install libdeflate-dev pkg-config)" >&2
  exit 1
fi
mkdir -p "$dir"
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
commit=$(git rev-parse HEAD 2>/dev/null || true)
if [ -n "$commit" ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then commit="$commit-dirty"; fi
stamp="-X github.com/rsharvest/rsharvest/cli.stampedVersion=$version -X github.com/rsharvest/rsharvest/cli.stampedCommit=$commit"

# osusergo, netgo: the pure Go user and DNS lookups, so that the static
# binary calls no glibc NSS at run time.
CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go build -trimpath \
  -tags 'libdeflate osusergo netgo' \
  -ldflags "-s -w $stamp -linkmode external -extldflags -static" \
  -o "$out" ./cmd/rsharvest
CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath \
  -tags 'osusergo netgo' \
  -ldflags "-s -w $stamp" \
  -o "$arm64" ./cmd/rsharvest

if ldd "$out" >/dev/null 2>&1; then
  echo "release.sh: $out is dynamically linked:" >&2
  ldd "$out" >&2
  exit 1
fi
if ! "$out" --version | grep -q 'inflater libdeflate'; then
  echo "release.sh: $out does not inflate with libdeflate: $("$out" --version)" >&2
  exit 1
fi
if ! go version -m "$arm64" | grep -q 'GOARCH=arm64' || ! go version -m "$arm64" | grep -q 'CGO_ENABLED=0'; then
  echo "release.sh: $arm64 is not a pure Go linux/arm64 build" >&2
  exit 1
fi
(cd "$dir" && sha256sum "$(basename "$out")" "$(basename "$arm64")" >SHA256SUMS)
echo "$out"
echo "$arm64"
echo "$dir/SHA256SUMS"
