#!/usr/bin/env bash
# Rebuilds the Go golden data of the .gopclntab reader (tests/data/go): the program in
# tests/data/go/tiny built stripped as release images build Go (-trimpath -ldflags="-s -w")
# and, unstripped, the addresses of its functions as `go tool nm` reports them (the
# expected names). Needs Debian's golang-go; resolves nothing from the network.
set -euo pipefail
cd "$(dirname "$0")/../tests/data/go"
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd tiny && go build -trimpath -ldflags="-s -w" -o ../tiny-stripped . \
  && go build -trimpath -o "$work/tiny-full" .)
go tool nm -sort address "$work/tiny-full" | sed -nE 's/^ *([0-9a-f]+) [Tt] (.*)$/\1 \2/p' >tiny-full.nm
echo "tests/data/go: tiny-stripped ($(stat -c %s tiny-stripped) bytes), tiny-full.nm ($(wc -l <tiny-full.nm) functions), $(go version)"
