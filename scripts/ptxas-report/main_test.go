package main

import (
	"strings"
	"testing"
)

const sample = `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4gemvILi1EEvPKfPfi' for 'sm_90a'
ptxas info    : Function properties for _Z4gemvILi1EEvPKfPfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 34 registers, used 1 barriers, 384 bytes smem, 400 bytes cmem[0]
ptxas info    : Function properties for _Z6helperv
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z5spillPf' for 'sm_89'
ptxas info    : Function properties for _Z5spillPf
    40 bytes stack frame, 36 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 380 bytes cmem[0]
`

func TestParse(t *testing.T) {
	ks, err := Parse(strings.NewReader(sample), "weights")
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 {
		t.Fatalf("got %d kernels, want 2: %+v", len(ks), ks)
	}
	want0 := Kernel{Name: "_Z4gemvILi1EEvPKfPfi", Arch: "sm_90a", Registers: 34, Barriers: 1, Smem: 384, Source: "weights"}
	if ks[0] != want0 {
		t.Errorf("kernel 0 = %+v, want %+v", ks[0], want0)
	}
	if ks[0].Bad() {
		t.Error("a clean kernel is reported bad")
	}
	// The non-entry helper's stack frame must not leak into an entry.
	want1 := Kernel{Name: "_Z5spillPf", Arch: "sm_89", Registers: 255, Stack: 40, SpillStores: 36, SpillLoads: 36, Source: "weights"}
	if ks[1] != want1 {
		t.Errorf("kernel 1 = %+v, want %+v", ks[1], want1)
	}
	if !ks[1].Bad() {
		t.Error("a spilling kernel is not reported")
	}
}

func TestShorten(t *testing.T) {
	for in, want := range map[string]string{
		"void gemv<1, (int)5>(float const*, float*, int)": "void gemv<1, (int)5>",
		"plain":             "plain",
		"f<a(b)>(int)":      "f<a(b)>",
		"ns::k<x>(ni_rows)": "ns::k<x>",
	} {
		if got := shorten(in); got != want {
			t.Errorf("shorten(%q) = %q, want %q", in, got, want)
		}
	}
}
