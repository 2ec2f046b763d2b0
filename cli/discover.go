package cli

import (
	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
)

// discoverCommand returns the "discover" command: it finds a source's
// documents from any URL and prints their tree.
func (a *app) discoverCommand() *cobra.Command {
	var (
		asJSON bool
		look   = harvest.DefaultLook()
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
			if look.MaxDocuments < 0 {
				return usagef("--max-documents must not be negative")
			}
			look.UserAgent, look.Log = UserAgent(), a.logger()
			src, err := look.Discover(c.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return src.WriteJSON(a.stdout)
			}
			return src.WriteText(a.stdout)
		},
	}
	fl := c.Flags()
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of the text tree")
	harvest.Settings().Only(harvest.LookSettings...).Register(fl, config.AsFlag, &look.Job)
	fl.IntVar(&look.MaxDocuments, "max-documents", look.MaxDocuments, "read at most this many documents")
	return c
}
