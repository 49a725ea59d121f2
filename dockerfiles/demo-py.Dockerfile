# The Python test bed: Debian's python3 running demo/py/busy.py, with perf and procps in
# the image so that exec-mode profiling (perf inside the container) can be tested. Built
# from the context demo/py (scripts/runtime-images.sh).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
LABEL devprof.image=demo-py
RUN set -e; apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 linux-perf procps; \
    rm -rf /var/lib/apt/lists/*; \
    useradd --system --create-home --home-dir /home/app --uid 10001 --user-group app
COPY busy.py /app/busy.py
WORKDIR /app
USER app
# Unbuffered, so that `docker logs` shows the progress lines as they come.
ENV PYTHONUNBUFFERED=1
CMD ["python3", "/app/busy.py"]
