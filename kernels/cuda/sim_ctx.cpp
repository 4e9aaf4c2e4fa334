//go:build cudasim && !cuda

// Compiles ctx.cu for the host SIMT harness (see link_sim.go).
#include "ctx.cu"
