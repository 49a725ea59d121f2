# An async-profiler in a directory the JVM's user owns, named by ASYNC_PROFILER_HOME.
# Run as `collect`, it is the recorder: it writes -1 into the recorder pidfile in the
# workdir devprof handed to the JVM's user, then ends its JVM so that devprof stops the
# "recorder" through that pidfile (kill -INT -1 as root signals every process).
hostile_mark 1 "$@"
PATH=/usr/sbin:/usr/bin:/sbin:/bin
case "$1" in
  --version) echo "Async-profiler 4.5 built on Jan  1 2025"; exit 0 ;;
  collect)
    out=; prev=; pid=
    for a in "$@"; do [ "$prev" = -f ] && out=$a; prev=$a; pid=$a; done
    if [ -n "$out" ]; then
      printf 'hostile_asprof_frame 1\n' > "$out" 2>/dev/null
      echo -1 > "$(dirname "$out")/perf.pid" 2>/dev/null
    fi
    kill -TERM "$pid" 2>/dev/null
    # Still "recording" (with the pidfile's pid, so nothing is left behind once it ends).
    exec sleep 60
    ;;
  *) exit 0 ;;
esac
