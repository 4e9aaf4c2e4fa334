package backend

import "github.com/ninfer/ninfer/kernels/cpu"

// SmallTForTest is the small-T regime bound of the CPU matmul.
const SmallTForTest = cpu.SmallT

// GDNChunkForTest is the chunk length of the chunked delta-rule kernels.
const GDNChunkForTest = cpu.GDNChunk
