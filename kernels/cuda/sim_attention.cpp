//go:build cudasim && !cuda

// Compiles attention.cu for the host SIMT harness (see link_sim.go).
#include "attention.cu"
