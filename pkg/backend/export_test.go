package backend

import "github.com/ninfer/ninfer/kernels/cpu"

// SmallTForTest is the small-T regime bound of the CPU matmul.
const SmallTForTest = cpu.SmallT
