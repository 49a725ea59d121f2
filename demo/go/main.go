// Command demo-go is the Go workload of the devprof test bed: a busy process with named
// hot functions, built stripped (-trimpath -ldflags="-s -w") so that devprof has to name
// its frames from .gopclntab, and serving net/http/pprof on the loopback interface only,
// so that profiles can be fetched only from inside the container's network namespace.
//
// Workloads (each a //go:noinline function run in its own goroutine, forever):
//
//	main.hashChain    FNV/xorshift-multiply chain over a buffer, all self time   (cpu)
//	main.sortChunk    shell sort of a fresh 8 Ki-element chunk, self time         (cpu)
//	main.allocBlocks  keeps up to DEMO_ALLOC_MAX_MB of 1 MiB blocks alive, replacing
//	                  the oldest one every 50 ms                                   (heap)
//
// Settings (environment):
//
//	DEMO_HASH_DUTY    percent of one core spent in hashChain in each 100 ms period
//	                  (0..100, default 60; 0 turns the workload off)
//	DEMO_SORT_DUTY    the same for sortChunk (default 20)
//	DEMO_ALLOC_MAX_MB cap of the memory allocBlocks holds (default 64; 0 turns it off)
//	DEMO_PPROF_ADDR   listen address of net/http/pprof (default 127.0.0.1:6060;
//	                  "off" serves nothing)
//
// A bad value is reported on stderr with exit status 2.
package main

import (
	"fmt"
	"log"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

const period = 100 * time.Millisecond

// sink keeps the results alive so that the compiler cannot drop the work.
var sink atomic.Uint64

func envInt(name string, def, max int) int {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		fmt.Fprintf(os.Stderr, "demo-go: %s=%q: want an integer 0..%d\n", name, v, max)
		os.Exit(2)
	}
	return n
}

// dutyLoop runs work in short slices for duty% of every period and sleeps the rest, so
// that a CPU profile shows the workload at about that share of one core.
func dutyLoop(duty int, work func() uint64) {
	busy := period * time.Duration(duty) / 100
	for {
		start := time.Now()
		for time.Since(start) < busy {
			sink.Add(work())
		}
		if rest := period - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
	}
}

// mix is small enough to be inlined into hashChain: its frames show up as inlined ones.
func mix(h uint64, b byte) uint64 {
	h ^= uint64(b)
	h *= 0x100000001b3
	h ^= h >> 29
	return h
}

//go:noinline
func hashChain(buf []byte, rounds int) uint64 {
	h := uint64(0xcbf29ce484222325)
	for r := 0; r < rounds; r++ {
		for i := range buf {
			h = mix(h, buf[i])
		}
		buf[r%len(buf)] = byte(h)
	}
	return h
}

//go:noinline
func sortChunk(chunk []uint32, seed uint32) uint64 {
	x := seed | 1
	for i := range chunk {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		chunk[i] = x
	}
	// Shell sort (Ciura gaps): the time stays in this function rather than in package sort.
	gaps := [...]int{701, 301, 132, 57, 23, 10, 4, 1}
	for _, gap := range gaps {
		for i := gap; i < len(chunk); i++ {
			v := chunk[i]
			j := i
			for ; j >= gap && chunk[j-gap] > v; j -= gap {
				chunk[j] = chunk[j-gap]
			}
			chunk[j] = v
		}
	}
	return uint64(chunk[0]) + uint64(chunk[len(chunk)-1])
}

// held is what allocBlocks keeps alive (an inuse_space heap profile shows it).
var held [][]byte

//go:noinline
func allocBlocks(maxBlocks int, next int) int {
	b := make([]byte, 1<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = byte(next + i) // touch every page: resident, not just reserved
	}
	if len(held) < maxBlocks {
		held = append(held, b)
	} else {
		held[next%maxBlocks] = b
	}
	return next + 1
}

func main() {
	hashDuty := envInt("DEMO_HASH_DUTY", 60, 100)
	sortDuty := envInt("DEMO_SORT_DUTY", 20, 100)
	allocMB := envInt("DEMO_ALLOC_MAX_MB", 64, 1<<16)
	addr := os.Getenv("DEMO_PPROF_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6060"
	}

	if hashDuty > 0 {
		go dutyLoop(hashDuty, func() uint64 {
			buf := make([]byte, 4096)
			return hashChain(buf, 64)
		})
	}
	if sortDuty > 0 {
		chunk := make([]uint32, 8<<10)
		seed := uint32(1)
		go dutyLoop(sortDuty, func() uint64 {
			seed++
			return sortChunk(chunk, seed)
		})
	}
	if allocMB > 0 {
		go func() {
			n := 0
			for {
				n = allocBlocks(allocMB, n)
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	if addr != "off" {
		go func() {
			log.Printf("demo-go: pprof on http://%s/debug/pprof/", addr)
			if err := http.ListenAndServe(addr, nil); err != nil {
				log.Fatalf("demo-go: pprof server: %v", err)
			}
		}()
	}
	log.Printf("demo-go: pid %d, hashChain %d%%, sortChunk %d%%, allocBlocks up to %d MiB",
		os.Getpid(), hashDuty, sortDuty, allocMB)

	// PID 1 in a container gets no default signal handling: exit on SIGTERM/SIGINT.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
