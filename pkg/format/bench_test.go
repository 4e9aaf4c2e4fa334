package format

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"
)

// benchInput returns a [n,k] bf16 matrix as raw little-endian bytes.
func benchInput(n, k int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 2*n*k)
	for i := 0; i < n*k; i++ {
		binary.LittleEndian.PutUint16(raw[2*i:], F32ToBF16(float32(r.NormFloat64()*0.02)))
	}
	return raw
}

// benchEncode encodes a [4096,4096] bf16 matrix with the given number of
// goroutines; throughput is reported in MB/s of bf16 input.
func benchEncode(b *testing.B, f Format, workers int) {
	const n, k = 4096, 4096
	raw := benchInput(n, k)
	shape := []int64{n, k}
	e, err := NewRowEncoder(f, shape)
	if err != nil {
		b.Fatal(err)
	}
	if f == NVFP4 {
		am, _ := AmaxRaw(SourceBF16, raw)
		_ = e.SetAmax(am)
	}
	dst := make([]byte, e.Size())
	b.SetBytes(n * k * 2)
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r0, r1 := int64(w*n/workers), int64((w+1)*n/workers)
				if err := e.EncodeRowsRaw(dst, r0, r1, SourceBF16, raw[2*r0*k:2*r1*k]); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		if err := e.Finish(dst); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeQ4(b *testing.B)    { benchEncode(b, Q4G64, 1) }
func BenchmarkEncodeQ5(b *testing.B)    { benchEncode(b, Q5G64, 1) }
func BenchmarkEncodeQ6(b *testing.B)    { benchEncode(b, Q6G64, 1) }
func BenchmarkEncodeQ8(b *testing.B)    { benchEncode(b, Q8G32, 1) }
func BenchmarkEncodeQ4x2(b *testing.B)  { benchEncode(b, Q4G64, 2) }
func BenchmarkEncodeQ5x2(b *testing.B)  { benchEncode(b, Q5G64, 2) }
func BenchmarkEncodeNVFP4(b *testing.B) { benchEncode(b, NVFP4, 1) }
func BenchmarkEncodeFP8(b *testing.B)   { benchEncode(b, FP8Row, 1) }

// benchDecode decodes a [4096,4096] object; MB/s is of bf16-equivalent output.
func benchDecode(b *testing.B, f Format) {
	const n, k = 4096, 4096
	raw := benchInput(n, k)
	x := make([]float32, n*k)
	widen(x, SourceBF16, raw)
	shape := []int64{n, k}
	enc, err := Encode(f, shape, x)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n * k * 2)
	b.ResetTimer()
	for b.Loop() {
		if err := DecodeRows(f, shape, enc, 0, n, x); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeQ4(b *testing.B)    { benchDecode(b, Q4G64) }
func BenchmarkDecodeQ5(b *testing.B)    { benchDecode(b, Q5G64) }
func BenchmarkDecodeQ6(b *testing.B)    { benchDecode(b, Q6G64) }
func BenchmarkDecodeNVFP4(b *testing.B) { benchDecode(b, NVFP4) }
