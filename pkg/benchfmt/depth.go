package benchfmt

import "strconv"

// depth reads the optional n_depth member (ninfer-bench -d): absent is 0,
// otherwise a non-negative integer.
func (o *obj) depth() int64 {
	if !o.has("n_depth") {
		return 0
	}
	n := o.i64("n_depth")
	if n < 0 {
		o.d.fail(join(o.path, "n_depth"), "want a non-negative integer, got %d", n)
	}
	return n
}

// DisplayLabel is the label shown in tables: the test label, followed by
// " @ d<depth>" when the test ran at a context depth (llama-bench's
// "tg128 @ d4096").
func DisplayLabel(label string, depth int64) string {
	if depth == 0 {
		return label
	}
	return label + " @ d" + strconv.FormatInt(depth, 10)
}
