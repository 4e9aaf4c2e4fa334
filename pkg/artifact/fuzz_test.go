package artifact

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// fuzzEntries is a small plan (one page of payload) for seeding the fuzzer.
var fuzzEntries = []planEntry{
	{id: "frontend/tokenizer.json", component: ComponentFrontend, size: 20},
	{id: "text/layers/0/attention/q_proj", component: ComponentText, f: format.Q8G32, shape: []int64{4, 200}},
	{id: "text/final_norm", component: ComponentText, f: format.BF16, shape: []int64{64}},
	{id: "text/layers/0/gdn/a_log", component: ComponentText, f: format.FP32, shape: []int64{}},
	{id: "text/draft_head", component: ComponentProposal, f: format.Q4G64, shape: []int64{2, 64}},
	{id: "text/draft_head_token_ids", component: ComponentProposal, f: format.Int32, shape: []int64{2}},
	{id: "mtp/norm", component: ComponentMTP, f: format.BF16, shape: []int64{64}},
}

// fuzzSeeds returns valid v3 and v2 files and a few broken variants.
func fuzzSeeds(tb testing.TB) [][]byte {
	p := newPlan(tb, testMeta(), fuzzEntries)
	path := writeArtifact(tb, tb.TempDir(), p, randomPayloads(rand.New(rand.NewPCG(7, 8)), p))
	v3, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	payload := make([]byte, 2048+528)
	for i := range payload {
		payload[i] = byte(i*31 + 1)
	}
	v2 := assembleV2([]byte(v2Directory), payload)
	bad := append([]byte(nil), v3...)
	binary.LittleEndian.PutUint64(bad[8:], 1<<40)
	return [][]byte{v3, v2, v3[:len(v3)-1], v3[:100], bad}
}

func FuzzOpen(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The container rules, then the model binding on what they accept.
		file, err := parse("fuzz.ninfer", bytes.NewReader(data), int64(len(data)), false)
		if err == nil && file.config != nil {
			if berr := file.checkModel(); berr != nil && (!errors.Is(berr, ErrInvalid) || strings.ContainsAny(berr.Error(), "\n\r")) {
				t.Fatalf("binding error is not a one-line ErrInvalid: %q", berr)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") || !strings.HasPrefix(err.Error(), "fuzz.ninfer: ") {
				t.Fatalf("error is not one line naming the file: %q", err)
			}
			return
		}
		checkInvariants(t, file, data)
	})
}

// checkInvariants asserts what Open guarantees about an accepted file.
func checkInvariants(t *testing.T, f *File, data []byte) {
	if f.Version != 2 && f.Version != 3 {
		t.Fatalf("version %d accepted", f.Version)
	}
	if f.PayloadStart%PayloadAlignment != 0 || f.PayloadStart > f.Size || f.PayloadBytes > f.Size-f.PayloadStart {
		t.Fatalf("payload [%d,+%d) outside file of %d bytes", f.PayloadStart, f.PayloadBytes, f.Size)
	}
	if f.Version == 3 {
		if f.Size != f.PayloadStart+f.PayloadBytes {
			t.Fatalf("v3 size %d != %d + %d", f.Size, f.PayloadStart, f.PayloadBytes)
		}
		cfg, err := f.Config()
		if err != nil || cfg.Validate() != nil {
			t.Fatalf("v3 accepted without a valid config: %v", err)
		}
		if _, err := f.PrefillSignature(); err != nil {
			t.Fatal(err)
		}
	}
	var cursor int64
	seen := map[string]bool{}
	for i := range f.Objects {
		o := &f.Objects[i]
		if seen[o.ID] || o.ID == "" {
			t.Fatalf("object id %q empty or duplicated", o.ID)
		}
		seen[o.ID] = true
		if o.Offset < cursor || o.Bytes <= 0 || o.Bytes > f.PayloadBytes-o.Offset {
			t.Fatalf("object %q [%d,+%d) out of order or out of bounds (cursor %d, payload %d)", o.ID, o.Offset, o.Bytes, cursor, f.PayloadBytes)
		}
		cursor = o.End()
		if o.IsTensor() {
			n, err := format.EncodedSize(o.Format, o.Shape)
			if err != nil || n != o.Bytes || o.Offset%format.TensorAlignment != 0 || o.Layout != o.Format.LayoutOf() {
				t.Fatalf("tensor %q accepted with bad geometry", o.ID)
			}
		}
		b, err := f.ReadObject(o)
		if err != nil {
			t.Fatalf("ReadObject %q: %v", o.ID, err)
		}
		start := f.PayloadStart + o.Offset
		if !bytes.Equal(b, data[start:start+o.Bytes]) {
			t.Fatalf("ReadObject %q returned the wrong bytes", o.ID)
		}
	}
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzOpen/seed-* when
// NINFER_WRITE_FUZZ_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("NINFER_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set NINFER_WRITE_FUZZ_SEEDS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFuzzSeedsValid checks that the valid seeds really are accepted, so the
// fuzzer starts from files that reach the deep validation paths.
func TestFuzzSeedsValid(t *testing.T) {
	seeds := fuzzSeeds(t)
	for i, s := range seeds[:2] {
		f, err := parse("seed.ninfer", bytes.NewReader(s), int64(len(s)), false)
		if err != nil {
			t.Fatalf("seed %d rejected: %v", i, err)
		}
		checkInvariants(t, f, s)
	}
}
