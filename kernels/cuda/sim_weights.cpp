//go:build cudasim && !cuda

// Compiles weights.cu for the host SIMT harness (see link_sim.go).
#include "weights.cu"
