// Command tiny is a small Go program whose stripped build is devprof's golden test of
// names read from .gopclntab.
package main

import "os"

//go:noinline
func spin(n int) int {
	h := 0
	for i := 0; i < n; i++ {
		h = h*31 + i
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
