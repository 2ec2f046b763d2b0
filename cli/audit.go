package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
)

// auditCommand compares the destination with the source. Exit 0 when they
// agree (or --repair mended everything), 1 when differences remain.
func (a *app) auditCommand() *cobra.Command {
	var f syncFlags
	var asJSON, repair bool
	c := &cobra.Command{
		Use:   "audit",
		Args:  noSourceArgs,
		Short: "Compare what the sinks hold with the source's current Resource List (or dump manifests): missing, extra and mismatched resources",
		RunE: func(c *cobra.Command, _ []string) error {
			if err := a.applyConfig(c, &f); err != nil {
				return err
			}
			if f.dryRun && !repair {
				return usagef("--dry-run is a dry run of --repair: give both")
			}
			ar, err := a.runAudit(c.Context(), f, repair)
			if ar != nil {
				if asJSON {
					ar.WriteJSON(a.stdout)
				} else {
					ar.WriteText(a.stdout)
				}
			}
			if err != nil {
				return err
			}
			a.code = ExitOK
			switch {
			case ar.Repair != nil && (ar.Repair.Status != runreport.StatusOK || ar.NotRepaired > 0):
				a.code = ExitPartial // differences remain (some until the next harvest)
			case ar.Repair == nil && !ar.Clean():
				a.code = ExitPartial
			}
			return nil
		},
	}
	f.register(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print the audit as JSON")
	c.Flags().BoolVar(&repair, "repair", false, "fetch what is missing or mismatched and remove what the source no longer lists (never what changed after the source's snapshot)")
	c.Flags().BoolVar(&f.dryRun, "dry-run", false, "with --repair: print what the repair would remove and fetch, changing nothing")
	return c
}

// runAudit audits f's job on the state store f gives or --state.
func (a *app) runAudit(ctx context.Context, f syncFlags, repair bool) (*harvest.AuditReport, error) {
	log := a.logger()
	open := a.runStore
	if !repair || f.dryRun {
		open = a.dryRunStore // reads the state, never makes one
	}
	store, closeStore, err := open(ctx, f, log)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	h := a.harvester(store, f.store != nil, log)
	if f.dryRun {
		f.DryRun, h.Preview = true, a.printPreview()
	}
	return h.Audit(ctx, f.Job, repair)
}
