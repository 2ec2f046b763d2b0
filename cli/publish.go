package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/state"
)

// publishFlags are the settings of a publication, shared by "publish",
// "publish serve" and the daemon.
type publishFlags struct {
	stateFile, out, baseURL, period string
	copies                          bool
}

func (f *publishFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.stateFile, "state", "rsharvest.db", "state store file (SQLite) to publish from")
	fl.StringVar(&f.out, "out", "", "output directory: generations of documents, the published one linked as DIR/current")
	fl.StringVar(&f.baseURL, "base-url", "", "absolute http(s) URL at which DIR/current is served")
	fl.StringVar(&f.period, "change-period", "1d", "span of one Change List: 1d, 1w, 12h, …")
	fl.BoolVar(&f.copies, "copies", false, "link each resource to its held copy under BASE-URL/files/ (rel=\"duplicate\"; served by publish serve --copies-from)")
}

// options checks the flags and gives the publication's options.
func (f *publishFlags) options(a *app) (publish.Options, error) {
	if f.out == "" {
		return publish.Options{}, usagef("--out is required")
	}
	if f.baseURL == "" {
		return publish.Options{}, usagef("--base-url is required")
	}
	base, err := publish.CheckBaseURL(f.baseURL)
	if err != nil {
		return publish.Options{}, usagef("--base-url: %v", err)
	}
	period, err := publish.ParsePeriod(f.period)
	if err != nil {
		return publish.Options{}, usagef("--change-period: %v", err)
	}
	return publish.Options{Out: f.out, BaseURL: base, ChangePeriod: period, Copies: f.copies, Log: a.logger()}, nil
}

// publishCommand returns the "publish" command and its "serve".
func (a *app) publishCommand() *cobra.Command {
	var f publishFlags
	c := &cobra.Command{
		Use:   "publish",
		Short: "Publish what the state holds as a ResourceSync Source (Source Description, Capability Lists, Resource and Change Lists)",
		Long: `Writes a complete ResourceSync Source from the state store: a Source Description
(DIR/current/.well-known/resourcesync), a Capability List per source harvested, its Resource List
(an index with pages past 50,000 entries or 50 MB a document) and its Change Lists, one per
--change-period, closed ones with until and the current one open, under a Change List Index.

Each run writes a new generation and moves DIR/current to it in one rename, so a reader never sees
a half-written set; a document whose bytes did not change is kept (hard-linked), not rewritten.
Serve DIR/current at --base-url, or run "rsharvest publish serve".`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts, err := f.options(a)
			if err != nil {
				return err
			}
			if _, err := os.Stat(f.stateFile); err != nil {
				return usagef("--state: %v", err)
			}
			st, err := state.Open(c.Context(), f.stateFile)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := publish.Publish(c.Context(), publish.FromState(st), opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "published %s: %d resource sets, %d resources, %d changes, current to %s; %d documents written, %d unchanged\n",
				res.Generation, res.Sets, res.Resources, res.Changes, res.At.Format("2006-01-02T15:04:05.999999999Z07:00"), res.Written, res.Kept)
			return nil
		},
	}
	f.register(c)
	return c
}
