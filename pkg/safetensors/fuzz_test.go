package safetensors

import (
	"bytes"
	"reflect"
	"testing"
)

func FuzzOpen(f *testing.F) {
	f.Add(image(`{}`, 0))
	f.Add(image(`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, 12))
	f.Add(image(`{"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[0],"data_offsets":[1,1]}}  `, 3))
	f.Add(image(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}`, 8))
	f.Fuzz(func(t *testing.T, buf []byte) {
		h, err := parse(buf)
		if err != nil {
			return
		}
		file, err := FromBytes("fuzz", buf)
		if err != nil {
			t.Fatalf("parse accepted but FromBytes failed: %v", err)
		}
		dataLen := int64(len(buf)) - h.dataStart
		var named []NamedTensor
		for i, ti := range file.Tensors() {
			if i > 0 && file.Tensors()[i-1].Name >= ti.Name {
				t.Fatalf("tensors not sorted: %q then %q", file.Tensors()[i-1].Name, ti.Name)
			}
			if ti.Begin < 0 || ti.End > dataLen || ti.Begin > ti.End {
				t.Fatalf("%q: range [%d,%d] outside [0,%d]", ti.Name, ti.Begin, ti.End, dataLen)
			}
			size, err := ByteSize(ti.DType, ti.Shape)
			if err != nil || size != ti.Size() {
				t.Fatalf("%q: size %d vs %d (%v)", ti.Name, size, ti.Size(), err)
			}
			d := file.Data(ti.Name)
			if int64(len(d)) != size {
				t.Fatalf("%q: Data has %d bytes, want %d", ti.Name, len(d), size)
			}
			named = append(named, NamedTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: d})
		}
		// Whatever we accept re-encodes to an image that parses to the same tensors.
		img, err := Encode(named, file.Metadata())
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := FromBytes("re-encoded", img)
		if err != nil {
			t.Fatalf("re-encoded image rejected: %v", err)
		}
		if len(again.Tensors()) != len(named) {
			t.Fatalf("re-encoded %d tensors, want %d", len(again.Tensors()), len(named))
		}
		for i, ti := range again.Tensors() {
			want := named[i]
			if ti.Name != want.Name || ti.DType != want.DType || !reflect.DeepEqual(ti.Shape, want.Shape) || !bytes.Equal(again.Data(ti.Name), want.Data) {
				t.Fatalf("re-encoded tensor %d differs: %+v vs %q %s %v", i, ti, want.Name, want.DType, want.Shape)
			}
		}
		if len(file.Metadata()) > 0 && !reflect.DeepEqual(again.Metadata(), file.Metadata()) {
			t.Fatalf("metadata differs after re-encode")
		}
	})
}
