//go:build cudasim && !cuda

// Compiles elementwise.cu for the host SIMT harness (see link_sim.go).
#include "elementwise.cu"
