package gpu

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Local is the --gpu value that asks the machine's driver (through
// nvidia-smi) instead of the table.
const Local = "local"

// QueryLocal returns the name and total memory of device index dev as the
// NVIDIA driver reports them (nvidia-smi memory.total, MiB).
func QueryLocal(dev int) (Card, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=index,name,memory.total",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		return Card{}, fmt.Errorf("cannot query the local GPU with nvidia-smi (no NVIDIA driver here?): %w", err)
	}
	return parseSMI(out, dev)
}

// parseSMI parses "index, name, memory.total[MiB]" CSV lines.
func parseSMI(out []byte, dev int) (Card, error) {
	var seen []string
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		f := strings.Split(string(line), ",")
		if len(f) < 3 {
			continue
		}
		idx, err1 := strconv.Atoi(strings.TrimSpace(f[0]))
		mib, err2 := strconv.ParseInt(strings.TrimSpace(f[len(f)-1]), 10, 64)
		name := strings.TrimSpace(strings.Join(f[1:len(f)-1], ","))
		if err1 != nil || err2 != nil || mib <= 0 {
			return Card{}, fmt.Errorf("nvidia-smi: unexpected line %q", line)
		}
		seen = append(seen, strconv.Itoa(idx))
		if idx == dev {
			return Card{Name: name, MemoryBytes: mib * MiB, Source: SourceNvidiaSMI}, nil
		}
	}
	return Card{}, fmt.Errorf("nvidia-smi reports no device %d (devices: %s)", dev, strings.Join(seen, ", "))
}
