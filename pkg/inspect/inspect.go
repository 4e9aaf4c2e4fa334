// Package inspect summarises a .ninfer artifact for people (a summary and an
// object table) and machines (JSON), and verifies payloads: SHA-256 hashes
// and per-format value validity.
package inspect

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/progress"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Summary is the machine-readable description of an artifact.
type Summary struct {
	Path             string           `json:"path"`
	FileSizeBytes    int64            `json:"file_size_bytes"`
	ContainerVersion int              `json:"container_version"`
	ArtifactID       string           `json:"artifact_id,omitempty"`
	Architecture     string           `json:"architecture,omitempty"`
	Name             string           `json:"name,omitempty"`
	ModelID          string           `json:"model_id,omitempty"`   // v2 identity
	WeightsID        string           `json:"weights_id,omitempty"` // v2 identity
	Recipe           string           `json:"recipe,omitempty"`
	Config           *qwen35.Config   `json:"config,omitempty"`
	Components       []string         `json:"components"`
	Formats          []string         `json:"formats"`
	ObjectCount      int              `json:"object_count"`
	TensorCount      int              `json:"tensor_count"`
	ResourceCount    int              `json:"resource_count"`
	PayloadBytes     int64            `json:"payload_bytes"`
	BytesByComponent map[string]int64 `json:"bytes_by_component"`
	BytesByFormat    map[string]int64 `json:"bytes_by_format"`
	PrefillSignature string           `json:"prefill_signature,omitempty"`
	// DirectorySHA256 is the checked directory digest; empty when the
	// artifact records none (then nothing covers the directory).
	DirectorySHA256 string `json:"directory_sha256,omitempty"`
	// ConfigDefaults maps each config field that config.json left out to
	// the transformers default the converter used: {} when there were none,
	// null when the artifact does not record them (older converter, v2).
	ConfigDefaults map[string]any `json:"config_defaults"`
	Objects        []ObjectRow    `json:"objects"`
}

// ObjectRow is one row of the object table.
type ObjectRow struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	Component string  `json:"component"`
	Shape     []int64 `json:"shape,omitempty"`
	Format    string  `json:"format,omitempty"`
	Layout    string  `json:"layout,omitempty"`
	Offset    int64   `json:"offset"`
	Bytes     int64   `json:"bytes"`
	SHA256    string  `json:"sha256,omitempty"`
}

// Summarize describes f. It reads only the header and directory.
func Summarize(f *artifact.File) (Summary, error) {
	s := Summary{
		Path: f.Path, FileSizeBytes: f.Size, ContainerVersion: f.Version,
		Architecture: f.Architecture, Name: f.Name, Formats: f.Formats(),
		ObjectCount: len(f.Objects), PayloadBytes: f.TotalObjectBytes(),
		BytesByComponent: f.BytesByComponent(), BytesByFormat: map[string]int64{},
	}
	if s.Formats == nil {
		s.Formats = []string{}
	}
	if f.Version >= 3 {
		s.ArtifactID = hex.EncodeToString(f.ID[:])
		cfg, err := f.Config()
		if err != nil {
			return Summary{}, err
		}
		s.Config = &cfg
		sig, err := f.PrefillSignature()
		if err != nil {
			return Summary{}, err
		}
		s.PrefillSignature = sig
		s.DirectorySHA256 = f.DirectorySHA256
		if d, ok := f.ConfigDefaults(); ok {
			s.ConfigDefaults = d
		}
	}
	if f.Identity != nil {
		s.ModelID, s.WeightsID = f.Identity.ModelID, f.Identity.WeightsID
	}
	if r, ok := f.Metadata["recipe"].(string); ok {
		s.Recipe = r
	}
	for k, v := range f.BytesByFormat() {
		s.BytesByFormat[string(k)] = v
	}
	for c := range s.BytesByComponent {
		s.Components = append(s.Components, c)
	}
	sort.Strings(s.Components)
	for i := range f.Objects {
		o := &f.Objects[i]
		row := ObjectRow{ID: o.ID, Kind: o.Kind, Component: o.Component, Offset: o.Offset, Bytes: o.Bytes, SHA256: o.SHA256}
		if o.IsTensor() {
			s.TensorCount++
			row.Shape, row.Format, row.Layout = o.Shape, string(o.Format), string(o.Layout)
			if row.Shape == nil {
				row.Shape = []int64{}
			}
		} else {
			s.ResourceCount++
			row.Format, row.Layout = "", o.Encoding
		}
		s.Objects = append(s.Objects, row)
	}
	return s, nil
}

// WriteJSON writes s (a Summary, possibly embedded) as indented JSON.
func WriteJSON(w io.Writer, s any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteText writes the readable summary followed by the object table.
func WriteText(w io.Writer, s Summary, objects bool) error {
	kv := [][2]string{
		{"file", s.Path},
		{"size", fmt.Sprintf("%s bytes (%s)", group(s.FileSizeBytes), progress.Bytes(s.FileSizeBytes))},
		{"container", "v" + strconv.Itoa(s.ContainerVersion)},
	}
	if s.ArtifactID != "" {
		kv = append(kv, [2]string{"artifact id", s.ArtifactID})
	}
	if s.ModelID != "" {
		kv = append(kv, [2]string{"identity", s.ModelID + " / " + s.WeightsID})
	}
	if s.Architecture != "" {
		kv = append(kv, [2]string{"architecture", s.Architecture}, [2]string{"name", s.Name})
	}
	if s.Recipe != "" {
		kv = append(kv, [2]string{"recipe", s.Recipe})
	}
	if c := s.Config; c != nil {
		kv = append(kv,
			[2]string{"layers", fmt.Sprintf("%d (%d full attention, %d gated deltanet), mtp %d", c.NumHiddenLayers, len(c.FullLayers()), len(c.LinearLayers()), c.MTPNumHiddenLayers)},
			[2]string{"dims", fmt.Sprintf("hidden %d, intermediate %d, vocab %d, tied %t", c.HiddenSize, c.IntermediateSize, c.VocabSize, c.TieWordEmbeddings)},
			[2]string{"attention", fmt.Sprintf("%d heads, %d kv heads, head_dim %d, rotary %d, rope θ %g", c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RotaryDim(), c.RopeTheta)},
			[2]string{"deltanet", fmt.Sprintf("%d key heads × %d, %d value heads × %d, conv %d", c.LinearNumKeyHeads, c.LinearKeyHeadDim, c.LinearNumValueHeads, c.LinearValueHeadDim, c.LinearConvKernelDim)},
		)
	}
	kv = append(kv,
		[2]string{"formats", fmt.Sprint(s.Formats)},
		[2]string{"objects", fmt.Sprintf("%d (%d tensors, %d resources)", s.ObjectCount, s.TensorCount, s.ResourceCount)},
	)
	for _, c := range s.Components {
		kv = append(kv, [2]string{"bytes " + c, fmt.Sprintf("%s (%s)", group(s.BytesByComponent[c]), progress.Bytes(s.BytesByComponent[c]))})
	}
	fmts := make([]string, 0, len(s.BytesByFormat))
	for f := range s.BytesByFormat {
		fmts = append(fmts, f)
	}
	sort.Strings(fmts)
	for _, f := range fmts {
		kv = append(kv, [2]string{"bytes " + f, fmt.Sprintf("%s (%s)", group(s.BytesByFormat[f]), progress.Bytes(s.BytesByFormat[f]))})
	}
	if s.PrefillSignature != "" {
		kv = append(kv, [2]string{"prefill_signature", s.PrefillSignature})
	}
	if s.ContainerVersion >= 3 {
		kv = append(kv, [2]string{"config defaults", defaultsLine(s.ConfigDefaults)})
		d := s.DirectorySHA256
		if d == "" {
			d = "none: written before ninfer recorded it; nothing covers the directory"
		}
		kv = append(kv, [2]string{"directory sha256", d})
	}
	for _, p := range kv {
		// The name, path and recipe come from the file: shown inert.
		if _, err := fmt.Fprintf(w, "%-18s %s\n", p[0]+":", termsafe.Escape(p[1])); err != nil {
			return err
		}
	}
	if !objects {
		return nil
	}
	fmt.Fprintln(w)
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Borders: tw.BorderNone, Settings: tw.Settings{Separators: tw.Separators{BetweenColumns: tw.On}, Lines: tw.Lines{ShowHeaderLine: tw.On}}})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
	)
	t.Header("name", "kind", "shape", "format", "layout", "offset", "bytes")
	for _, o := range s.Objects {
		shape := ""
		if o.Kind == artifact.KindTensor {
			shape = artifact.ShapeString(o.Shape)
		}
		if err := t.Append(termsafe.Escape(o.ID), termsafe.Escape(o.Kind), shape, termsafe.Escape(o.Format), termsafe.Escape(o.Layout), strconv.FormatInt(o.Offset, 10), strconv.FormatInt(o.Bytes, 10)); err != nil {
			return err
		}
	}
	return t.Render()
}

// defaultsLine renders recorded config defaults for the text summary.
func defaultsLine(m map[string]any) string {
	if m == nil {
		return "not recorded (converted before ninfer-convert recorded them)"
	}
	if len(m) == 0 {
		return "none (config.json gave every field)"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ds := make([]qwen35.Default, len(keys))
	for i, k := range keys {
		v := m[k]
		if list, ok := v.([]any); ok {
			strs := make([]string, len(list))
			for j, e := range list {
				strs[j] = fmt.Sprint(e)
			}
			v = strs
		}
		ds[i] = qwen35.Default{Field: k, Value: v}
	}
	return qwen35.FormatDefaults(ds) + " (left out of config.json: transformers defaults)"
}

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	Objects        int `json:"objects"`
	HashesChecked  int `json:"hashes_checked"`
	TensorsChecked int `json:"tensors_checked"`
	// DirectoryChecked: the directory digest (metadata.directory_sha256)
	// matched when the file was opened, so the hashes above cover the
	// directory too; false for an artifact that records none.
	DirectoryChecked bool `json:"directory_checked"`
	// ArtifactIDChecked: the header's artifact_id equals the directory's
	// metadata.artifact_id (so the digest covers it too); false for an
	// artifact written before the id was recorded there.
	ArtifactIDChecked bool `json:"artifact_id_checked"`
}

// Verify re-hashes every object that records a SHA-256 and checks every
// tensor's values (finite floats, legal scales and codes). f must be mapped.
// It stops at the first problem, naming the object. The directory itself
// (digest, config against tensors) was checked when f was opened; the
// report says whether a digest covered it.
func Verify(f *artifact.File) (VerifyReport, error) {
	r := VerifyReport{Objects: len(f.Objects), DirectoryChecked: f.DirectorySHA256 != "", ArtifactIDChecked: f.ArtifactIDChecked}
	for i := range f.Objects {
		o := &f.Objects[i]
		ok, err := f.Verify(o)
		if err != nil {
			return r, err
		}
		if ok {
			r.HashesChecked++
		}
		if !o.IsTensor() {
			continue
		}
		data, err := f.ReadObject(o)
		if err != nil {
			return r, err
		}
		if err := format.Validate(o.Format, o.Shape, data); err != nil {
			return r, fmt.Errorf("%s: object %q: %w", f.Path, o.ID, err)
		}
		r.TensorsChecked++
	}
	if f.Version >= 3 {
		if err := verifyFrontend(f); err != nil {
			return r, err
		}
		if err := verifyDraftIDs(f); err != nil {
			return r, err
		}
	}
	return r, nil
}

// VerifyFile maps the artifact at path and runs Verify on it: what
// ninfer-inspect --verify, ninfer-run --verify and ninfer-bench --verify
// check.
func VerifyFile(path string) (VerifyReport, error) {
	f, err := artifact.OpenMapped(path)
	if err != nil {
		return VerifyReport{}, err
	}
	defer f.Close()
	return Verify(f)
}

// VerifySummary is the one-line outcome of a verification (the tools
// prefix their name): "verified PATH: directory sha256, N objects, ...";
// it says when the directory is not covered (an artifact without
// metadata.directory_sha256).
func VerifySummary(path string, vr VerifyReport) string {
	path = termsafe.Path(path) // a status line: the path cannot drive the terminal
	counts := fmt.Sprintf("%d objects, %d hashes, %d tensors valid", vr.Objects, vr.HashesChecked, vr.TensorsChecked)
	if vr.DirectoryChecked && vr.ArtifactIDChecked {
		return fmt.Sprintf("verified %s: directory sha256, %s", path, counts)
	}
	if vr.DirectoryChecked {
		return fmt.Sprintf("verified %s: directory sha256, %s; the header's artifact_id is NOT covered (no metadata.artifact_id: written before ninfer recorded one; convert again to cover it)", path, counts)
	}
	return fmt.Sprintf("verified %s: %s; the directory is NOT covered (no metadata.directory_sha256: written before ninfer recorded one; convert again to cover it)", path, counts)
}

// group formats n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
