// Command tiny is a small Go program whose stripped builds are devprof's golden test of
// names, file:line and inlined frames read from .gopclntab.
package main

import "os"

// mix is small enough to be inlined into spin: its code shows as an inlined frame.
func mix(h, x int) int {
	return h*31 + x
}

//go:noinline
func spin(n int) int {
	h := 0
	for i := 0; i < n; i++ {
		h = mix(h, i)
	}
	return h
}

//go:noinline
func fold(xs []int) int {
	s := 0
	for _, x := range xs {
		s += spin(x)
	}
	return s
}

func main() {
	os.Exit(fold([]int{len(os.Args), 3}) & 1)
}
