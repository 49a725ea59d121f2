"""A small, steadily busy Python program for profiling tests.

Its hot functions have stable names so that a profile of it can be checked for them,
each on its own named thread:
  hash_loop      - CPU-bound FNV-1a hashing in pure Python (the heaviest)
  sort_chunk     - builds and sorts lists with a Python key function (lighter)
  compress_blob  - zlib.compress, i.e. time spent in C (libz) under a Python frame,
                   which `py-spy --native` shows as a native frame below compress_blob
  io_loop        - a small file write/read round trip, then sleep (mostly idle)
Each CPU function runs on a duty cycle: every period it works for PCT% of the period,
then sleeps, so the load stays bounded (the default is ~90% of one core in total; the
GIL keeps the Python parts on one core at a time anyway).

Environment (all optional):
  BUSY_HASH_PCT      share of one core for hash_loop, 0-100      (default 60)
  BUSY_SORT_PCT      share of one core for sort_chunk, 0-100     (default 20)
  BUSY_COMPRESS_PCT  share of one core for compress_blob, 0-100  (default 10)
  BUSY_PERIOD_MS     duty-cycle period in milliseconds           (default 100)
  BUSY_IO_MS         interval of the I/O loop in ms, 0=off       (default 200)
  BUSY_REPORT_S      seconds between progress lines, 0=quiet     (default 30)
"""

import os
import random
import signal
import sys
import tempfile
import threading
import time
import zlib


def env_int(name, default, lo, hi):
    try:
        v = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return min(hi, max(lo, v))


HASH_PCT = env_int("BUSY_HASH_PCT", 60, 0, 100)
SORT_PCT = env_int("BUSY_SORT_PCT", 20, 0, 100)
COMPRESS_PCT = env_int("BUSY_COMPRESS_PCT", 10, 0, 100)
PERIOD_MS = env_int("BUSY_PERIOD_MS", 100, 10, 10000)
IO_MS = env_int("BUSY_IO_MS", 200, 0, 60000)
REPORT_S = env_int("BUSY_REPORT_S", 30, 0, 3600)

counts = {"hash": 0, "sort": 0, "compress": 0, "io": 0}
DATA = bytes((i * 131 + 7) & 0xFF for i in range(1024))
# Compressible but not trivial, so that zlib does real work per call.
BLOB = b"".join(b"%08d:%s;" % (i, DATA[i % 512 : i % 512 + 24].hex().encode()) for i in range(4096))
stop = threading.Event()


def hash_loop(budget):
    """FNV-1a over DATA until `budget` seconds have passed; the loop lives here so the
    samples carry this name."""
    end = time.monotonic() + budget
    h = 0x811C9DC5
    while time.monotonic() < end:
        for b in DATA:
            h ^= b
            h = (h * 0x01000193) & 0xFFFFFFFF
        counts["hash"] += 1
    return h


def sort_key(x):
    return (x * 2654435761) & 0xFFFF


def sort_chunk(budget):
    end = time.monotonic() + budget
    rnd = random.Random(1)
    while time.monotonic() < end:
        chunk = [rnd.randrange(1 << 30) for _ in range(2000)]
        chunk.sort(key=sort_key)
        counts["sort"] += 1


def compress_blob(budget):
    end = time.monotonic() + budget
    while time.monotonic() < end:
        zlib.compress(BLOB, 9)
        counts["compress"] += 1


def duty_cycle(work, pct):
    period = PERIOD_MS / 1000.0
    budget = period * pct / 100.0
    while not stop.is_set():
        start = time.monotonic()
        work(budget)
        stop.wait(max(0.0, period - (time.monotonic() - start)))


def io_loop():
    path = os.path.join(tempfile.gettempdir(), "busy-%d.txt" % os.getpid())
    try:
        while not stop.wait(IO_MS / 1000.0):
            with open(path, "w") as f:
                f.write("%d %r\n" % (time.time_ns(), counts))
            with open(path) as f:
                counts["io"] += 1 if f.read() else 0
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def main():
    # As PID 1 (no --init) the default SIGTERM action would not apply; exit on it.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stop.set())
    print(
        "busy.py: pid %d, python %s, hash_loop %d%%, sort_chunk %d%%, compress_blob %d%%, "
        "period %d ms, io every %d ms"
        % (os.getpid(), sys.version.split()[0], HASH_PCT, SORT_PCT, COMPRESS_PCT, PERIOD_MS, IO_MS),
        flush=True,
    )
    threads = []
    for name, fn, pct in (
        ("hash", hash_loop, HASH_PCT),
        ("sort", sort_chunk, SORT_PCT),
        ("compress", compress_blob, COMPRESS_PCT),
    ):
        if pct > 0:
            threads.append(threading.Thread(target=duty_cycle, args=(fn, pct), name=name, daemon=True))
    if IO_MS > 0:
        threads.append(threading.Thread(target=io_loop, name="io", daemon=True))
    for t in threads:
        t.start()
    last = time.monotonic()
    while not stop.wait(1.0):
        if REPORT_S > 0 and time.monotonic() - last >= REPORT_S:
            last = time.monotonic()
            print("busy.py: %r" % counts, flush=True)
    for t in threads:
        t.join(timeout=2)
    print("busy.py: exiting", flush=True)


if __name__ == "__main__":
    main()
