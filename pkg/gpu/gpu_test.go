package gpu

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		in    string
		name  string
		bytes int64
	}{
		{"h200", "NVIDIA H200", 143771 << 20},
		{"H200", "NVIDIA H200", 143771 << 20},
		{"NVIDIA H200", "NVIDIA H200", 143771 << 20},
		{"rtx-4090", "NVIDIA GeForce RTX 4090", 24564 << 20},
		{"4090", "NVIDIA GeForce RTX 4090", 24564 << 20},
		{"RTX 4090", "NVIDIA GeForce RTX 4090", 24564 << 20},
		{"NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090", 24564 << 20},
		{"rtx_5090", "NVIDIA GeForce RTX 5090", 32607 << 20},
		{"h100", "NVIDIA H100 80GB HBM3", 81559 << 20},
		{"H100-PCIe", "NVIDIA H100 PCIe", 81559 << 20},
		{"a100-80gb", "NVIDIA A100-SXM4-80GB", 81920 << 20},
		{"A100", "NVIDIA A100-SXM4-40GB", 40960 << 20},
		{"l40s", "NVIDIA L40S", 46068 << 20},
		{"rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell", 97887 << 20},
		{"NVIDIA RTX PRO 4000 Blackwell", "NVIDIA RTX PRO 4000 Blackwell", 24 << 30},
	}
	for _, tc := range tests {
		c, err := Lookup(tc.in)
		if err != nil {
			t.Errorf("Lookup(%q): %v", tc.in, err)
			continue
		}
		if c.Name != tc.name || c.MemoryBytes != tc.bytes {
			t.Errorf("Lookup(%q) = %s %d, want %s %d", tc.in, c.Name, c.MemoryBytes, tc.name, tc.bytes)
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, in := range []string{"", "h300", "rtx", "nvidia"} {
		_, err := Lookup(in)
		if err == nil {
			t.Errorf("Lookup(%q) succeeded, want error", in)
			continue
		}
		if !strings.Contains(err.Error(), "h200") {
			t.Errorf("Lookup(%q) error %q does not list the known names", in, err)
		}
	}
}

// TestUniqueKeys checks that no two cards share a lookup key.
func TestUniqueKeys(t *testing.T) {
	seen := map[string]string{}
	for _, c := range Cards {
		if c.MemoryBytes <= 0 || c.Source == "" || len(c.Aliases) == 0 {
			t.Errorf("card %s is incomplete", c.Name)
		}
		for _, k := range append([]string{c.Name}, c.Aliases...) {
			n := normalize(k)
			if prev, ok := seen[n]; ok && prev != c.Name {
				t.Errorf("key %q is used by %s and %s", n, prev, c.Name)
			}
			seen[n] = c.Name
		}
	}
}

// TestSeedCardFits checks the RTX PRO 4000 total against the seed bench
// report: 17,487,992,064 B of weights plus 7,420,313,600 B measured free
// after them must fit inside the card's total.
func TestSeedCardFits(t *testing.T) {
	c, err := Lookup("rtx-pro-4000")
	if err != nil {
		t.Fatal(err)
	}
	if need := int64(17487992064 + 7420313600); c.MemoryBytes < need {
		t.Errorf("%s total %d < %d seen in use/free by the seed report", c.Name, c.MemoryBytes, need)
	}
}
