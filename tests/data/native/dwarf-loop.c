/* The program behind tests/data/native/host-dwarf-loop.*: CPU work in a few functions that
 * call each other, built without frame pointers (only DWARF unwinding recovers its stacks),
 * and one path that spends its time in the kernel (getppid), so a capture holds user-only
 * and kernel samples. Static (musl): the one file its stacks point into is small enough to
 * commit. `dwarf-loop SECONDS` runs for that long. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t done;

static void stop(int sig) { (void)sig; done = 1; }

__attribute__((noinline)) static uint64_t mix(uint64_t x) {
    for (int i = 0; i < 64; i++) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
    }
    return x;
}

__attribute__((noinline)) static uint64_t hash_chain(uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 2000; i++)
        x = mix(x + i);
    return x;
}

__attribute__((noinline)) static uint64_t table_walk(uint64_t seed) {
    static uint32_t table[1 << 16];
    uint64_t sum = 0;
    uint32_t at = (uint32_t)seed;
    for (int i = 0; i < 200000; i++) {
        at = (at * 1103515245u + 12345u) & 0xffff;
        table[at] += i;
        sum += table[(at * 7) & 0xffff];
    }
    return sum;
}

/* getppid(2) by hand: musl's own wrapper has no unwind tables, this one does. */
__attribute__((noinline)) static long parent_pid(void) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(110L) : "rcx", "r11", "memory");
    return ret;
}

__attribute__((noinline)) static uint64_t ask_kernel(int n) {
    uint64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += (uint64_t)parent_pid();
    return sum;
}

__attribute__((noinline)) static uint64_t one_round(uint64_t seed) {
    return hash_chain(seed) ^ table_walk(seed) ^ ask_kernel(5000);
}

int main(int argc, char **argv) {
    signal(SIGALRM, stop);
    alarm(argc > 1 ? (unsigned)atoi(argv[1]) : 3);
    uint64_t x = 1, rounds = 0;
    while (!done) {
        x = one_round(x);
        rounds++;
    }
    printf("%llu rounds (%llx)\n", (unsigned long long)rounds, (unsigned long long)x);
    return 0;
}
