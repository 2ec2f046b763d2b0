package cli

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/source"
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
		// allowPrivate lifts the address rule (see fetch.AddressPolicy).
		allowPrivate bool
	)
	c := &cobra.Command{
		Use:   "oai",
		Short: "Ask an OAI-PMH repository what it is (identify), which metadata formats it offers (formats), its sets (sets) and one record (record)",
	}
	// sub is one subcommand: use names its arguments after the base URL;
	// what ask returns is printed as JSON or as its text form.
	sub := func(use, short string, ask func(ctx context.Context, p *oaipmh.Planner, args []string) (interface{ WriteText(io.Writer) error }, error)) *cobra.Command {
		name, _, _ := strings.Cut(use, " ")
		return &cobra.Command{
			Use:   name + " URL" + strings.TrimPrefix(use, name),
			Short: short,
			Args:  urlArgs("oai "+name, "URL"+strings.TrimPrefix(use, name)),
			RunE: func(c *cobra.Command, args []string) error {
				client, base, err := a.lookClient(args[0], headers, 0, retries, allowPrivate)
				if err != nil {
					return err
				}
				args = append([]string{base}, args[1:]...)
				p := &oaipmh.Planner{Client: client}
				ctx := c.Context()
				v, err := ask(ctx, p, args)
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, context.Canceled) {
						return err
					}
					return &pipeline.SourceError{URL: args[0], Err: err}
				}
				if asJSON {
					return writeJSON(a.stdout, v)
				}
				return v.WriteText(a.stdout)
			},
		}
	}
	type text = interface{ WriteText(io.Writer) error }
	identify := sub("identify", "Print what an OAI-PMH repository says of itself (Identify)",
		func(ctx context.Context, p *oaipmh.Planner, args []string) (text, error) {
			return p.Identify(ctx, args[0])
		})
	formats := sub("formats", "Print the metadata formats an OAI-PMH repository offers (ListMetadataFormats)",
		func(ctx context.Context, p *oaipmh.Planner, args []string) (text, error) {
			return p.Formats(ctx, args[0])
		})
	sets := sub("sets", "Print the sets of an OAI-PMH repository (ListSets)",
		func(ctx context.Context, p *oaipmh.Planner, args []string) (text, error) { return p.Sets(ctx, args[0]) })
	record := sub("record IDENTIFIER", "Print one record of an OAI-PMH repository (GetRecord): its header, then its metadata as rsharvest stores it",
		func(ctx context.Context, p *oaipmh.Planner, args []string) (text, error) {
			rec, err := p.GetRecord(ctx, args[0], args[1], prefix)
			if err != nil {
				return nil, err
			}
			return rec.View(), nil
		})
	record.Flags().StringVar(&prefix, "metadata-prefix", oaipmh.DefaultMetadataPrefix, "the metadata format")
	c.AddCommand(identify, formats, sets, record)
	fl := c.PersistentFlags()
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	fl.StringArrayVar(&headers, "header", nil, "extra HTTP header 'Name: value' for every request (repeatable)")
	fl.IntVar(&retries, "retries", 5, "retries of a failed request (timeouts, resets, 429, 5xx)")
	fl.BoolVar(&allowPrivate, "allow-private-addresses", false, "let the repository lead to loopback, private or link-local addresses (as a harvest's flag)")
	return c
}

// lookClient is the HTTP client of a command that looks at a source (oai,
// discover) and the source's URL to ask: headers, rate and retries as a
// harvest's, the address rule applied as for a harvest of source, and the
// credentials of source's URL, as the headers, sent to its origin alone.
func (a *app) lookClient(src string, headers []string, rate float64, retries int, allowPrivate bool) (*fetch.Client, string, error) {
	hdr, err := parseHeaders(headers)
	if err != nil {
		return nil, "", err
	}
	if rate < 0 || retries < 0 {
		return nil, "", usagef("--rate and --retries must not be negative")
	}
	src, auth := source.Credentials(src)
	if auth != "" && hdr.Get("Authorization") == "" {
		hdr.Set("Authorization", auth)
	}
	return fetch.New(fetch.Options{UserAgent: UserAgent(), Header: hdr, HeaderOrigins: []string{src}, Rate: rate, Retries: harvest.FetchRetries(retries), Logger: a.logger(),
		Addresses: &fetch.AddressPolicy{Source: src, Allow: allowPrivate}}), src, nil
}
