# The hostile service of the test bed (demo/hostile): a non-root user that attacks devprof
# on purpose (issue 28). Built FROM the profiler image, which already has perf and procps,
# so exec-mode captures run and nothing more is downloaded; the context holds only this
# file and the host-built `hostile` binary (scripts/testbed-up.sh). /markers is where
# planted programs record that something ran them; compose mounts a volume there.
ARG PROFILER_IMAGE=devprof-profiler:latest
FROM ${PROFILER_IMAGE}
LABEL devprof.image=demo-hostile
RUN useradd --create-home --home-dir /home/hostile --uid 10666 --user-group hostile \
    && mkdir -m 1777 /markers
COPY hostile /usr/local/bin/hostile
USER hostile
WORKDIR /home/hostile
CMD ["hostile"]
