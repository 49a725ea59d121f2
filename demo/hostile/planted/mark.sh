#!/bin/sh
# Planted by demo-hostile (a container user) where devprof might run it. Whoever runs it
# leaves a marker in /markers/<current test>/ of the hostile container, found relative to
# this file's own path, so a run from a sidecar (as /proc/PID/root/tmp/p/...) is seen too.
# `hostile_mark 1`: any run is a defect; `hostile_mark 0`: only a run as root or from
# outside the target (a sidecar).
hostile_mark() {
  always=$1; shift
  # The tools below come from the system, never from a PATH that names /tmp/p (where the
  # shims are); the caller's PATH is put back for the program that runs after.
  caller_path=$PATH
  PATH=/usr/sbin:/usr/bin:/sbin:/bin
  self=$0
  case "$self" in
    /proc/[0-9]*/root/*) root=${self%%/root/*}/root ;;
    *) root= ;;
  esac
  uid=$(id -u 2>/dev/null)
  if [ "$always" != 1 ] && [ "$uid" != 0 ] && [ -z "$root" ]; then
    PATH=$caller_path
    return 0
  fi
  m=$root/markers
  sub=$(cat "$m/current" 2>/dev/null)
  [ -n "$sub" ] || sub=unattributed
  mkdir -p "$m/$sub" 2>/dev/null
  {
    echo "planted program executed: $self"
    echo "arguments: $*"
    echo "uid: $uid ($(id -un 2>/dev/null)), gid: $(id -g 2>/dev/null)"
    echo "hostname: $(cat /proc/sys/kernel/hostname 2>/dev/null)"
    echo "root as seen: ${root:-/ (inside the target)}"
    grep -E '^(CapEff|Seccomp):' /proc/self/status 2>/dev/null
    echo "parent: $(tr '\0' ' ' < /proc/$PPID/cmdline 2>/dev/null | cut -c1-300)"
  } > "$m/$sub/$(basename "$self").$$" 2>/dev/null
  PATH=$caller_path
}
