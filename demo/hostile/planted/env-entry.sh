# Named by an entry of the target's environment that has no `=` (or that starts with `-`):
# `env -i <environment> CMD` runs it. Passes the rest on, so the run goes on.
hostile_mark 1 "$@"
exec /usr/bin/env "$@"
