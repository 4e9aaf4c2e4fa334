//go:build cudasim && !cuda

// Compiles delta.cu for the host SIMT harness (see link_sim.go).
#include "delta.cu"
