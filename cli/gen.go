package cli

import (
	"cmp"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/bench"
)

func (a *app) genCommand() *cobra.Command {
	var (
		o  bench.GenOptions
		hl bench.HarvestListOptions
		// harvestList: write a harvest list site instead.
		harvestList bool
	)
	c := &cobra.Command{
		Use:   "gen",
		Short: "Write a deterministic synthetic ResourceSync source (Resource Dump and ZIP packages), or with --harvest-list a site's harvest list and its EML documents, to a directory",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Dir == "" || (!harvestList && o.Resources < 1) {
				return usagef("--out and --resources (≥ 1) are required (--harvest-list: --out)")
			}
			// The URIs are those of the address the source is served at:
			// --base, else the one it was generated for before, else a new
			// one of its own (serve --dir serves it there).
			if o.Base == "" {
				var err error
				if o.Base, err = bench.BaseOf(o.Dir); err == nil && o.Base == "" {
					o.Base, err = bench.NewBase(o.Dir)
				}
				if err != nil {
					return err
				}
			}
			if harvestList {
				hl.Dir, hl.Base, hl.Seed, hl.Odd = o.Dir, o.Base, uint64(o.Seed), true
				if err := bench.GenerateHarvestList(c.Context(), hl); err != nil {
					return err
				}
				if err := bench.RecordBase(o.Dir, o.Base); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "wrote a harvest list of %d documents (round %d) to %s: serve it (rsharvest serve --dir %s) and harvest %sharvestlist.xml with --protocol harvest-list\n",
					cmp.Or(hl.Documents, 20), hl.Round, o.Dir, o.Dir, o.Base)
				return nil
			}
			o.Logger = a.logger()
			res, err := bench.Generate(c.Context(), o)
			if err != nil {
				return err
			}
			if err := bench.RecordBase(o.Dir, o.Base); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %d resources (%d bytes) in %d packages (%d bytes) to %s, for %s: serve it with rsharvest serve --dir %s\n",
				res.Resources, res.PayloadBytes, res.Packages, res.PackageBytes, o.Dir, o.Base, o.Dir)
			if res.ChangePackages > 0 {
				fmt.Fprintf(a.stdout, "and %d changes in %d change packages (%d bytes)\n", res.Changes, res.ChangePackages, res.ChangeBytes)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.Dir, "out", "", "directory to write the source to")
	fl.IntVar(&o.Resources, "resources", 0, "number of resources")
	o.Seed, o.MeanSize, o.SizeDist, o.Producer, o.CompressibleShare, o.StoredShare = 1, 50<<10, bench.LogNormal, bench.ProducerRsharvest, 0.5, -1
	o.RegisterContent(fl)
	fl.IntVar(&o.IndexThreshold, "index-threshold", 100, "packages per Resource Dump before a Resource Dump Index is written")
	fl.BoolVar(&o.NoOddNames, "no-odd-names", false, "leave out the awkward URIs (query strings, non-ASCII, prefix directories, long names)")
	fl.BoolVar(&o.WriteResources, "write-resources", false, "also write a Resource List and the resources as plain files")
	fl.StringVar(&o.Base, "base", "", "URL prefix of every document, package and resource: where the source is served (default: the one it was generated for before, else a loopback port free now and a path of the source's own)")
	fl.IntVar(&o.ChangePackages, "change-packages", 0, "number of Change Dump packages (0: no Change Dump)")
	fl.IntVar(&o.ChangesPerPackage, "changes-per-package", 0, "changes per Change Dump package (default: resources/20)")
	fl.Float64Var(&o.CreateShare, "create-share", 0, "share of changes that create a resource (default 0.1)")
	fl.Float64Var(&o.DeleteShare, "delete-share", 0, "share of changes that delete a resource (default 0.05)")
	fl.DurationVar(&o.ChangeInterval, "change-interval", 0, "time each Change Dump package covers (default 1h)")
	fl.BoolVar(&o.ClosedLast, "closed", false, "close the last Change Dump package (default: the change dump stays open)")
	fl.BoolVar(&harvestList, "harvest-list", false, "write a site's harvest list (a Metacat-style list of EML documents) and the documents instead: several revisions, a docid listed twice, one document not well-formed, one in another namespace, one unreachable, an element without a revision, and from --round 1 one listed at a lower revision")
	fl.IntVar(&hl.Documents, "documents", 20, "with --harvest-list: documents listed")
	fl.IntVar(&hl.Round, "round", 0, "with --harvest-list: how far the site has moved on (each round raises every third document's revision)")
	return c
}
