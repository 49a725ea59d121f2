#!/usr/bin/env bash
# Makes the local Debian base image (debian:bookworm-slim) that every test-bed image
# builds FROM. Nothing can be pulled on the test bed, so when the image is absent it is
# made with debootstrap (minbase) and `docker import`. The Debian mirror is read from
# this machine's apt configuration at run time; no host name is written here.
set -euo pipefail

IMAGE="${DEVPROF_BASE_IMAGE:-debian:bookworm-slim}"
SUITE="${DEVPROF_BASE_SUITE:-bookworm}"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE already present"
  exit 0
fi

if docker pull "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE pulled"
  exit 0
fi

# The first deb mirror that serves $SUITE itself (not -security/-updates), from either
# deb822 .sources files or one-line sources.list entries.
mirror_from_apt() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk -v suite="$SUITE" '
      BEGIN { RS=""; FS="\n" }
      {
        uris=""; suites=""; types=""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i); uris=$i }
          if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); suites=" " $i " " }
          if ($i ~ /^Types:/)  { types=$i }
        }
        if (types ~ /deb( |$)/ && suites ~ (" " suite " ")) { split(uris, u, " "); print u[1]; exit }
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk -v suite="$SUITE" '$1 == "deb" && $0 !~ /\[.*\]/ && $3 == suite { print $2; exit }
                           $1 == "deb" && $0 ~ /\[.*\]/ { for (i = 2; i <= NF; i++) if ($i ~ /\]$/) { if ($(i+2) == suite) { print $(i+1); exit } } }' "$f"
  done
}

MIRROR="${DEVPROF_DEBIAN_MIRROR:-$(mirror_from_apt | head -n1)}"
if [ -z "$MIRROR" ]; then
  echo "error: no Debian mirror for '$SUITE' found in /etc/apt (set DEVPROF_DEBIAN_MIRROR)" >&2
  exit 1
fi

export PATH="$PATH:/usr/sbin:/sbin"
if ! command -v debootstrap >/dev/null; then
  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
  echo "installing debootstrap (apt) ..."
  { as_root apt-get install -y -qq debootstrap >/dev/null 2>&1 \
    || { as_root apt-get update -qq && as_root apt-get install -y -qq debootstrap >/dev/null; }; } \
    || { echo "error: debootstrap is not installed and apt-get could not install it" >&2; exit 1; }
fi

ROOTFS="$(mktemp -d /tmp/devprof-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT

echo "making $IMAGE with debootstrap (minbase, $SUITE) ..."
debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || {
  tail -n 30 "$ROOTFS.log" >&2; rm -f "$ROOTFS.log"; exit 1; }
rm -f "$ROOTFS.log"

# Carry over the host's apt acquisition settings (snapshot mirrors need relaxed
# Valid-Until checks; proxies) so that apt-get inside image builds behaves as on the host.
apt-config dump | grep -E '^Acquire::(Check-Valid-Until|Check-Date|https?::Proxy)' \
  >"$ROOTFS/etc/apt/apt.conf.d/99host-acquire" || true
# Keep images small, as the official slim image does.
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
  >"$ROOTFS/etc/apt/apt.conf.d/99no-recommends"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*

tar -C "$ROOTFS" -c . | docker import \
  --change 'CMD ["bash"]' \
  --change 'ENV LANG=C.UTF-8' \
  - "$IMAGE" >/dev/null
echo "base image $IMAGE made from $SUITE"
