package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
)

// oaiCommand returns the "oai" command: what an OAI-PMH repository says of
// itself (Identify), the formats it offers and its sets, as text or JSON,
// for looking at a repository before harvesting it.
func (a *app) oaiCommand() *cobra.Command {
	var (
		asJSON bool
		prefix string
		look   = harvest.DefaultLook()
	)
	c := &cobra.Command{
		Use:   "oai",
		Short: "Ask an OAI-PMH repository what it is (identify), which metadata formats it offers (formats), its sets (sets) and one record (record)",
	}
	// sub is one subcommand: use names its arguments after the base URL;
	// what ask returns is printed as JSON or as its text form.
	sub := func(use, short string, ask func(ctx context.Context, l harvest.Look, args []string) (harvest.Found, error)) *cobra.Command {
		name, _, _ := strings.Cut(use, " ")
		return &cobra.Command{
			Use:   name + " URL" + strings.TrimPrefix(use, name),
			Short: short,
			Args:  urlArgs("oai "+name, "URL"+strings.TrimPrefix(use, name)),
			RunE: func(c *cobra.Command, args []string) error {
				look.UserAgent, look.Log = UserAgent(), a.logger()
				v, err := ask(c.Context(), look, args)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, v)
				}
				return v.WriteText(a.stdout)
			},
		}
	}
	identify := sub("identify", "Print what an OAI-PMH repository says of itself (Identify)",
		func(ctx context.Context, l harvest.Look, args []string) (harvest.Found, error) {
			return l.Identify(ctx, args[0])
		})
	formats := sub("formats", "Print the metadata formats an OAI-PMH repository offers (ListMetadataFormats)",
		func(ctx context.Context, l harvest.Look, args []string) (harvest.Found, error) {
			return l.Formats(ctx, args[0])
		})
	sets := sub("sets", "Print the sets of an OAI-PMH repository (ListSets)",
		func(ctx context.Context, l harvest.Look, args []string) (harvest.Found, error) {
			return l.Sets(ctx, args[0])
		})
	record := sub("record IDENTIFIER", "Print one record of an OAI-PMH repository (GetRecord): its header, then its metadata as rsharvest stores it",
		func(ctx context.Context, l harvest.Look, args []string) (harvest.Found, error) {
			return l.Record(ctx, args[0], args[1], prefix)
		})
	record.Flags().StringVar(&prefix, "metadata-prefix", "", "the metadata format (default: oai_dc, which every repository offers)")
	c.AddCommand(identify, formats, sets, record)
	fl := c.PersistentFlags()
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	harvest.Settings().Only(harvest.LookSettings...).Register(fl, config.AsFlag, &look.Job)
	return c
}
