package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/source/oaipmh"
)

// oaiCommand returns the "oai" command: what an OAI-PMH repository says of
// itself (Identify), the formats it offers and its sets, as text or JSON,
// for looking at a repository before harvesting it.
func (a *app) oaiCommand() *cobra.Command {
	var (
		asJSON  bool
		headers []string
		retries int
	)
	c := &cobra.Command{
		Use:   "oai",
		Short: "Ask an OAI-PMH repository what it is (identify), which metadata formats it offers (formats) and its sets (sets)",
	}
	sub := func(use, short string, ask func(ctx context.Context, p *oaipmh.Planner, base string) (any, error), text func(io.Writer, any) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " URL",
			Short: short,
			Args: func(_ *cobra.Command, args []string) error {
				if len(args) != 1 {
					return usagef("oai %s takes one base URL, got %d arguments", use, len(args))
				}
				if u, err := url.Parse(args[0]); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usagef("oai %s: %q is not an absolute http(s) URL", use, args[0])
				}
				return nil
			},
			RunE: func(c *cobra.Command, args []string) error {
				hdr, err := parseHeaders(headers)
				if err != nil {
					return err
				}
				if retries < 0 {
					return usagef("--retries must not be negative")
				}
				p := &oaipmh.Planner{Client: fetch.New(fetch.Options{UserAgent: UserAgent(), Header: hdr, Retries: fetchRetries(retries), Logger: a.logger()})}
				ctx := c.Context()
				v, err := ask(ctx, p, args[0])
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, context.Canceled) {
						return err
					}
					return &pipeline.SourceError{URL: args[0], Err: err}
				}
				if asJSON {
					enc := json.NewEncoder(a.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(v)
				}
				return text(a.stdout, v)
			},
		}
	}
	identify := sub("identify", "Print what an OAI-PMH repository says of itself (Identify)",
		func(ctx context.Context, p *oaipmh.Planner, base string) (any, error) { return p.Identify(ctx, base) },
		func(w io.Writer, v any) error {
			id := v.(*oaipmh.Identify)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, row := range [][2]string{{"repository", id.RepositoryName}, {"base URL", id.BaseURL}, {"protocol", id.ProtocolVersion},
				{"granularity", id.Granularity}, {"earliest", id.EarliestDatestamp}, {"deleted records", id.DeletedRecord},
				{"admin", strings.Join(id.AdminEmail, ", ")}} {
				fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
			}
			return tw.Flush()
		})
	formats := sub("formats", "Print the metadata formats an OAI-PMH repository offers (ListMetadataFormats)",
		func(ctx context.Context, p *oaipmh.Planner, base string) (any, error) { return p.Formats(ctx, base) },
		func(w io.Writer, v any) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PREFIX\tNAMESPACE\tSCHEMA")
			for _, f := range v.([]oaipmh.MetadataFormat) {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Prefix, f.Namespace, f.Schema)
			}
			return tw.Flush()
		})
	sets := sub("sets", "Print the sets of an OAI-PMH repository (ListSets)",
		func(ctx context.Context, p *oaipmh.Planner, base string) (any, error) { return p.Sets(ctx, base) },
		func(w io.Writer, v any) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SPEC\tNAME")
			for _, s := range v.([]oaipmh.Set) {
				fmt.Fprintf(tw, "%s\t%s\n", s.Spec, s.Name)
			}
			return tw.Flush()
		})
	c.AddCommand(identify, formats, sets)
	fl := c.PersistentFlags()
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	fl.StringArrayVar(&headers, "header", nil, "extra HTTP header 'Name: value' for every request (repeatable)")
	fl.IntVar(&retries, "retries", 5, "retries of a failed request (timeouts, resets, 429, 5xx)")
	return c
}
