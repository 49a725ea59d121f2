# The tools layer, made by `devprof build tools --from IMAGE`: perf, procps and binutils
# added to any existing image (a node you do not build yourself), whose entrypoint,
# command and user stay as they were. Debian/Ubuntu (apt), Alpine (apk) and Fedora/RHEL
# (dnf/yum) bases are supported; Ubuntu's kernel-versioned perf binaries are linked as
# /usr/local/bin/perf_X.Y, where devprof looks for them.
ARG FROM_IMAGE
FROM ${FROM_IMAGE}
USER root
RUN set -e; \
    if command -v apt-get >/dev/null; then \
      apt-get update; \
      if apt-cache show linux-perf >/dev/null 2>&1; then perf=linux-perf; else perf="linux-tools-generic linux-tools-common"; fi; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $perf procps binutils; \
      rm -rf /var/lib/apt/lists/*; \
      for p in /usr/lib/linux-tools/*/perf; do \
        [ -x "$p" ] || continue; v="$(basename "$(dirname "$p")")"; ln -sf "$p" "/usr/local/bin/perf_${v%%-*}"; \
      done; \
    elif command -v apk >/dev/null; then \
      apk add --no-cache perf procps binutils; \
    elif command -v dnf >/dev/null; then \
      dnf install -y perf procps-ng binutils && dnf clean all; \
    elif command -v yum >/dev/null; then \
      yum install -y perf procps-ng binutils && yum clean all; \
    else \
      echo "devprof: no apt-get, apk, dnf or yum in this image: install perf by hand" >&2; exit 1; \
    fi; \
    mkdir -p /profiling
# devprof passes the base image's own user (empty: root).
ARG RESTORE_USER=root
USER ${RESTORE_USER}
