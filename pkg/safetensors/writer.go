package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// NamedTensor is one tensor to write.
type NamedTensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// Encode returns the safetensors image of tensors (data in the given order)
// and metadata. The header is padded with spaces so that the data buffer
// starts at a multiple of 8 bytes.
func Encode(tensors []NamedTensor, metadata map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	if err := encode(&buf, tensors, metadata); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write writes a safetensors file atomically: it writes a temporary file in
// the destination directory, syncs it and renames it over path.
func Write(path string, tensors []NamedTensor, metadata map[string]string) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err = encode(w, tensors, metadata); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = w.Flush(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	return nil
}

type byteWriter interface {
	Write([]byte) (int, error)
}

func encode(w byteWriter, tensors []NamedTensor, metadata map[string]string) error {
	hdr, err := Header(tensors, metadata)
	if err != nil {
		return err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// Header builds the padded JSON header for tensors laid out back to back in
// the given order. Keys: "__metadata__" first (when non-empty), then tensors
// in order. It validates names, dtypes and data sizes.
func Header(tensors []NamedTensor, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			b.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sep()
		b.WriteString(`"` + metadataKey + `":{`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, metadata[k])
		}
		b.WriteByte('}')
	}
	seen := make(map[string]bool, len(tensors))
	var off int64
	for _, t := range tensors {
		if t.Name == "" || t.Name == metadataKey || !utf8.ValidString(t.Name) {
			return nil, fmt.Errorf("invalid tensor name %s", termsafe.Quote(t.Name))
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("duplicate tensor name %s", termsafe.Quote(t.Name))
		}
		seen[t.Name] = true
		size, err := ByteSize(t.DType, t.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", termsafe.Quote(t.Name), err)
		}
		if int64(len(t.Data)) != size {
			return nil, fmt.Errorf("tensor %s: %s %v needs %d bytes, have %d", termsafe.Quote(t.Name), t.DType, t.Shape, size, len(t.Data))
		}
		sep()
		writeJSONString(&b, t.Name)
		b.WriteString(`:{"dtype":`)
		writeJSONString(&b, string(t.DType))
		b.WriteString(`,"shape":[`)
		for i, s := range t.Shape {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(s, 10))
		}
		b.WriteString(`],"data_offsets":[`)
		b.WriteString(strconv.FormatInt(off, 10))
		b.WriteByte(',')
		off += size
		b.WriteString(strconv.FormatInt(off, 10))
		b.WriteString(`]}`)
	}
	b.WriteByte('}')
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("header of %d bytes exceeds the %d-byte limit", b.Len(), MaxHeaderSize)
	}
	return b.Bytes(), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always marshals
	b.Write(enc)
}
