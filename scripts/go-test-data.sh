#!/usr/bin/env bash
# Rebuilds the Go golden data of the .gopclntab reader (tests/data/go): the program in
# tests/data/go/tiny built stripped as release images build Go (-trimpath -ldflags="-s -w"),
# once as a plain and once as a position-independent executable, and what real tools say
# of the unstripped builds of the same sources (the expectations):
#   tiny-full.nm            the addresses of its functions, as `go tool nm` reports them;
#   tiny.addr2line,         llvm-addr2line -a -i -f over addresses inside its functions
#   tiny-pie.addr2line      (every byte of main.*, every STEP-th byte elsewhere): function,
#                           file:line and the inlined calls, innermost first, from DWARF.
# The stripped and unstripped builds share their code addresses. Needs Debian's golang-go
# and llvm (llvm-addr2line: binutils' addr2line misnames some inlined frames of Go code);
# resolves nothing from the network.
set -euo pipefail
cd "$(dirname "$0")/../tests/data/go"
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd tiny && go build -trimpath -ldflags="-s -w" -o ../tiny-stripped . \
  && go build -trimpath -o "$work/tiny-full" . \
  && go build -trimpath -buildmode=pie -ldflags="-s -w" -o ../tiny-pie-stripped . \
  && go build -trimpath -buildmode=pie -o "$work/tiny-pie-full" .)
go tool nm -sort address "$work/tiny-full" | sed -nE 's/^ *([0-9a-f]+) [Tt] (.*)$/\1 \2/p' >tiny-full.nm

# Addresses inside the functions of a binary: all of main.*, every $2-th byte elsewhere.
addresses() {
  go tool nm -size -sort address "$1" | while read -r addr size kind name; do
    [[ $kind == [Tt] && $size -gt 0 ]] || continue
    local step=$2
    [[ $name == main.* ]] && step=1
    for ((o = 0; o < size; o += step)); do printf '0x%x\n' $((16#$addr + o)); done
  done
}
addresses "$work/tiny-full" 211 | llvm-addr2line -a -i -f -e "$work/tiny-full" >tiny.addr2line
addresses "$work/tiny-pie-full" 997 | llvm-addr2line -a -i -f -e "$work/tiny-pie-full" >tiny-pie.addr2line
echo "tests/data/go: tiny-stripped ($(stat -c %s tiny-stripped) bytes), tiny-pie-stripped ($(stat -c %s tiny-pie-stripped) bytes), tiny-full.nm ($(wc -l <tiny-full.nm) functions), tiny.addr2line ($(grep -c '^0x' tiny.addr2line) addresses), tiny-pie.addr2line ($(grep -c '^0x' tiny-pie.addr2line) addresses), $(go version)"
