# jcmd beside the JVM-lookalike: devprof runs it as the JVM's user (allowed). It answers
# like jcmd does, so devprof goes on to read the perf map the lookalike made hostile.
hostile_mark 0 "$@"
echo "$1:"
exit 0
