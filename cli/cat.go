package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/sink"
)

// catCommand writes a held body to standard output.
func (a *app) catCommand() *cobra.Command {
	var siteName, stateFile string
	var sinks []string
	c := &cobra.Command{
		Use:   "cat URI (--site NAME | --sink SPEC…)",
		Short: "Write the body rsharvest holds of a resource to standard output, from a sink that keeps bodies (fs, s3, es with store_body)",
		Args:  exactArgs("cat", "URI"),
		RunE: func(c *cobra.Command, args []string) error {
			if (siteName == "") == (len(sinks) == 0) {
				return usagef("cat: give --site or --sink")
			}
			ctx := c.Context()
			specs := sinks
			if siteName != "" {
				st, err := a.openStateToRead(ctx, stateFile)
				if err != nil {
					return err
				}
				j, err := siteJob(ctx, st, siteName)
				st.Close()
				if err != nil {
					return err
				}
				specs = j.Sinks
			}
			opened, closeAll, err := harvest.OpenSinks(ctx, harvest.SinkKinds(), specs)
			if err != nil {
				return usageError{err}
			}
			defer closeAll(ctx)
			for _, s := range opened {
				inv, ok := s.(sink.Inventory)
				if !ok {
					continue
				}
				rc, err := inv.Get(ctx, args[0])
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errors.ErrUnsupported) {
					continue // not held there, or a sink that keeps no bodies
				}
				if err != nil {
					return err
				}
				defer rc.Close()
				_, err = io.Copy(a.stdout, rc)
				return err
			}
			fmt.Fprintln(a.stderr, "rsharvest: cat: no sink holds a body of", args[0])
			a.code = ExitPartial
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&siteName, "site", "", "read from the sinks of this registry site")
	fl.StringArrayVar(&sinks, "sink", nil, "read from this sink (repeatable)")
	registerState(fl, &stateFile)
	_ = c.RegisterFlagCompletionFunc("site", a.completeSites(&stateFile))
	return c
}
