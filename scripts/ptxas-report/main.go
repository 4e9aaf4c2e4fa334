// Command ptxas-report reads the `ptxas -v` output of the CUDA kernel build
// (make cuda-kernels writes one log per source and target under
// build/cuda/obj/) and prints one table row per kernel entry and target:
// registers, shared memory, stack frame and spills. It exits 1 when any
// kernel spills registers or uses local memory (a stack frame), so CI fails
// on it, and 2 on usage errors.
//
//	go run ./scripts/ptxas-report build/cuda/obj/*.ptxas.log
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
)

// Kernel is the resource use of one entry function on one target.
type Kernel struct {
	Name, Arch                     string
	Registers, Barriers, Smem      int
	Stack, SpillStores, SpillLoads int
	Source                         string
}

var (
	reEntry = regexp.MustCompile(`Compiling entry function '([^']+)' for '([^']+)'`)
	reProps = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reUsed  = regexp.MustCompile(`Used (\d+) registers`)
	reBar   = regexp.MustCompile(`used (\d+) barriers`)
	reSmem  = regexp.MustCompile(`(\d+) bytes smem`)
)

// Parse reads ptxas -v output. Entries are attributed by the "Compiling
// entry function" line that precedes their properties and usage lines.
func Parse(r io.Reader, source string) ([]Kernel, error) {
	var out []Kernel
	var cur *Kernel
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := reEntry.FindStringSubmatch(line); m != nil {
			out = append(out, Kernel{Name: m[1], Arch: m[2], Source: source})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if m := reProps.FindStringSubmatch(line); m != nil {
			cur.Stack, _ = strconv.Atoi(m[1])
			cur.SpillStores, _ = strconv.Atoi(m[2])
			cur.SpillLoads, _ = strconv.Atoi(m[3])
		}
		if m := reUsed.FindStringSubmatch(line); m != nil {
			cur.Registers, _ = strconv.Atoi(m[1])
			if b := reBar.FindStringSubmatch(line); b != nil {
				cur.Barriers, _ = strconv.Atoi(b[1])
			}
			if s := reSmem.FindStringSubmatch(line); s != nil {
				cur.Smem, _ = strconv.Atoi(s[1])
			}
			cur = nil // usage closes the entry
		}
	}
	return out, sc.Err()
}

// Bad reports whether a kernel spills or uses local memory.
func (k Kernel) Bad() bool { return k.Stack > 0 || k.SpillStores > 0 || k.SpillLoads > 0 }

func demangle(names []string) map[string]string {
	out := map[string]string{}
	cmd := exec.Command("c++filt")
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	b, err := cmd.Output()
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i, n := range names {
		out[n] = n
		if err == nil && len(lines) == len(names) {
			out[n] = shorten(lines[i])
		}
	}
	return out
}

// shorten drops the parameter list of a demangled name.
func shorten(s string) string {
	depth := 0
	for i, c := range s {
		switch c {
		case '<':
			depth++
		case '>':
			depth--
		case '(':
			if depth == 0 {
				return s[:i]
			}
		}
	}
	return s
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ptxas-report LOG...  (logs of nvcc -Xptxas -v)")
		os.Exit(2)
	}
	var all []Kernel
	for _, p := range os.Args[1:] {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ptxas-report: %v\n", err)
			os.Exit(1)
		}
		ks, err := Parse(f, strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".ptxas.log"))
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "ptxas-report: %s: %v\n", p, err)
			os.Exit(1)
		}
		all = append(all, ks...)
	}
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "ptxas-report: no kernel entries found (was nvcc run with -Xptxas -v?)")
		os.Exit(1)
	}
	var names []string
	for _, k := range all {
		names = append(names, k.Name)
	}
	pretty := demangle(names)
	sort.SliceStable(all, func(i, j int) bool {
		if pretty[all[i].Name] != pretty[all[j].Name] {
			return pretty[all[i].Name] < pretty[all[j].Name]
		}
		return all[i].Arch < all[j].Arch
	})
	tw := tablewriter.NewWriter(os.Stdout)
	tw.Header("kernel", "arch", "regs", "smem B", "barriers", "stack B", "spill st B", "spill ld B")
	bad := 0
	for _, k := range all {
		mark := ""
		if k.Bad() {
			bad++
			mark = " ← SPILL/LOCAL"
		}
		tw.Append(pretty[k.Name]+mark, k.Arch, strconv.Itoa(k.Registers), strconv.Itoa(k.Smem), strconv.Itoa(k.Barriers),
			strconv.Itoa(k.Stack), strconv.Itoa(k.SpillStores), strconv.Itoa(k.SpillLoads))
	}
	tw.Render()
	fmt.Printf("%d kernel entries × targets, %d with spills or local memory\n", len(all), bad)
	if bad > 0 {
		os.Exit(1)
	}
}
