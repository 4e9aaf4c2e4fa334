package eval

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// A logits file (docs/EVAL.md, "Logits files") holds a model's next-token
// distribution at every scored position of an evaluation run, to use later
// as the reference of another run without loading that model:
//
//	magic "NINFERLG" | uint32 LE header length H | H bytes of JSON (LogitsHeader)
//	rows × (float64 LE NLL | uint32 LE argmax | vocab × uint16 LE k_i)
//	SHA-256 of every byte before it (32 bytes)
//
// k_i = round(−LogProbScale · ln p_i), the log-probability in fixed point
// with a step of 1/2048 nat (so the rounding error is at most 1/4096 nat
// at every probability, unlike binary16's, which grows with |ln p|);
// LogProbZero (ln p_i below −32, p_i < 1.3e-14) reads as p_i = 0. The NLL
// and argmax of each row are those of the unrounded float32 logits, so the
// reference PPL and top-1 agreement read from a file are exact and only
// the KL divergence carries the rounding (renormalized on reading;
// docs/EVAL.md states the measured error).
const (
	LogitsMagic    = "NINFERLG"
	LogitsFormat   = "ninfer-logits"
	LogitsVersion  = 1
	LogitsEncoding = "u16-neglogprob-2048"
	// LogProbScale is the fixed-point scale of the stored −ln p.
	LogProbScale = 2048
	// LogProbZero is the code of a probability below e^−32 (read as 0).
	LogProbZero = 0xFFFF
)

// encodeLogProb is the code of ln p (≤ 0; a rounding excess above 0 is 0).
func encodeLogProb(lp float64) uint16 {
	k := math.Round(-lp * LogProbScale)
	switch {
	case k <= 0:
		return 0
	case k >= LogProbZero || math.IsNaN(k):
		return LogProbZero
	}
	return uint16(k)
}

// decodeLogProb is ln p for a code (exact in float32), −Inf for LogProbZero.
func decodeLogProb(k uint16) float32 {
	if k == LogProbZero {
		return float32(math.Inf(-1))
	}
	return -float32(k) / LogProbScale
}

// LogitsHeader is the JSON header of a logits file. The fields up to
// Windows identify the run: a run compared against the file must have the
// same corpus, tokenizer, vocabulary and windows (Check); the model fields
// and the rest describe it.
type LogitsHeader struct {
	Format   string `json:"format"`   // LogitsFormat
	Version  int    `json:"version"`  // LogitsVersion
	Encoding string `json:"encoding"` // LogitsEncoding
	// The model whose distributions these are: its metadata.directory_sha256
	// ("" for an artifact written before the digest existed) and the path
	// it was loaded from.
	ModelDirectorySHA256 string `json:"model_directory_sha256"`
	Weights              string `json:"weights"`
	// TokenizerSHA256 is the SHA-256 of the embedded tokenizer.json ("" for
	// an artifact without one).
	TokenizerSHA256 string `json:"tokenizer_sha256"`
	// CorpusSHA256 is CorpusSHA256 of all the run's ids; CorpusTokens their
	// number.
	CorpusSHA256 string `json:"corpus_sha256"`
	CorpusTokens int    `json:"corpus_tokens"`
	Vocab        int    `json:"vocab"`
	Ctx          int    `json:"ctx"`
	Stride       int    `json:"stride"`
	First        int    `json:"first"` // first scored position of a window (ctx/2)
	Windows      int    `json:"windows"`
	Rows         int    `json:"rows"` // windows × (ctx − 1 − first)
	// How the model ran (not checked).
	KVDtype     string `json:"kv_dtype,omitempty"`
	Backend     string `json:"backend,omitempty"`
	Activations string `json:"activations,omitempty"`
}

// rowBytes is the size of one row.
func (h *LogitsHeader) rowBytes() int64 { return 12 + 2*int64(h.Vocab) }

// CorpusSHA256 is the hex SHA-256 of ids as little-endian int32 words.
func CorpusSHA256(ids []int32) string {
	s := sha256.New()
	var b [4]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:], uint32(id))
		s.Write(b[:])
	}
	return hex.EncodeToString(s.Sum(nil))
}

// ResourceSHA256 is the hex SHA-256 of an embedded resource, "" when res
// has none by that name.
func ResourceSHA256(res func(string) ([]byte, bool), name string) string {
	b, ok := res(name)
	if !ok {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// RunHeader is the header a logits file of a run over ids with windows
// must carry (the identifying fields only).
func RunHeader(ids []int32, windows []Window, vocab int, tokenizerSHA256 string) LogitsHeader {
	h := LogitsHeader{Format: LogitsFormat, Version: LogitsVersion, Encoding: LogitsEncoding,
		TokenizerSHA256: tokenizerSHA256, CorpusSHA256: CorpusSHA256(ids), CorpusTokens: len(ids),
		Vocab: vocab, Windows: len(windows)}
	if len(windows) > 0 {
		h.Ctx, h.First, h.Stride = windows[0].Ctx, windows[0].First, windows[0].Ctx
		if len(windows) > 1 {
			h.Stride = windows[1].Start - windows[0].Start
		}
		h.Rows = len(windows) * windows[0].Scored()
	}
	return h
}

func short(s string) string {
	if s == "" {
		return "none"
	}
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// Check returns an error naming the first identifying field in which the
// file's header h differs from the run's header run (RunHeader), nil when
// they agree.
func (h *LogitsHeader) Check(run LogitsHeader) error {
	switch {
	case h.CorpusSHA256 != run.CorpusSHA256 || h.CorpusTokens != run.CorpusTokens:
		return fmt.Errorf("corpus differs: saved over %d ids with sha256 %s, this run has %d ids with sha256 %s",
			h.CorpusTokens, short(h.CorpusSHA256), run.CorpusTokens, short(run.CorpusSHA256))
	case h.TokenizerSHA256 != run.TokenizerSHA256:
		return fmt.Errorf("tokenizer differs: saved with tokenizer.json sha256 %s, the model has %s",
			short(h.TokenizerSHA256), short(run.TokenizerSHA256))
	case h.Vocab != run.Vocab:
		return fmt.Errorf("vocab differs: saved %d, the model has %d", h.Vocab, run.Vocab)
	case h.Ctx != run.Ctx:
		return fmt.Errorf("ctx differs: saved with --ctx %d, this run has %d", h.Ctx, run.Ctx)
	case h.Stride != run.Stride:
		return fmt.Errorf("stride differs: saved with --stride %d, this run has %d", h.Stride, run.Stride)
	case h.Windows != run.Windows:
		return fmt.Errorf("windows differ: saved %d windows, this run has %d (--max-windows)", h.Windows, run.Windows)
	}
	return nil
}

// IsLogitsFile reports whether path starts with LogitsMagic.
func IsLogitsFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [len(LogitsMagic)]byte
	_, err = io.ReadFull(f, b[:])
	return err == nil && string(b[:]) == LogitsMagic
}

// LogitsWriter writes a logits file through a temporary file in the same
// directory, renamed into place by Commit.
type LogitsWriter struct {
	h        LogitsHeader
	path     string
	tmp      string
	f        *os.File
	w        *bufio.Writer
	sum      hash.Hash
	rows     int
	buf      []byte
	finished bool
}

// CreateLogits starts a logits file at path with header h (its Rows and
// Vocab say what Write must be given).
func CreateLogits(path string, h LogitsHeader) (*LogitsWriter, error) {
	if h.Vocab <= 0 || h.Rows < 0 {
		return nil, fmt.Errorf("%s: bad logits header (vocab %d, rows %d)", path, h.Vocab, h.Rows)
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: create parent directory: %w", path, err)
	}
	var rb [6]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, err
	}
	lw := &LogitsWriter{h: h, path: path, tmp: filepath.Join(dir, "."+filepath.Base(path)+".tmp-"+hex.EncodeToString(rb[:])), sum: sha256.New()}
	if lw.f, err = os.OpenFile(lw.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	lw.w = bufio.NewWriterSize(io.MultiWriter(lw.f, lw.sum), 1<<20)
	var hdr bytes.Buffer
	hdr.WriteString(LogitsMagic)
	binary.Write(&hdr, binary.LittleEndian, uint32(len(js)))
	hdr.Write(js)
	if _, err := lw.w.Write(hdr.Bytes()); err != nil {
		lw.Abort()
		return nil, fmt.Errorf("%s: write: %w", path, err)
	}
	return lw, nil
}

// Write appends the rows of one window: logits as Scorer.Logits returns
// them for window and first.
func (lw *LogitsWriter) Write(window []int32, first int, logits []float32) error {
	V := lw.h.Vocab
	n := len(window) - 1 - first
	if len(logits) != n*V {
		return fmt.Errorf("%s: %d logits for %d rows of %d", lw.path, len(logits), n, V)
	}
	if lw.rows+n > lw.h.Rows {
		return fmt.Errorf("%s: more rows than the header's %d", lw.path, lw.h.Rows)
	}
	if cap(lw.buf) < int(lw.h.rowBytes()) {
		lw.buf = make([]byte, lw.h.rowBytes())
	}
	b := lw.buf[:lw.h.rowBytes()]
	for r := 0; r < n; r++ {
		row := logits[r*V : (r+1)*V]
		lse, am, ok := LogSumExp(row)
		if !ok {
			return fmt.Errorf("%s: position %d: logits not finite", lw.path, first+r)
		}
		binary.LittleEndian.PutUint64(b[0:], math.Float64bits(lse-float64(row[window[first+r+1]])))
		binary.LittleEndian.PutUint32(b[8:], uint32(am))
		for i, z := range row {
			binary.LittleEndian.PutUint16(b[12+2*i:], encodeLogProb(float64(z)-lse))
		}
		if _, err := lw.w.Write(b); err != nil {
			return fmt.Errorf("%s: write: %w", lw.path, err)
		}
	}
	lw.rows += n
	return nil
}

// Commit checks that every row was written, appends the checksum, syncs
// and renames the file into place.
func (lw *LogitsWriter) Commit() (err error) {
	defer func() {
		if err != nil {
			lw.Abort()
		}
	}()
	if lw.rows != lw.h.Rows {
		return fmt.Errorf("%s: %d rows written, the header says %d", lw.path, lw.rows, lw.h.Rows)
	}
	if err := lw.w.Flush(); err != nil {
		return fmt.Errorf("%s: write: %w", lw.path, err)
	}
	if _, err := lw.f.Write(lw.sum.Sum(nil)); err != nil {
		return fmt.Errorf("%s: write: %w", lw.path, err)
	}
	if err := lw.f.Sync(); err != nil {
		return fmt.Errorf("%s: sync: %w", lw.path, err)
	}
	if err := lw.f.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", lw.path, err)
	}
	if err := os.Rename(lw.tmp, lw.path); err != nil {
		return fmt.Errorf("%s: %w", lw.path, err)
	}
	lw.finished = true
	return nil
}

// Abort removes the temporary file (after Commit it does nothing).
func (lw *LogitsWriter) Abort() {
	if lw.finished {
		return
	}
	lw.finished = true
	lw.f.Close()
	os.Remove(lw.tmp)
}

// Recording returns a Scorer that passes s's logits through and writes
// them to lw.
func Recording(s Scorer, lw *LogitsWriter) Scorer { return recording{s, lw} }

type recording struct {
	Scorer
	lw *LogitsWriter
}

func (r recording) Logits(window []int32, first int) ([]float32, error) {
	lg, err := r.Scorer.Logits(window, first)
	if err != nil {
		return nil, err
	}
	return lg, r.lw.Write(window, first, lg)
}

// LogitsFile is a logits file read as a Scorer: each Logits call returns
// the next window's rows (the stored ln p_i), in the order they
// were written. Its ExactRows are the saved NLL and argmax of those rows.
type LogitsFile struct {
	Header LogitsHeader
	path   string
	f      *os.File
	r      *bufio.Reader
	sum    hash.Hash
	rows   int
	buf    []byte
	out    []float32
	nll    []float64
	arg    []int
}

// OpenLogits opens a logits file and checks its magic, header and size
// (a truncated file is an error naming the sizes).
func OpenLogits(path string) (lf *LogitsFile, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	lf = &LogitsFile{path: path, f: f, sum: sha256.New()}
	lf.r = bufio.NewReaderSize(f, 1<<20)
	var pre [len(LogitsMagic) + 4]byte
	if err := lf.read(pre[:]); err != nil || string(pre[:len(LogitsMagic)]) != LogitsMagic {
		return nil, fmt.Errorf("%s: not a logits file (no %s magic)", path, LogitsMagic)
	}
	hl := int64(binary.LittleEndian.Uint32(pre[len(LogitsMagic):]))
	if hl > fi.Size() || hl > 1<<20 {
		return nil, fmt.Errorf("%s: truncated or corrupt logits file: header of %d bytes in a file of %d", path, hl, fi.Size())
	}
	js := make([]byte, hl)
	if err := lf.read(js); err != nil {
		return nil, fmt.Errorf("%s: truncated logits file: %w", path, err)
	}
	h := &lf.Header
	if err := json.Unmarshal(js, h); err != nil {
		return nil, fmt.Errorf("%s: logits header: %w", path, err)
	}
	switch {
	case h.Format != LogitsFormat:
		return nil, fmt.Errorf("%s: logits header: format %s, want %q", path, termsafe.Quote(h.Format), LogitsFormat)
	case h.Version != LogitsVersion:
		return nil, fmt.Errorf("%s: logits file version %d: this build reads version %d", path, h.Version, LogitsVersion)
	case h.Encoding != LogitsEncoding:
		return nil, fmt.Errorf("%s: logits encoding %s: want %q", path, termsafe.Quote(h.Encoding), LogitsEncoding)
	case h.Vocab <= 0 || h.Ctx < 3 || h.First < 0 || h.First >= h.Ctx-1 || h.Windows < 0 || h.Rows != h.Windows*(h.Ctx-1-h.First):
		return nil, fmt.Errorf("%s: logits header: inconsistent vocab %d, ctx %d, first %d, windows %d, rows %d", path, h.Vocab, h.Ctx, h.First, h.Windows, h.Rows)
	}
	want := int64(len(pre)) + hl + int64(h.Rows)*h.rowBytes() + sha256.Size
	if fi.Size() != want {
		what := "truncated"
		if fi.Size() > want {
			what = "has trailing bytes"
		}
		return nil, fmt.Errorf("%s: logits file %s: %d bytes, its header (%d rows of vocab %d) needs %d", path, what, fi.Size(), h.Rows, h.Vocab, want)
	}
	return lf, nil
}

// VocabSize implements Scorer.
func (lf *LogitsFile) VocabSize() int { return lf.Header.Vocab }

// Logits implements Scorer: the next window's rows, in file order. window
// must have the saved ctx and first (the ids are covered by Check).
func (lf *LogitsFile) Logits(window []int32, first int) ([]float32, error) {
	h := &lf.Header
	if len(window) != h.Ctx || first != h.First {
		return nil, fmt.Errorf("%s: window of %d scored from %d; the file has %d from %d", lf.path, len(window), first, h.Ctx, h.First)
	}
	n, V := h.Ctx-1-h.First, h.Vocab
	if lf.rows+n > h.Rows {
		return nil, fmt.Errorf("%s: more windows than the file's %d", lf.path, h.Windows)
	}
	if lf.buf == nil {
		lf.buf = make([]byte, h.rowBytes())
		lf.out = make([]float32, n*V)
	}
	lf.nll, lf.arg = lf.nll[:0], lf.arg[:0]
	for r := 0; r < n; r++ {
		if err := lf.read(lf.buf); err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", lf.path, lf.rows+r, err)
		}
		am := int(binary.LittleEndian.Uint32(lf.buf[8:]))
		if am >= V {
			return nil, fmt.Errorf("%s: row %d: argmax %d outside the vocabulary", lf.path, lf.rows+r, am)
		}
		lf.nll = append(lf.nll, math.Float64frombits(binary.LittleEndian.Uint64(lf.buf)))
		lf.arg = append(lf.arg, am)
		row := lf.out[r*V : (r+1)*V]
		for i := range row {
			row[i] = decodeLogProb(binary.LittleEndian.Uint16(lf.buf[12+2*i:]))
		}
	}
	lf.rows += n
	if lf.rows == h.Rows {
		if err := lf.verify(); err != nil {
			return nil, err
		}
	}
	return lf.out, nil
}

// read fills b from the file and adds it to the checksum.
func (lf *LogitsFile) read(b []byte) error {
	if _, err := io.ReadFull(lf.r, b); err != nil {
		return err
	}
	lf.sum.Write(b)
	return nil
}

// verify checks the trailing checksum once every row has been read.
func (lf *LogitsFile) verify() error {
	want := lf.sum.Sum(nil)
	var got [sha256.Size]byte
	if _, err := io.ReadFull(lf.r, got[:]); err != nil {
		return fmt.Errorf("%s: checksum: %w", lf.path, err)
	}
	if !bytes.Equal(got[:], want) {
		return errors.New(lf.path + ": checksum mismatch: the logits file is corrupt")
	}
	return nil
}

// ExactRows returns the saved NLL and argmax of the rows of the last
// Logits call (those of the unrounded logits).
func (lf *LogitsFile) ExactRows() (nll []float64, argmax []int) { return lf.nll, lf.arg }

// Close closes the file.
func (lf *LogitsFile) Close() error { return lf.f.Close() }
