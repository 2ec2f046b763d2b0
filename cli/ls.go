package cli

import (
	"bufio"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// lsEntry is one held resource as "rsharvest ls --json" prints it.
type lsEntry struct {
	URI     string    `json:"uri"`
	Length  int64     `json:"length"`
	SHA256  string    `json:"sha256,omitempty"`
	Lastmod time.Time `json:"lastmod,omitzero"`
	// Version is the version held, where the protocol names versions (a
	// harvest list's revision, an OAI-PMH record's datestamp).
	Version string `json:"version,omitempty"`
}

// lsCommand lists what the state holds of a site or source.
func (a *app) lsCommand() *cobra.Command {
	var siteName, source, stateFile string
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls (--site NAME | --source URL)",
		Short: "List the resources held of a site or source: length, sha-256, lastmod, version (a harvest list's revision; - for none) and URI",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if (siteName == "") == (source == "") {
				return usagef("ls: give --site or --source")
			}
			ctx := c.Context()
			st, err := a.openStateToRead(ctx, stateFile)
			if err != nil {
				return err
			}
			defer st.Close()
			key := (&harvest.Job{Source: source}).Key()
			if siteName != "" {
				j, err := siteJob(ctx, st, siteName)
				if err != nil {
					return err
				}
				if key, _, err = harvest.StateKey(ctx, st, j); err != nil {
					return err
				}
			}
			w := bufio.NewWriter(a.stdout)
			defer w.Flush()
			n := 0
			if asJSON {
				w.WriteString("[")
			}
			err = st.WalkResources(ctx, key, func(r state.Resource) error {
				if r.Deleted || (r.Outcome != state.OutcomeWritten && r.Outcome != state.OutcomeUnchanged) {
					return nil
				}
				e := lsEntry{URI: r.URI, Length: r.Length, SHA256: hex.EncodeToString(r.Hashes.SHA256), Lastmod: r.Lastmod, Version: r.Version}
				if asJSON {
					if n > 0 {
						w.WriteString(",")
					}
					b, err := json.Marshal(e)
					if err != nil {
						return err
					}
					w.WriteString("\n  ")
					w.Write(b)
				} else {
					lastmod, sum := "-", e.SHA256
					if !e.Lastmod.IsZero() {
						lastmod = e.Lastmod.UTC().Format(time.RFC3339)
					}
					if sum == "" {
						sum = "-"
					}
					fmt.Fprintf(w, "%10d  %s  %s  %s  %s\n", e.Length, sum, lastmod, runreport.Printable(cmp.Or(e.Version, "-")), runreport.Printable(e.URI))
				}
				n++
				return nil
			})
			if asJSON {
				w.WriteString("\n]\n")
			}
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&siteName, "site", "", "the registry site whose resources are listed")
	fl.StringVar(&source, "source", "", "the source (its URL, as harvested) whose resources are listed")
	registerState(fl, &stateFile)
	_ = c.RegisterFlagCompletionFunc("site", a.completeSites(&stateFile))
	fl.BoolVar(&asJSON, "json", false, "print a JSON array of {uri, length, sha256, lastmod, version}")
	return c
}
