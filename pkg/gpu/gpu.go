// Package gpu is a small table of known accelerator cards and their total
// device memory, used by ninfer-plan --gpu for offline memory planning.
//
// Totals are nominal. Where a card's nvidia-smi "memory.total" figure is
// publicly reported, the table stores that MiB value (Source "nvidia-smi",
// recalled from published nvidia-smi output, not measured by ninfer).
// Otherwise it stores the marketed capacity read as binary GiB (Source
// "nominal"): GPU memory chips are binary-sized, and the seed bench report
// shows an RTX PRO 4000 Blackwell ("24 GB") with more than 24×1e9 bytes
// free after its CUDA context, so GB×1e9 would under-state it. The free
// memory a process sees after the CUDA context is created is smaller than
// either; pkg/plan subtracts a fixed runtime overhead for that.
package gpu

import (
	"fmt"
	"sort"
	"strings"
)

// MiB and GiB are the two units the table is written in.
const (
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

// Source tells where a card's memory total comes from.
type Source string

// Sources of memory totals.
const (
	SourceNvidiaSMI Source = "nvidia-smi" // MiB as nvidia-smi memory.total reports it
	SourceNominal   Source = "nominal"    // marketed "N GB" read as N GiB
)

// Card is one known accelerator.
type Card struct {
	Name        string   // canonical name, as cudaDeviceProp.name reports it where known
	Aliases     []string // extra lookup keys (lowercase, any separator)
	MemoryBytes int64    // total device memory in bytes
	Source      Source
	Arch        string // compute capability, e.g. "sm_90"
}

// Cards lists the known accelerators in a stable order.
var Cards = []Card{
	{"NVIDIA H200", []string{"h200", "h200-sxm", "h200-141gb"}, 143771 * MiB, SourceNvidiaSMI, "sm_90"},
	{"NVIDIA H100 80GB HBM3", []string{"h100", "h100-sxm", "h100-80gb", "h100-sxm-80gb"}, 81559 * MiB, SourceNvidiaSMI, "sm_90"},
	{"NVIDIA H100 PCIe", []string{"h100-pcie", "h100-pcie-80gb"}, 81559 * MiB, SourceNvidiaSMI, "sm_90"},
	{"NVIDIA A100-SXM4-80GB", []string{"a100-80gb", "a100-80g", "a100-sxm4-80gb", "a100-80"}, 81920 * MiB, SourceNvidiaSMI, "sm_80"},
	{"NVIDIA A100-SXM4-40GB", []string{"a100", "a100-40gb", "a100-40g", "a100-sxm4-40gb", "a100-40"}, 40960 * MiB, SourceNvidiaSMI, "sm_80"},
	{"NVIDIA L40S", []string{"l40s"}, 46068 * MiB, SourceNvidiaSMI, "sm_89"},
	{"NVIDIA GeForce RTX 4090", []string{"rtx-4090", "rtx4090", "4090"}, 24564 * MiB, SourceNvidiaSMI, "sm_89"},
	{"NVIDIA GeForce RTX 5090", []string{"rtx-5090", "rtx5090", "5090"}, 32607 * MiB, SourceNvidiaSMI, "sm_120"},
	{"NVIDIA RTX PRO 6000 Blackwell", []string{"rtx-pro-6000", "rtx-pro-6000-blackwell", "pro-6000", "pro6000"}, 97887 * MiB, SourceNvidiaSMI, "sm_120"},
	{"NVIDIA RTX PRO 4000 Blackwell", []string{"rtx-pro-4000", "rtx-pro-4000-blackwell", "pro-4000", "pro4000"}, 24 * GiB, SourceNominal, "sm_120"},
}

// normalize lowercases s and maps every run of spaces, '_' and '-' to a
// single '-', dropping a leading "nvidia" and "geforce".
func normalize(s string) string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == ' ' || r == '_' || r == '-' })
	for len(f) > 0 && (f[0] == "nvidia" || f[0] == "geforce") {
		f = f[1:]
	}
	return strings.Join(f, "-")
}

// Lookup finds a card by its name or an alias, case-insensitively and
// ignoring the separators ' ', '_' and '-' ("h200", "RTX 4090", "4090",
// "NVIDIA GeForce RTX 4090" all work).
func Lookup(name string) (Card, error) {
	key := normalize(name)
	if key == "" {
		return Card{}, fmt.Errorf("empty GPU name (known: %s)", strings.Join(Names(), ", "))
	}
	for _, c := range Cards {
		if normalize(c.Name) == key {
			return c, nil
		}
		for _, a := range c.Aliases {
			if normalize(a) == key {
				return c, nil
			}
		}
	}
	return Card{}, fmt.Errorf("unknown GPU %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names returns the first alias of every card, sorted, for help and errors.
func Names() []string {
	out := make([]string, 0, len(Cards))
	for _, c := range Cards {
		out = append(out, c.Aliases[0])
	}
	sort.Strings(out)
	return out
}
