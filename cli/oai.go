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
	"github.com/rsharvest/rsharvest/harvest"
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
		prefix  string
	)
	c := &cobra.Command{
		Use:   "oai",
		Short: "Ask an OAI-PMH repository what it is (identify), which metadata formats it offers (formats) and its sets (sets)",
	}
	// sub is one subcommand: use names its arguments after the base URL.
	sub := func(use, short string, ask func(ctx context.Context, p *oaipmh.Planner, args []string) (any, error), text func(io.Writer, any) error) *cobra.Command {
		name, more, _ := strings.Cut(use, " ")
		want := 1 + len(strings.Fields(more))
		return &cobra.Command{
			Use:   name + " URL" + strings.TrimPrefix(use, name),
			Short: short,
			Args: func(_ *cobra.Command, args []string) error {
				if len(args) != want {
					return usagef("oai %s takes %d arguments (%s), got %d", name, want, "URL"+strings.TrimPrefix(use, name), len(args))
				}
				if u, err := url.Parse(args[0]); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usagef("oai %s: %q is not an absolute http(s) URL", name, args[0])
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
				p := &oaipmh.Planner{Client: fetch.New(fetch.Options{UserAgent: UserAgent(), Header: hdr, Retries: harvest.FetchRetries(retries), Logger: a.logger()})}
				ctx := c.Context()
				v, err := ask(ctx, p, args)
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, context.Canceled) {
						return err
					}
					return &pipeline.SourceError{URL: args[0], Err: err}
				}
				if asJSON {
					enc := json.NewEncoder(a.stdout)
					enc.SetIndent("", "  ")
					enc.SetEscapeHTML(false)
					return enc.Encode(v)
				}
				return text(a.stdout, v)
			},
		}
	}
	identify := sub("identify", "Print what an OAI-PMH repository says of itself (Identify)",
		func(ctx context.Context, p *oaipmh.Planner, args []string) (any, error) {
			return p.Identify(ctx, args[0])
		},
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
		func(ctx context.Context, p *oaipmh.Planner, args []string) (any, error) {
			return p.Formats(ctx, args[0])
		},
		func(w io.Writer, v any) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PREFIX\tNAMESPACE\tSCHEMA")
			for _, f := range v.([]oaipmh.MetadataFormat) {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Prefix, f.Namespace, f.Schema)
			}
			return tw.Flush()
		})
	sets := sub("sets", "Print the sets of an OAI-PMH repository (ListSets)",
		func(ctx context.Context, p *oaipmh.Planner, args []string) (any, error) { return p.Sets(ctx, args[0]) },
		func(w io.Writer, v any) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SPEC\tNAME")
			for _, s := range v.([]oaipmh.Set) {
				fmt.Fprintf(tw, "%s\t%s\n", s.Spec, s.Name)
			}
			return tw.Flush()
		})
	record := sub("record IDENTIFIER", "Print one record of an OAI-PMH repository (GetRecord): its header, then its metadata as rsharvest stores it",
		func(ctx context.Context, p *oaipmh.Planner, args []string) (any, error) {
			rec, err := p.GetRecord(ctx, args[0], args[1], prefix)
			if err != nil {
				return nil, err
			}
			h := rec.Header
			return oaiRecord{Identifier: h.Identifier, Datestamp: h.Datestamp, Sets: h.Sets, Deleted: h.Deleted, Metadata: string(rec.Metadata)}, nil
		},
		func(w io.Writer, v any) error {
			rec := v.(oaiRecord)
			status := ""
			if rec.Deleted {
				status = " (deleted)"
			}
			_, err := fmt.Fprintf(w, "identifier: %s%s\ndatestamp:  %s\nsets:       %s\n\n%s", rec.Identifier, status, rec.Datestamp, strings.Join(rec.Sets, ", "), rec.Metadata)
			return err
		})
	record.Flags().StringVar(&prefix, "metadata-prefix", oaipmh.DefaultMetadataPrefix, "the metadata format")
	c.AddCommand(identify, formats, sets, record)
	fl := c.PersistentFlags()
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	fl.StringArrayVar(&headers, "header", nil, "extra HTTP header 'Name: value' for every request (repeatable)")
	fl.IntVar(&retries, "retries", 5, "retries of a failed request (timeouts, resets, 429, 5xx)")
	return c
}

// oaiRecord is a record as "oai record" prints it.
type oaiRecord struct {
	Identifier string   `json:"identifier"`
	Datestamp  string   `json:"datestamp"`
	Sets       []string `json:"sets"`
	Deleted    bool     `json:"deleted"`
	// Metadata is the standalone document rsharvest stores.
	Metadata string `json:"metadata"`
}
