//go:build cudasim && !cuda

// The host SIMT harness itself (fibers, launch, guard-paged memory, PTX emulations).
#include "simt/simt.cpp"
