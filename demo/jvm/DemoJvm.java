// The devprof JVM demo: a small busy Java program whose hot methods have names that a
// flamegraph must show. Tests look for them by name:
//
//   method                 thread          shows up in
//   DemoJvm.hashChain      hash-chain      cpu (the main CPU load)
//   DemoJvm.sortChunk      sort-chunk      cpu (a lighter second load)
//   DemoJvm.sleepyWait     sleepy-wait     wall-clock profiles only (parked, not on CPU)
//
// Each CPU worker is busy for the first part of every period (100 ms by default) and
// parked (LockSupport.parkNanos, off-CPU) for the rest, so its share of one core is about
// its duty cycle (less on a crowded machine: the busy part is measured in wall time).
//
// Environment (read once at start):
//   DEMO_JVM_HASH_DUTY    percent of one core for hashChain   (0-100, default 60; 0 = off)
//   DEMO_JVM_SORT_DUTY    percent of one core for sortChunk   (0-100, default 20; 0 = off)
//   DEMO_JVM_SLEEP_MS     length of each sleepyWait park in ms (default 50; 0 = off)
//   DEMO_JVM_PERIOD_MS    period of the busy/idle cycle in ms  (default 100)
//
// Single file, no dependencies: `javac DemoJvm.java && java -cp . DemoJvm`.

import java.util.concurrent.locks.LockSupport;

public final class DemoJvm {
    // Results are folded into these volatile fields so the JIT cannot drop the work.
    static volatile long hashSink;
    static volatile long sortSink;
    static volatile long wakeups;

    public static void main(String[] args) throws InterruptedException {
        int hashDuty = envInt("DEMO_JVM_HASH_DUTY", 60, 0, 100);
        int sortDuty = envInt("DEMO_JVM_SORT_DUTY", 20, 0, 100);
        int sleepMs = envInt("DEMO_JVM_SLEEP_MS", 50, 0, 60_000);
        int periodMs = envInt("DEMO_JVM_PERIOD_MS", 100, 1, 60_000);
        System.out.printf("DemoJvm pid %d: hashChain %d%%, sortChunk %d%%, sleepyWait %d ms, period %d ms%n",
                ProcessHandle.current().pid(), hashDuty, sortDuty, sleepMs, periodMs);
        System.out.flush();

        if (hashDuty > 0) {
            start("hash-chain", () -> hashChain(hashDuty, periodMs));
        }
        if (sortDuty > 0) {
            start("sort-chunk", () -> sortChunk(sortDuty, periodMs));
        }
        if (sleepMs > 0) {
            start("sleepy-wait", () -> sleepyWait(sleepMs));
        }
        // The main thread only waits, so it stays out of CPU profiles.
        Thread.currentThread().join();
    }

    static void start(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.setDaemon(false);
        t.start();
    }

    // Each worker method holds its own busy/idle loop and never returns. The JIT is free
    // to inline whatever it calls, but the method itself is always the outermost compiled
    // frame of its thread (an OSR compilation of this very method), so its name survives
    // in a perf map as well as in async-profiler's output.

    // Parks for the rest of the period once the busy part is used up; returns the start
    // of the next period.
    static long restOfPeriod(long periodStart, long period) {
        long rest = period - (System.nanoTime() - periodStart);
        if (rest > 0) {
            LockSupport.parkNanos(rest);
        }
        return System.nanoTime();
    }

    // ---- hashChain: tight arithmetic over an array (FNV-1a-like mixing) ----

    static void hashChain(int duty, int periodMs) {
        long[] data = new long[4096];
        for (int i = 0; i < data.length; i++) {
            data[i] = i * 0x9E3779B97F4A7C15L;
        }
        long period = periodMs * 1_000_000L;
        long busy = period * duty / 100;
        long h = 0xcbf29ce484222325L;
        long periodStart = System.nanoTime();
        for (long r = 0; ; r++) {
            // Each step depends on the previous one and the array is rewritten, so none
            // of it can be hoisted or removed.
            for (int i = 0; i < data.length; i++) {
                h ^= data[i];
                h *= 0x100000001b3L;
                h = Long.rotateLeft(h, 13) + r;
                data[i] = h;
            }
            hashSink = h;
            if (System.nanoTime() - periodStart >= busy) {
                periodStart = restOfPeriod(periodStart, period);
            }
        }
    }

    // ---- sortChunk: fill a chunk with pseudo-random ints and insertion-sort it ----

    static void sortChunk(int duty, int periodMs) {
        int[] chunk = new int[512];
        long period = periodMs * 1_000_000L;
        long busy = period * duty / 100;
        long x = 42;
        long periodStart = System.nanoTime();
        while (true) {
            for (int i = 0; i < chunk.length; i++) {
                x ^= x << 13;
                x ^= x >>> 7;
                x ^= x << 17;
                chunk[i] = (int) x;
            }
            // Insertion sort written out here (not Arrays.sort) so that the time is spent
            // in this method itself.
            for (int i = 1; i < chunk.length; i++) {
                int v = chunk[i];
                int j = i - 1;
                while (j >= 0 && chunk[j] > v) {
                    chunk[j + 1] = chunk[j];
                    j--;
                }
                chunk[j + 1] = v;
            }
            sortSink += chunk[chunk.length / 2];
            if (System.nanoTime() - periodStart >= busy) {
                periodStart = restOfPeriod(periodStart, period);
            }
        }
    }

    // ---- sleepyWait: parked most of the time; only a wall-clock profile sees it ----

    static void sleepyWait(int sleepMs) {
        long nanos = sleepMs * 1_000_000L;
        while (true) {
            LockSupport.parkNanos(nanos);
            wakeups++;
        }
    }

    static int envInt(String name, int dflt, int min, int max) {
        String v = System.getenv(name);
        if (v == null || v.isBlank()) {
            return dflt;
        }
        try {
            int n = Integer.parseInt(v.trim());
            if (n < min || n > max) {
                throw new NumberFormatException();
            }
            return n;
        } catch (NumberFormatException e) {
            System.err.printf("DemoJvm: %s=%s is not a number in %d..%d, using %d%n", name, v, min, max, dflt);
            return dflt;
        }
    }
}
