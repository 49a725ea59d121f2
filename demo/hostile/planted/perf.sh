# A perf that devprof finds only through a forged probe line. It passes devprof's checks:
# with /markers/perf-mode "deny" it answers every recording with perf's permission error
# (so a sidecar climbs its privilege ladder); otherwise it runs the real perf of whatever
# root it runs in, so the capture goes on and later steps are reached.
hostile_mark 1 "$@"
mode=
read -r mode < "$root/markers/perf-mode" 2>/dev/null
real=
for p in /usr/bin/perf_[0-9]* /usr/bin/perf; do
  [ -f "$p" ] && [ -x "$p" ] && [ "$p" != "$self" ] && { real=$p; break; }
done
case "$1" in
  --version|version) [ -n "$real" ] && exec "$real" "$@"; echo "perf version 6.1.0"; exit 0 ;;
esac
if [ "$mode" = deny ] || [ -z "$real" ]; then
  echo "Error: No permission to enable cpu-clock event." >&2
  echo "You may not have permission to collect stats. Consider tweaking /proc/sys/kernel/perf_event_paranoid: Permission denied" >&2
  exit 1
fi
exec "$real" "$@"
