package gpu

import (
	"strings"
	"testing"
)

func TestParseSMI(t *testing.T) {
	out := []byte("0, NVIDIA H200, 143771\n1, NVIDIA GeForce RTX 4090, 24564\n")
	cases := []struct {
		dev     int
		name    string
		bytes   int64
		wantErr string
	}{
		{0, "NVIDIA H200", 143771 * MiB, ""},
		{1, "NVIDIA GeForce RTX 4090", 24564 * MiB, ""},
		{2, "", 0, "no device 2 (devices: 0, 1)"},
	}
	for _, c := range cases {
		card, err := parseSMI(out, c.dev)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("dev %d: err = %v, want %q", c.dev, err, c.wantErr)
			}
			continue
		}
		if err != nil || card.Name != c.name || card.MemoryBytes != c.bytes {
			t.Errorf("dev %d: %+v, %v", c.dev, card, err)
		}
	}
	if _, err := parseSMI([]byte("0, X, lots\n"), 0); err == nil {
		t.Error("a malformed line was accepted")
	}
}
