package main

import (
	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// applyShape sets every size of the --shape preset on o, then lets the
// size flags given on the command line (and --tied, also as --tied=false)
// override it.
func applyShape(c *cli.Context, o testmodel.Options) (testmodel.Options, error) {
	s, err := testmodel.LookupShape(c.String("shape"))
	if err != nil {
		return o, cliutil.UsageError{Err: noPrefix(err)}
	}
	o = s.Apply(o)
	for _, f := range []struct {
		name string
		dst  *int
	}{{"layers", &o.Layers}, {"hidden", &o.Hidden}, {"intermediate", &o.Intermediate},
		{"vocab", &o.Vocab}, {"mtp-layers", &o.MTPLayers}} {
		if c.IsSet(f.name) {
			*f.dst = c.Int(f.name)
		}
	}
	if c.IsSet("tied") {
		o.Tied = c.Bool("tied")
	}
	return o, nil
}
