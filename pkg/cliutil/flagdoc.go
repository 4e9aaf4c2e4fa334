package cliutil

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// FlagTableMarker starts the flag table of docs/CLI.md: the markdown table
// after it has one row per flag, "| `--name`, `-x` | tool, tool | ... |",
// and every tool's test checks that the rows naming it list exactly its
// flags (CheckFlagDoc).
const FlagTableMarker = "<!-- flag table: every flag of every tool; checked by each tool's TestFlagsDocumented -->"

// FlagNames returns every spelling of flags, names and aliases without
// dashes, hidden flags included, plus "help" and "h" when help is on (the
// flag urfave/cli adds unless HideHelp), sorted.
func FlagNames(flags []cli.Flag, help bool) []string {
	var out []string
	for _, f := range flags {
		out = append(out, f.Names()...)
	}
	if help {
		out = append(out, "help", "h")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ParseFlagTable reads the flag table of a CLI.md document: for each tool
// named in the rows' second column, the flag spellings (without dashes) of
// the rows that name it, sorted.
func ParseFlagTable(doc []byte) (map[string][]string, error) {
	i := bytes.Index(doc, []byte(FlagTableMarker))
	if i < 0 {
		return nil, fmt.Errorf("no flag table (the line %q is missing)", FlagTableMarker)
	}
	sc := bufio.NewScanner(bytes.NewReader(doc[i+len(FlagTableMarker):]))
	out := map[string][]string{}
	rows, started := 0, false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 2 {
			return nil, fmt.Errorf("flag table line %d: %q has fewer than 2 cells", n, line)
		}
		first := strings.TrimSpace(cells[0])
		if first == "flag" || strings.Trim(first, "-: ") == "" {
			continue // the header and its rule
		}
		var names []string
		for _, tok := range strings.Split(first, ",") {
			tok = strings.TrimSpace(tok)
			if len(tok) < 4 || tok[0] != '`' || tok[len(tok)-1] != '`' || tok[1] != '-' {
				return nil, fmt.Errorf("flag table line %d: flag cell %q: want `--name`, `-x`, ...", n, first)
			}
			names = append(names, strings.TrimLeft(tok[1:len(tok)-1], "-"))
		}
		for _, tool := range strings.Split(cells[1], ",") {
			tool = strings.TrimSpace(tool)
			if tool == "" {
				return nil, fmt.Errorf("flag table line %d: empty tool name in %q", n, cells[1])
			}
			out[tool] = append(out[tool], names...)
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if rows == 0 {
		return nil, fmt.Errorf("the flag table has no rows")
	}
	for tool, names := range out {
		slices.Sort(names)
		for j := 1; j < len(names); j++ {
			if names[j] == names[j-1] {
				return nil, fmt.Errorf("flag table: %s lists %q twice", tool, names[j])
			}
		}
		out[tool] = names
	}
	return out, nil
}

// CheckFlagDoc reports, as one error, the difference between the flags of
// tool in the CLI.md document doc and want (FlagNames of its cli.App or
// command): flags the table misses and flags it lists that the tool lacks.
func CheckFlagDoc(doc []byte, tool string, want []string) error {
	table, err := ParseFlagTable(doc)
	if err != nil {
		return err
	}
	got := table[tool]
	var missing, extra []string
	for _, n := range want {
		if !slices.Contains(got, n) {
			missing = append(missing, n)
		}
	}
	for _, n := range got {
		if !slices.Contains(want, n) {
			extra = append(extra, n)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	return fmt.Errorf("docs/CLI.md flag table for %s: missing %v, not flags of the tool %v", tool, missing, extra)
}
