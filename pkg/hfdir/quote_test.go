package hfdir_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/inerttest"
	"github.com/ninfer/ninfer/pkg/hfdir"
	"github.com/ninfer/ninfer/pkg/safetensors"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// TestOpenErrorsQuoteUntrustedNames feeds tensor names, shard names and
// config values holding terminal escapes, or 100,000 bytes long, through
// Open (and a resource name through Resource).
func TestOpenErrorsQuoteUntrustedNames(t *testing.T) {
	const ctrl = "\x1b[31mred\x07"
	long := strings.Repeat("n", 100_000)
	const ctrlQ, longQ = `"\x1b[31mred\a"`, "(100000 bytes)"
	const shard1, shard2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	sharded := func(o *testmodel.Options) { o.Shards = 2 }
	indexEntry := func(name, shard string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, hfdir.IndexFile), func(m map[string]any) {
				m["weight_map"].(map[string]any)[name] = shard
			})
		}
	}
	inBothShards := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			for _, s := range []string{shard1, shard2} {
				rewrite(t, filepath.Join(dir, s), func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
					return append(ts, safetensors.NamedTensor{Name: name, DType: safetensors.BF16, Shape: []int64{1}, Data: []byte{0, 0}})
				})
			}
		}
	}
	arch := func(a string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, hfdir.ConfigFile), func(m map[string]any) { m["architectures"] = []string{a} })
		}
	}
	// A shard name is a file name (at most 255 bytes), so only the missing
	// shard has a long case; ctrlShard names a real, renamed shard.
	const ctrlShard = ctrl + ".safetensors"
	const ctrlShardQ = `"\x1b[31mred\a.safetensors"`
	renameShard2 := func(t *testing.T, dir string) {
		if err := os.Rename(filepath.Join(dir, shard2), filepath.Join(dir, ctrlShard)); err != nil {
			t.Fatal(err)
		}
		editJSON(t, filepath.Join(dir, hfdir.IndexFile), func(m map[string]any) {
			for k, v := range m["weight_map"].(map[string]any) {
				if v == shard2 {
					m["weight_map"].(map[string]any)[k] = ctrlShard
				}
			}
		})
	}
	notSafetensors := func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, ctrlShard), []byte("this is not a safetensors file"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctrlShardEdit := func(edit func(t *testing.T, dir string)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { renameShard2(t, dir); edit(t, dir) }
	}
	movedToCtrlShard := func(t *testing.T, dir string) {
		editJSON(t, filepath.Join(dir, hfdir.IndexFile), func(m map[string]any) {
			wm := m["weight_map"].(map[string]any)
			for k, v := range wm {
				if v == shard1 {
					wm[k] = ctrlShard
					return
				}
			}
			t.Fatal("no tensor in shard 1")
		})
	}
	inBothCtrlShards := func(t *testing.T, dir string) {
		for _, s := range []string{shard1, ctrlShard} {
			rewrite(t, filepath.Join(dir, s), func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
				return append(ts, safetensors.NamedTensor{Name: "extra.weight", DType: safetensors.BF16, Shape: []int64{1}, Data: []byte{0, 0}})
			})
		}
	}
	unknown := func(names ...string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, hfdir.SingleFile), func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
				for _, n := range names {
					ts = append(ts, safetensors.NamedTensor{Name: n, DType: safetensors.BF16, Shape: []int64{1}, Data: []byte{0, 0}})
				}
				return ts
			})
		}
	}
	// Eight names of 64 runes that each quote to 10 bytes (\U000f0000).
	var wide []string
	for i := 0; i < 8; i++ {
		wide = append(wide, strings.Repeat("\U000f0000", 64)+string(rune('a'+i)))
	}
	eos := func(raw string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, hfdir.GenerationFile), []byte(`{"eos_token_id": `+raw+`}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	longJSON, _ := json.Marshal(long)
	cases := []struct {
		name string
		mut  func(*testmodel.Options)
		edit func(t *testing.T, dir string)
		want string
	}{
		{"ctrl_missing_shard", sharded, indexEntry("model.norm.weight", ctrlShard), ctrlShardQ},
		{"long_missing_shard", sharded, indexEntry("model.norm.weight", long), longQ},
		{"ctrl_shard_not_holding_tensor", sharded, ctrlShardEdit(indexEntry("no.such.tensor", ctrlShard)), ctrlShardQ},
		{"ctrl_shard_index_disagrees", sharded, ctrlShardEdit(movedToCtrlShard), ctrlShardQ},
		{"ctrl_shard_tensor_in_both", sharded, ctrlShardEdit(inBothCtrlShards), ctrlShardQ},
		// safetensors.Open's error names the shard's path (termsafe.Path).
		{"ctrl_shard_not_safetensors", sharded, ctrlShardEdit(notSafetensors), `\x1b[31mred\a.safetensors": header length`},
		{"ctrl_unknown_tensor", nil, unknown(ctrl), ctrlQ},
		{"long_unknown_tensor", nil, unknown(long), longQ},
		{"wide_unknown_tensors", nil, unknown(wide...), "more"},
		{"ctrl_eos_token_id", nil, eos("{\"a\":\r\n" + `"\u001b[31mred\u0007"}`), `\r\n`},
		{"long_eos_token_id", nil, eos(string(longJSON)), "(100002 bytes)"},
		{"ctrl_index_tensor_not_in_shard", sharded, indexEntry(ctrl, shard1), ctrlQ},
		{"long_index_tensor_not_in_shard", sharded, indexEntry(long, shard1), longQ},
		{"ctrl_invalid_shard_name", sharded, indexEntry("model.norm.weight", ctrl+"/x"), `"\x1b[31mred\a/x"`},
		{"long_invalid_shard_name", sharded, indexEntry("model.norm.weight", "../"+long), "(100003 bytes)"},
		{"ctrl_tensor_in_both_shards", sharded, inBothShards(ctrl), ctrlQ},
		{"long_tensor_in_both_shards", sharded, inBothShards(long), longQ},
		{"ctrl_architecture", nil, arch(ctrl), ctrlQ},
		{"long_architecture", nil, arch(long), longQ},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := gen(t, c.mut)
			c.edit(t, dir)
			d, err := hfdir.Open(dir)
			if err == nil {
				d.Close()
			}
			inerttest.CheckError(t, err, c.want)
		})
	}
	d := open(t, gen(t, nil))
	for _, in := range []struct{ name, want string }{{ctrl, ctrlQ}, {long, longQ}} {
		_, err := d.Resource(in.name)
		inerttest.CheckError(t, err, in.want)
	}
}

// TestOpenErrorsQuoteDirectory opens model directories whose own name holds
// terminal escapes: every error line that names the directory (or a file in
// it) shows it through termsafe.Path, escaped.
func TestOpenErrorsQuoteDirectory(t *testing.T) {
	const ctrlDir = "m\x1b[31mred\x07"
	const ctrlDirQ = `m\x1b[31mred\a`
	remove := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	write := func(name, text string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	unreadable := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, name)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil { // reading a directory fails
				t.Fatal(err)
			}
		}
	}
	unknown := func(t *testing.T, dir string) {
		rewrite(t, filepath.Join(dir, hfdir.SingleFile), func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
			return append(ts, safetensors.NamedTensor{Name: "extra.weight", DType: safetensors.BF16, Shape: []int64{1}, Data: []byte{0, 0}})
		})
	}
	sharded := func(o *testmodel.Options) { o.Shards = 2 }
	cases := []struct {
		name string
		mut  func(*testmodel.Options)
		edit func(t *testing.T, dir string)
	}{
		{"no_config", nil, remove(hfdir.ConfigFile)},
		{"config_unreadable", nil, unreadable(hfdir.ConfigFile)},
		{"config_bad", nil, write(hfdir.ConfigFile, `{"architectures": 1}`)},
		{"no_weights", nil, remove(hfdir.SingleFile)},
		{"generation_unparseable", nil, write(hfdir.GenerationFile, "{")},
		{"generation_bad_eos", nil, write(hfdir.GenerationFile, `{"eos_token_id": "x"}`)},
		{"generation_unreadable", nil, unreadable(hfdir.GenerationFile)},
		{"index_unparseable", sharded, write(hfdir.IndexFile, "{")},
		{"index_empty", sharded, write(hfdir.IndexFile, "{}")},
		{"index_unreadable", sharded, unreadable(hfdir.IndexFile)},
		{"missing_shard", sharded, remove("model-00002-of-00002.safetensors")},
		{"unknown_tensor", nil, unknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := gen(t, c.mut)
			dir := filepath.Join(t.TempDir(), ctrlDir)
			if err := os.Rename(src, dir); err != nil {
				t.Fatal(err)
			}
			c.edit(t, dir)
			d, err := hfdir.Open(dir)
			if err == nil {
				d.Close()
			}
			inerttest.CheckError(t, err, ctrlDirQ)
		})
	}
	d := open(t, func() string {
		dir := filepath.Join(t.TempDir(), ctrlDir)
		if err := os.Rename(gen(t, nil), dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}())
	if err := os.Remove(filepath.Join(d.Path, hfdir.TokenizerFile)); err != nil {
		t.Fatal(err)
	}
	_, err := d.Resource(hfdir.TokenizerFile)
	inerttest.CheckError(t, err, ctrlDirQ)
}
