package artifact

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// dirEntries lists the names in dir.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestWriterFailuresLeaveNothing(t *testing.T) {
	p := newPlan(t, testMeta(), testEntries)
	objs := p.Objects()
	cases := []struct {
		name string
		run  func(w *Writer, payloads map[string][]byte) error // returns the failing call's error
		want string
	}{
		{"short object", func(w *Writer, pl map[string][]byte) error {
			return w.WriteObject(objs[0].ID, pl[objs[0].ID][:10])
		}, "10 bytes written, planned size is 301"},
		{"long object", func(w *Writer, pl map[string][]byte) error {
			return w.WriteObject(objs[0].ID, append(pl[objs[0].ID], 1))
		}, "302 bytes written, planned size is 301"},
		{"out of order", func(w *Writer, pl map[string][]byte) error {
			return w.WriteObject(objs[1].ID, pl[objs[1].ID])
		}, `object "text/layers/0/attention/q_proj" written out of order: next is "frontend/tokenizer.json"`},
		{"unknown id", func(w *Writer, pl map[string][]byte) error {
			return w.Put("text/nope", []byte{1})
		}, `object "text/nope": not a pending planned object`},
		{"missing objects", func(w *Writer, pl map[string][]byte) error {
			if err := w.WriteObject(objs[0].ID, pl[objs[0].ID]); err != nil {
				return nil
			}
			return w.Close()
		}, `1 of 15 objects written; next is "text/layers/0/attention/q_proj"`},
		{"stream short", func(w *Writer, pl map[string][]byte) error {
			ow, err := w.Begin(objs[0].ID)
			if err != nil {
				return nil
			}
			ow.Write(pl[objs[0].ID][:100])
			return ow.Close()
		}, "100 bytes written, planned size is 301"},
		{"stream open at close", func(w *Writer, pl map[string][]byte) error {
			ow, err := w.Begin(objs[0].ID)
			if err != nil {
				return nil
			}
			ow.Write(pl[objs[0].ID][:100])
			return w.Close()
		}, `object "frontend/tokenizer.json" is still being written`},
		{"aborted", func(w *Writer, pl map[string][]byte) error {
			w.WriteObject(objs[0].ID, pl[objs[0].ID])
			w.Abort()
			return w.WriteObject(objs[1].ID, pl[objs[1].ID])
		}, "writer aborted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := Create(filepath.Join(dir, "model.ninfer"), p)
			if err != nil {
				t.Fatal(err)
			}
			err = tc.run(w, randomPayloads(newRand(t), p))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want substring %q", err, tc.want)
			}
			// The writer stays failed and Close reports the failure.
			if cerr := w.Close(); cerr == nil {
				t.Fatalf("Close after failure succeeded")
			}
			if names := dirEntries(t, dir); len(names) != 0 {
				t.Fatalf("directory not empty after failure: %v", names)
			}
		})
	}
}

func TestCreateRejectsInvalidPlan(t *testing.T) {
	cases := []struct {
		name string
		meta func(*Meta)
		ents []planEntry
		want string
	}{
		{"bad config", func(m *Meta) { m.Config.HiddenSize = 0 }, testEntries, "hidden_size must be positive"},
		{"mtp without config layers", func(m *Meta) { m.Config.MTPNumHiddenLayers = 0 }, testEntries, "num_layers 0 must be positive"},
		{"no objects", func(m *Meta) {}, nil, "plan has no objects"},
		{"draft ids without head", func(m *Meta) {}, []planEntry{
			{id: "text/draft_head_token_ids", component: ComponentProposal, f: format.Int32, shape: []int64{4}},
		}, "rows must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meta := testMeta()
			tc.meta(&meta)
			dir := t.TempDir()
			_, err := Create(filepath.Join(dir, "model.ninfer"), newPlan(t, meta, tc.ents))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want substring %q", err, tc.want)
			}
			if names := dirEntries(t, dir); len(names) != 0 {
				t.Fatalf("files left behind: %v", names)
			}
		})
	}
}

func TestPlanRejects(t *testing.T) {
	p := NewPlan(testMeta())
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"bad shape", p.AddTensor("text/x", ComponentText, format.NVFP4, []int64{100, 64}), "N%128 == 0"},
		{"unknown format", p.AddTensor("text/x", ComponentText, "fp16", []int64{4}), `unknown tensor format "fp16"`},
		{"bad component", p.AddTensor("text/x", "vision", format.BF16, []int64{4}), `unknown component "vision"`},
		{"prefix", p.AddTensor("mtp/x", ComponentText, format.BF16, []int64{4}), "must be named text/..."},
		{"tensor in frontend", p.AddTensor("frontend/x", ComponentFrontend, format.BF16, []int64{4}), "tensors cannot belong"},
		{"resource component", p.AddResource("text/x", ComponentText, 4), "resources must belong"},
		{"empty resource", p.AddResource("frontend/x", ComponentFrontend, 0), "size must be positive"},
	}
	for _, tc := range cases {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want substring %q", tc.name, tc.err, tc.want)
		}
	}
	if err := p.AddTensor("text/x", ComponentText, format.BF16, []int64{4}); err != nil {
		t.Fatal(err)
	}
	if err := p.AddTensor("text/x", ComponentText, format.BF16, []int64{4}); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate id: %v", err)
	}
	if err := p.AddResource("frontend/a", ComponentFrontend, 3); err != nil {
		t.Fatal(err)
	}
	if err := p.AddTensor("text/y", ComponentText, format.BF16, []int64{4}); err != nil {
		t.Fatal(err)
	}
	objs := p.Objects()
	if objs[1].Offset != 8 || objs[2].Offset != 256 || p.PayloadBytes() != 264 {
		t.Fatalf("offsets %d %d, payload %d; want 8 256 264", objs[1].Offset, objs[2].Offset, p.PayloadBytes())
	}
}

// TestPutConcurrent hands objects to Put from many goroutines in reverse
// order and checks the result equals a sequential write.
func TestPutConcurrent(t *testing.T) {
	p := newPlan(t, testMeta(), testEntries)
	payloads := randomPayloads(newRand(t), p)
	seqPath := writeArtifact(t, t.TempDir(), p, payloads)

	dir := t.TempDir()
	path := filepath.Join(dir, "model.ninfer")
	w, err := Create(path, p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	objs := p.Objects()
	var wg sync.WaitGroup
	errs := make(chan error, len(objs))
	for i := len(objs) - 1; i >= 0; i-- {
		wg.Add(1)
		go func(o Object) {
			defer wg.Done()
			if err := w.Put(o.ID, payloads[o.ID]); err != nil {
				errs <- err
			}
		}(objs[i])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Put: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(seqPath)
	b, _ := os.ReadFile(path)
	// Identical except for the random artifact id at [16,32), its record
	// metadata.artifact_id and so the directory digest.
	if len(a) != len(b) || !bytes.Equal(a[:16], b[:16]) || !bytes.Equal(withoutID(t, a), withoutID(t, b)) {
		t.Fatalf("Put-written file differs from the sequential one")
	}
	if bytes.Equal(a[16:32], b[16:32]) {
		t.Fatalf("two artifacts got the same id")
	}
	if names := dirEntries(t, dir); len(names) != 1 || names[0] != "model.ninfer" {
		t.Fatalf("directory holds %v", names)
	}
}

func TestStreamingChunks(t *testing.T) {
	p := newPlan(t, testMeta(), testEntries)
	payloads := randomPayloads(newRand(t), p)
	path := filepath.Join(t.TempDir(), "model.ninfer")
	w, err := Create(path, p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, o := range p.Objects() {
		if w.Next() != o.ID {
			t.Fatalf("Next = %q, want %q", w.Next(), o.ID)
		}
		ow, err := w.Begin(o.ID)
		if err != nil {
			t.Fatal(err)
		}
		data := payloads[o.ID]
		for len(data) > 0 {
			n := min(len(data), 37)
			if _, err := ow.Write(data[:n]); err != nil {
				t.Fatal(err)
			}
			data = data[n:]
		}
		if err := ow.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	f, err := openMapped(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := f.VerifyAll(); err != nil || n != len(testEntries) {
		t.Fatalf("VerifyAll = %d, %v", n, err)
	}
	for i := range f.Objects {
		if !bytes.Equal(f.Bytes(&f.Objects[i]), payloads[f.Objects[i].ID]) {
			t.Fatalf("object %s differs", f.Objects[i].ID)
		}
	}
	// Gaps between objects are zero-filled.
	raw, _ := os.ReadFile(path)
	for i := 1; i < len(f.Objects); i++ {
		gap := raw[f.PayloadStart+f.Objects[i-1].End() : f.PayloadStart+f.Objects[i].Offset]
		if bytes.Count(gap, []byte{0}) != len(gap) {
			t.Fatalf("gap before %s not zero", f.Objects[i].ID)
		}
	}
}

func TestWriteSparse(t *testing.T) {
	p := newPlan(t, testMeta(), testEntries)
	dir := t.TempDir()
	path := filepath.Join(dir, "model.ninfer")
	if err := WriteSparse(path, p); err != nil {
		t.Fatal(err)
	}
	f, err := open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size != f.PayloadStart+p.PayloadBytes() || f.Objects[0].SHA256 != "" {
		t.Fatalf("size %d sha %q", f.Size, f.Objects[0].SHA256)
	}
	if names := dirEntries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v", names)
	}
}

func TestCommitReplacesAndFailsCleanly(t *testing.T) {
	p := newPlan(t, testMeta(), fuzzEntries)
	r := newRand(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "model.ninfer")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := randomPayloads(r, p)
	if got := writeArtifact(t, dir, p, first); got != path {
		t.Fatalf("wrote %s", got)
	}
	f, err := openMapped(path, false)
	if err != nil {
		t.Fatalf("replaced file does not open: %v", err)
	}
	if !bytes.Equal(f.Bytes(&f.Objects[1]), first[f.Objects[1].ID]) {
		t.Fatalf("replaced file has the wrong payload")
	}
	f.Close()

	// A final path that cannot be replaced (a non-empty directory) fails at
	// commit and leaves only that directory behind.
	blocked := filepath.Join(dir, "blocked.ninfer")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := Create(blocked, p)
	if err != nil {
		t.Fatal(err)
	}
	if w.Path() != blocked || !strings.HasPrefix(w.TempPath(), blocked+".tmp-") {
		t.Fatalf("paths %q %q", w.Path(), w.TempPath())
	}
	for _, o := range p.Objects() {
		if err := w.WriteObject(o.ID, first[o.ID]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "commit artifact") {
		t.Fatalf("Close onto a directory: %v", err)
	}
	if names := dirEntries(t, dir); len(names) != 2 {
		t.Fatalf("directory holds %v, want model.ninfer and blocked.ninfer", names)
	}
}

// withoutID returns b[32:] with metadata.artifact_id and the directory
// digest blanked: what two writes of the same plan share.
func withoutID(t *testing.T, b []byte) []byte {
	t.Helper()
	out := append([]byte(nil), b[32:]...)
	js, _ := splitFile(t, b)
	slot, err := digestSlot(js)
	if err != nil || slot < 0 {
		t.Fatalf("no digest: %v", err)
	}
	copy(out[slot:slot+64], zeroHash)
	id := []byte(hex.EncodeToString(b[16:32]))
	if i := bytes.Index(out[:len(js)], id); i < 0 {
		t.Fatal("metadata.artifact_id not in the directory")
	} else {
		copy(out[i:i+32], zeroHash)
	}
	return out
}
