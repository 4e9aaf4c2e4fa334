package sample

// Purpose separates the random streams drawn at one position, so that, for
// example, the speculative accept test and the token draw never share a
// number.
type Purpose uint64

const (
	PurposeSample   Purpose = 1 // the token draw of Sample
	PurposeAccept   Purpose = 2 // speculative decoding: accept/reject a draft
	PurposeResample Purpose = 3 // speculative decoding: draw from the residual
)

// splitmix64 is the SplitMix64 finalizer (Steele, Lea, Flood 2014): a
// bijective 64-bit mix with good avalanche.
func splitmix64(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Hash64 is the counter-based generator: a pure function of (seed, pos,
// purpose), so draws are reproducible and independent of call order. It
// chains three SplitMix64 rounds, so it is cheap to reproduce in a GPU
// kernel: h = mix(mix(mix(seed) ^ pos) ^ purpose).
func Hash64(seed uint64, pos int64, purpose Purpose) uint64 {
	h := splitmix64(seed)
	h = splitmix64(h ^ uint64(pos))
	return splitmix64(h ^ uint64(purpose))
}

// Uniform returns a float64 in [0, 1) from the top 53 bits of Hash64.
func Uniform(seed uint64, pos int64, purpose Purpose) float64 {
	return float64(Hash64(seed, pos, purpose)>>11) * 0x1p-53
}
