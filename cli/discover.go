package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// discoverCommand returns the "discover" command: it finds a source's
// ResourceSync documents from any URL and prints their tree, as text or
// JSON. It exits with ExitSource when nothing ResourceSync is found.
func (a *app) discoverCommand() *cobra.Command {
	var (
		asJSON  bool
		headers []string
		rate    float64
		retries int
		maxDocs int
		// maxDocSize caps one document's bytes.
		maxDocSize   int64
		allowPrivate bool
	)
	c := &cobra.Command{
		Use:   "discover URL",
		Short: "Find a source's Source Description, resource sets and capability documents from any URL, and print their tree",
		Long: "discover starts from a site URL (/.well-known/resourcesync, robots.txt Sitemap: lines, the home page's\n" +
			"<link rel=\"resourcesync\"> or Link header) or from any document (a capability document, a Capability List,\n" +
			"an HTML page), follows rs:ln rel=\"up\" to the Source Description and prints the tree below it, one line\n" +
			"per document. Of capability documents only the header is read.",
		Args: urlArgs("discover", "URL"),
		RunE: func(c *cobra.Command, args []string) error {
			if maxDocs < 0 {
				return usagef("--max-documents must not be negative")
			}
			if maxDocSize == 0 || maxDocSize < -1 {
				return usagef("--max-document-size must be a number of bytes, or -1 for no cap")
			}
			// The documents a source links may not lead inward either.
			client, start, err := a.lookClient(args[0], headers, rate, retries, allowPrivate)
			if err != nil {
				return err
			}
			args[0] = start
			log := a.logger()
			ctx := c.Context()
			src, err := resourcesync.Discover(ctx, client, args[0], resourcesync.Options{MaxDocuments: maxDocs, MaxDocumentSize: maxDocSize, Logger: log})
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					return err
				}
				return &pipeline.SourceError{URL: args[0], Err: err}
			}
			if asJSON {
				return src.WriteJSON(a.stdout)
			}
			return src.WriteText(a.stdout)
		},
	}
	fl := c.Flags()
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of the text tree")
	fl.StringArrayVar(&headers, "header", nil, "extra HTTP header 'Name: value' for every request (repeatable)")
	fl.Float64Var(&rate, "rate", 0, "requests per second per host (0 = unlimited)")
	fl.IntVar(&retries, "retries", 5, "retries of a failed request (timeouts, resets, 429, 5xx)")
	fl.IntVar(&maxDocs, "max-documents", resourcesync.DefaultMaxDocuments, "read at most this many documents")
	fl.Int64Var(&maxDocSize, "max-document-size", fetch.DefaultMaxDocumentSize, "read at most this many bytes of one document (-1: no cap)")
	fl.BoolVar(&allowPrivate, "allow-private-addresses", false, "let the documents a source links lead to loopback, link-local, private or cloud metadata addresses")
	return c
}
