# First on the target's PATH: a program devprof should look up in its own PATH, never in
# the target's environment. Runs the real one, so nothing else changes.
hostile_mark 0 "$@"
n=${0##*/}
for d in /usr/local/sbin /usr/sbin /usr/bin /sbin /bin; do
  [ -x "$d/$n" ] && exec "$d/$n" "$@"
done
exit 127
