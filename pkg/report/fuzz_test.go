package report

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// FuzzReadFiles fuzzes ninfer-report's input reader (go test ./pkg/report
// -run '^$' -fuzz FuzzReadFiles -fuzztime 10m -parallel 1; make fuzz).

// normalizeDoc turns an aggregated document into what a reader gets back
// after EncodeDocument: every float64 at %.10g, and a nullable double that
// is NaN or ±Inf (a mean or stddev of huge values) as null.
func normalizeDoc(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if e := v.Elem(); e.Kind() == reflect.Float64 && (math.IsNaN(e.Float()) || math.IsInf(e.Float(), 0)) {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		normalizeDoc(v.Elem())
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			normalizeDoc(v.Field(i))
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			normalizeDoc(v.Index(i))
		}
	case reflect.Float64:
		v.SetFloat(benchfmt.Round10(v.Float()))
	}
}

func readStdin(data []byte) (*Input, error) {
	return ReadFiles([]string{"-"}, bytes.NewReader(data))
}

// fuzzReportSeeds: the committed schema-15 document, its stream (whole,
// truncated mid-line, CRLF), a small synthetic stream with a rep-less test
// and gaps, and broken variants.
func fuzzReportSeeds(tb testing.TB) [][]byte {
	seed := seedDoc(tb)
	stream := encodeLines(docLines(&seed, "seed", true))
	syn := encodeLines([]benchfmt.Line{{Type: "run", Run: synthRun(2)},
		repLine(0, "tg", 0, 16, 0, benchfmt.Timings{DecodeSeconds: 2, TotalSeconds: 2}, benchfmt.SpecNone()),
		repLine(0, "tg", 0, 16, 3, benchfmt.Timings{DecodeSeconds: 1e-300, TotalSeconds: 1e300}, benchfmt.SpecNone()),
		repLine(2, "pp", 4, 0, 0, benchfmt.Timings{PrefillSeconds: 0.5, TotalSeconds: 0.5}, benchfmt.SpecNone()),
		endLine(0, "tg16", 10, 11),
		endLine(1, "pp64+tg16", 20, 21),
	})
	return [][]byte{
		seedBytes(tb),
		stream,
		stream[:len(stream)/3],
		bytes.ReplaceAll(stream[:len(stream)/4], []byte("\n"), []byte("\r\n")),
		syn,
		append(append([]byte{}, syn...), "{\"type\":\"progress\"}\n\n{\"type\":\"rep\",\n"...),
		bytes.Replace(syn, []byte(`"label":"tg16"`), []byte(`"label":"x"`), 1),
		[]byte("\n\n"),
	}
}

// FuzzReadFiles feeds arbitrary bytes to ReadFiles as standard input (a
// document or a stream, as ninfer-report decides). Properties: the result
// is deterministic; an error is one line naming the input (<stdin>);
// warnings are one line each; every run read re-encodes to a schema-15
// document that reads back, alone, as one run with no warnings and the same
// content (floats at %.10g); Check runs on each and accounts for every value
// it compares.
func FuzzReadFiles(f *testing.F) {
	for _, s := range fuzzReportSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := readStdin(data)
		in2, err2 := readStdin(data)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !reflect.DeepEqual(in, in2) {
			t.Fatalf("ReadFiles is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, "<stdin>") {
				t.Fatalf("error is not one line naming the input: %q", msg)
			}
			return
		}
		for _, w := range in.Warnings {
			if strings.ContainsAny(w, "\n\r") {
				t.Fatalf("warning is not one line: %q", w)
			}
		}
		for _, r := range in.Runs {
			doc := r.Document
			res := Check(&doc)
			if res.Checked != res.Exact+res.Rounding+len(res.Mismatches) {
				t.Fatalf("Check counts %d values but classifies %d", res.Checked, res.Exact+res.Rounding+len(res.Mismatches))
			}
			enc := benchfmt.EncodeDocument(&doc)
			back, err := readStdin(enc)
			if err != nil {
				t.Fatalf("re-encoded run %q does not read back: %v\n%s", r.RunID, err, enc)
			}
			if len(back.Runs) != 1 || len(back.Warnings) != 0 || back.Runs[0].RunID != "<stdin>" {
				t.Fatalf("re-encoded run %q reads back as %d runs, warnings %q", r.RunID, len(back.Runs), back.Warnings)
			}
			normalizeDoc(reflect.ValueOf(&doc))
			if !reflect.DeepEqual(doc, back.Runs[0].Document) {
				t.Fatalf("run %q changed through its document:\n%s", r.RunID, enc)
			}
		}
	})
}

// TestFuzzSeedsValid: the document, stream and synthetic seeds read as one
// run each.
func TestFuzzSeedsValid(t *testing.T) {
	seeds := fuzzReportSeeds(t)
	for _, i := range []int{0, 1, 2, 4} {
		if in, err := readStdin(seeds[i]); err != nil || len(in.Runs) != 1 {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}
