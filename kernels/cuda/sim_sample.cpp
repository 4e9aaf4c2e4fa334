//go:build cudasim && !cuda

// Compiles sample.cu for the host SIMT harness (see link_sim.go).
#include "sample.cu"
