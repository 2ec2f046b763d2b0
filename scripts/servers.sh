#!/usr/bin/env bash
# Builds (once) and caches the third-party servers the integration tests run
# against. Each server has a build_<name> function that prints the path of the
# cached binary on stdout; progress goes to stderr.
#
#   scripts/servers.sh minio   # build MinIO if absent, print its path
#   scripts/servers.sh zincsearch  # the same for ZincSearch
#   scripts/servers.sh mailpit     # the same for Mailpit
#   scripts/servers.sh all     # every server
#
# Binaries are cached in ${RSHARVEST_CACHE:-$HOME/.cache/rsharvest}, named
# after the pinned version, so a version bump builds a new binary.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${RSHARVEST_CACHE:-$HOME/.cache/rsharvest}"

log() { echo "servers.sh: $*" >&2; }

# module_version MODDIR MODULE prints the version MODULE is required at in
# MODDIR/go.mod.
module_version() {
	(cd "$1" && go list -m -f '{{.Version}}' "$2")
}

# build_minio builds the MinIO server from the tools/minio module.
build_minio() {
	local dir="$ROOT/tools/minio"
	local version
	version="$(module_version "$dir" github.com/minio/minio)"
	local bin="$CACHE/minio-$version"
	if [[ ! -x "$bin" ]]; then
		mkdir -p "$CACHE"
		log "building MinIO $version into $bin (a few minutes the first time)"
		local start=$SECONDS
		# Build to a temporary name first so a concurrent or interrupted build
		# never leaves a half-written binary under the final name.
		local tmp="$bin.tmp.$$"
		if ! (cd "$dir" && CGO_ENABLED=0 go build -trimpath -o "$tmp" github.com/minio/minio); then
			rm -f "$tmp"
			log "building MinIO failed"
			return 1
		fi
		mv -f "$tmp" "$bin"
		log "built MinIO in $((SECONDS - start)) s"
	fi
	echo "$bin"
}

# ZincSearch, the Elasticsearch-compatible server the sink/es tests run
# against. Keep in step with zincVersion in sink/es/zinc_test.go.
ZINCSEARCH_VERSION=v0.4.10

# build_zincsearch builds ZincSearch $ZINCSEARCH_VERSION from its module
# source, fetched through the Go module proxy. The module's web/dist (the UI,
# embedded with go:embed) is not in the module zip, so the source is copied out
# of the read-only module cache and given a stub page. ZincSearch's pinned
# dependencies do not build with current Go, so it is built with the Go 1.21
# toolchain, which the go command fetches through the proxy.
build_zincsearch() {
	local version="$ZINCSEARCH_VERSION"
	local bin="$CACHE/zincsearch-$version"
	if [[ ! -x "$bin" ]]; then
		mkdir -p "$CACHE"
		log "building ZincSearch $version into $bin (a few minutes the first time)"
		local start=$SECONDS
		local src
		# Outside any module, so that no go.mod or go.sum is touched.
		src="$(cd / && GO111MODULE=on go mod download -json "github.com/zincsearch/zincsearch@$version" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		if [[ -z "$src" || ! -d "$src" ]]; then
			log "cannot download github.com/zincsearch/zincsearch@$version"
			return 1
		fi
		local work tmp="$bin.tmp.$$"
		work="$(mktemp -d "${TMPDIR:-/tmp}/zincsearch-src.XXXXXX")"
		trap 'rm -rf "${work:-}" "${tmp:-}"; trap - RETURN' RETURN
		cp -R "$src/." "$work/"
		chmod -R u+w "$work"
		mkdir -p "$work/web/dist"
		echo '<!doctype html><title>ZincSearch</title>' >"$work/web/dist/index.html"
		(cd "$work" && GOTOOLCHAIN=go1.21.13 GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 \
			go build -trimpath -o "$tmp" ./cmd/zincsearch)
		mv -f "$tmp" "$bin"
		log "built ZincSearch in $((SECONDS - start)) s"
	fi
	echo "$bin"
}

# Mailpit, the SMTP server (with an HTTP API to read back what it received)
# the report tests send to. Keep in step with Version in notify/mailtest.
# Never run "mailpit version": it calls out to the internet.
MAILPIT_VERSION=v1.27.11

# build_mailpit builds Mailpit $MAILPIT_VERSION from its module, through the
# Go module proxy, outside any module (no go.mod is touched). The module
# holds no built web UI; the API and SMTP server do not need one.
build_mailpit() {
	local version="$MAILPIT_VERSION"
	local bin="$CACHE/mailpit-$version"
	if [[ ! -x "$bin" ]]; then
		mkdir -p "$CACHE"
		log "building Mailpit $version into $bin (a minute or two the first time)"
		local start=$SECONDS
		local gobin
		gobin="$(mktemp -d "${TMPDIR:-/tmp}/mailpit-bin.XXXXXX")"
		if ! (cd / && GOBIN="$gobin" CGO_ENABLED=0 GOFLAGS= go install -trimpath "github.com/axllent/mailpit@$version"); then
			rm -rf "$gobin"
			log "building Mailpit failed"
			return 1
		fi
		mv -f "$gobin/mailpit" "$bin"
		rm -rf "$gobin"
		log "built Mailpit in $((SECONDS - start)) s"
	fi
	echo "$bin"
}

usage() {
	echo "usage: $0 minio|zincsearch|mailpit|all" >&2
	exit 2
}

main() {
	[[ $# -eq 1 ]] || usage
	case "$1" in
	minio) build_minio ;;
	zincsearch) build_zincsearch ;;
	mailpit) build_mailpit ;;
	all)
		build_minio
		build_zincsearch
		build_mailpit
		;;
	*) usage ;;
	esac
}

main "$@"
