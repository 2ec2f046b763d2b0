package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// sitesCommand returns the "sites" command: the site registry in the
// state store — add, edit, remove, list and show sites, or
// declare the whole registry from a file (apply).
func (a *app) sitesCommand() *cobra.Command {
	var stateFile string
	c := &cobra.Command{
		Use:   "sites",
		Short: "Keep the registry of the sites harvested on a schedule: add, edit, remove, list, show, apply FILE.yaml",
		Long: `The registry of sites lives in the state store (--state). A site is a source with its protocol
options, its sinks, a schedule ("every 1d", "every 2w", "every 1mo", "every 12h", or a cron expression
such as "0 3 * * *"), a contact e-mail and a notification policy (always, on_error, on_change).
"sites apply FILE.yaml" declares the whole registry from a file (a mapping whose key sites lists the
sites, each with the keys of a config file that belong to a harvest, and name, schedule, contact,
notify): it prints its plan first, removes the sites not in the file only with --prune, and applying the same file twice changes nothing.`,
	}
	registerState(c.PersistentFlags(), &stateFile)
	// registry runs fn on the registry of --state; reading never creates
	// a state file.
	registry := func(ctx context.Context, write bool, fn func(site.Registry) error) error {
		st, err := a.siteState(ctx, stateFile, write)
		if err != nil {
			return err
		}
		defer st.Close()
		return fn(site.Registry{Store: st})
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the sites: schedule, last harvest and its status, next harvest",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var sites []*site.Site
			if err := registry(c.Context(), false, func(reg site.Registry) (err error) { sites, err = reg.Sites(c.Context()); return err }); err != nil {
				return err
			}
			views := make([]harvest.SiteView, 0, len(sites))
			for _, s := range sites {
				views = append(views, harvest.ViewOf(s, time.Local))
			}
			if asJSON {
				return writeJSON(a.stdout, views)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSCHEDULE\tLAST HARVEST\tSTATUS\tNEXT HARVEST\tSOURCE")
			for i, v := range views {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, sites[i].When, cmp.Or(v.LastHarvest, "-"), cmp.Or(v.LastStatus, "-"), v.NextHarvest, v.Source)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var showJSON bool
	show := &cobra.Command{
		Use:               "show NAME",
		ValidArgsFunction: a.completeSites(&stateFile),
		Short:             "Show a site: its definition (as a registry file holds it) and where its harvests stand",
		Args:              exactArgs("sites show", "NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			var s *site.Site
			if err := registry(c.Context(), false, func(reg site.Registry) (err error) { s, err = reg.Site(c.Context(), args[0]); return err }); err != nil {
				return noSite(err)
			}
			v := harvest.ViewOf(s, time.Local)
			if showJSON {
				return writeJSON(a.stdout, v)
			}
			def, err := yaml.Marshal(harvest.RedactSite(s.Site))
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s# last harvest: %s (%s)\n# next harvest: %s\n", def, cmp.Or(v.LastHarvest, "-"), cmp.Or(v.LastStatus, "-"), v.NextHarvest)
			return nil
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")
	remove := &cobra.Command{
		Use:               "remove NAME",
		ValidArgsFunction: a.completeSites(&stateFile),
		Short:             "Remove a site from the registry (what its harvests hold stays in the state and the sinks)",
		Args:              exactArgs("sites remove", "NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := registry(c.Context(), true, func(reg site.Registry) error { return reg.Remove(c.Context(), args[0]) }); err != nil {
				return noSite(err)
			}
			fmt.Fprintf(a.stdout, "removed %s\n", args[0])
			return nil
		},
	}
	var prune, dryRun bool
	apply := &cobra.Command{
		Use:   "apply FILE.yaml",
		Short: "Make the registry hold the sites of a file (idempotent): prints the plan (added, changed and how, removed), then applies it; sites not in the file are removed only with --prune",
		Args:  exactArgs("sites apply", "FILE.yaml"),
		RunE: func(c *cobra.Command, args []string) error {
			fh, err := os.Open(args[0])
			if err != nil {
				return usagef("sites apply: %v", err)
			}
			defer fh.Close()
			sites, err := config.DecodeSites(fh, args[0], harvest.Settings(), harvest.SiteTargets)
			if err != nil {
				return usageError{err}
			}
			for i := range sites {
				if _, err := site.New(sites[i]); err != nil {
					return usageError{err}
				}
			}
			var ch site.Changes
			if dryRun && !stateExists(stateFile) {
				// No registry yet: every site would be added.
				for _, s := range sites {
					ch.Added = append(ch.Added, s.Name)
				}
				a.printPlan(ch, prune, dryRun)
				return nil
			}
			if err := registry(c.Context(), !dryRun, func(reg site.Registry) (err error) {
				if dryRun {
					ch, _, err = reg.Plan(c.Context(), sites)
					return err
				}
				h := registryHarvester(reg)
				for i := range sites {
					if err := h.CheckSinks(c.Context(), &sites[i]); err != nil {
						return err
					}
				}
				ch, err = reg.Apply(c.Context(), sites, prune)
				return err
			}); err != nil {
				return err
			}
			a.printPlan(ch, prune, dryRun)
			return nil
		},
	}
	apply.Flags().BoolVar(&prune, "prune", false, "also remove the registry's sites the file does not name (what their harvests hold stays)")
	apply.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan, change nothing")
	pauseResume := func(verb string, paused bool) *cobra.Command {
		return &cobra.Command{
			Use:               verb + " NAME",
			ValidArgsFunction: a.completeSites(&stateFile),
			Short:             map[bool]string{true: "Pause a site: never due until resumed (it can still be run by name)", false: "Resume a paused site: due again by its schedule"}[paused],
			Args:              exactArgs("sites "+verb, "NAME"),
			RunE: func(c *cobra.Command, args []string) error {
				err := registry(c.Context(), true, func(reg site.Registry) error {
					if paused {
						return reg.Pause(c.Context(), args[0])
					}
					return reg.Resume(c.Context(), args[0])
				})
				if err != nil {
					return noSite(err)
				}
				fmt.Fprintf(a.stdout, "%sd %s\n", verb, args[0])
				return nil
			},
		}
	}
	edit := a.siteEditCommand("edit", registry)
	edit.ValidArgsFunction = a.completeSites(&stateFile)
	c.AddCommand(a.siteEditCommand("add", registry), edit, remove, list, show, apply,
		pauseResume("pause", true), pauseResume("resume", false))
	return c
}

// printPlan prints what sites apply does (or, dryRun, would do): the
// counts, then each site added, changed (with the keys that change; the
// values of headers and sinks never shown) and removed (or kept, without
// prune).
func (a *app) printPlan(ch site.Changes, prune, dryRun bool) {
	removed := len(ch.Removed)
	if !prune {
		removed = 0
	}
	if dryRun {
		fmt.Fprint(a.stdout, "plan: ")
	}
	fmt.Fprintf(a.stdout, "%d added, %d changed, %d removed, %d unchanged", len(ch.Added), len(ch.Changed), removed, len(ch.Unchanged))
	if !prune && len(ch.Removed) > 0 {
		fmt.Fprintf(a.stdout, "; %d not in the file, kept (--prune removes them)", len(ch.Removed))
	}
	fmt.Fprintln(a.stdout)
	for _, n := range ch.Added {
		fmt.Fprintf(a.stdout, "  added %s\n", n)
	}
	for _, n := range ch.Changed {
		var parts []string
		for _, f := range ch.Fields[n] {
			switch {
			case f.Key == "headers" || f.Key == "sinks":
				parts = append(parts, f.Key)
			case f.Key == "source" && state.SourceKey(f.Old) == state.SourceKey(f.New):
				parts = append(parts, "source (its credentials)")
			case f.Key == "source":
				// Named as everywhere else: without its password.
				parts = append(parts, fmt.Sprintf("%s: %s → %s", f.Key, state.SourceKey(f.Old), state.SourceKey(f.New)))
			case f.Old == "":
				parts = append(parts, fmt.Sprintf("%s: %s (new)", f.Key, f.New))
			case f.New == "":
				parts = append(parts, fmt.Sprintf("%s: %s (removed)", f.Key, f.Old))
			default:
				parts = append(parts, fmt.Sprintf("%s: %s → %s", f.Key, f.Old, f.New))
			}
		}
		fmt.Fprintf(a.stdout, "  changed %s: %s\n", n, strings.Join(parts, "; "))
	}
	for _, n := range ch.Removed {
		if prune {
			fmt.Fprintf(a.stdout, "  removed %s\n", n)
		} else {
			fmt.Fprintf(a.stdout, "  kept %s (not in the file)\n", n)
		}
	}
	if dryRun {
		fmt.Fprintln(a.stdout, "dry run: nothing changed")
	}
}

// siteEditCommand returns "sites add" or "sites edit": a site defined by
// flags — every setting a registry file's site may give, from the
// settings table — checked as a registry file's site is. edit changes only
// what its flags give.
func (a *app) siteEditCommand(verb string, registry func(context.Context, bool, func(site.Registry) error) error) *cobra.Command {
	var (
		def   config.Site
		job   = harvest.DefaultJob()
		every string
		cron  string
		next  string
	)
	table := harvest.Settings()
	c := &cobra.Command{
		Use:   verb + " NAME",
		Args:  exactArgs("sites "+verb, "NAME"),
		Short: map[string]string{"add": "Add a site", "edit": "Change a site: only what the flags give"}[verb],
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			return registry(ctx, true, func(reg site.Registry) error {
				s := config.Site{Name: args[0]}
				edited := false // an edited site is due now (unless --next)
				paused := false
				if verb == "edit" {
					old, err := reg.Site(ctx, args[0])
					if err != nil {
						return noSite(err)
					}
					s, edited, paused = old.Site, true, old.Paused
				} else if _, err := reg.Site(ctx, args[0]); err == nil {
					return usagef("sites add: site %q exists (sites edit changes it)", args[0])
				}
				changed := c.Flags().Changed
				for _, f := range []struct {
					flag string
					dst  *string
					v    string
				}{{"contact", &s.Contact, def.Contact}, {"notify", &s.Notify, def.Notify}} {
					if changed(f.flag) {
						*f.dst = f.v
					}
				}
				if changed("metrics") {
					s.Metrics = def.Metrics
				}
				// Each setting given, as a registry file would hold it:
				// relative paths made absolute, whatever directory a later
				// run starts in.
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				here := config.FlagContext("sites "+verb, wd)
				for i := range table {
					set := &table[i]
					if set.Where&config.InSite == 0 || !changed(set.Name) {
						continue
					}
					var resolved harvest.Job
					v := set.Bind(&resolved)
					if err := v.Decode(here, set.FileKey(), set.Bind(&job).Encode()); err != nil {
						return usageError{err}
					}
					if m, ok := v.(config.Merger); ok && s.Setting(set.FileKey()) != nil {
						// The site's values the flags do not name stay
						// (headers: by name), as a config file's do.
						if err := m.DecodeUnder(here, set.FileKey(), s.Setting(set.FileKey())); err != nil {
							return usageError{err}
						}
					}
					s.Set(set.FileKey(), v.Encode())
				}
				switch {
				case changed("every") && changed("cron"):
					return usagef("sites %s: give --every or --cron, not both", verb)
				case changed("every"):
					s.Schedule = "every " + every
				case changed("cron"):
					s.Schedule = cron
				}
				// The same checks as a registry file's site.
				ns, err := harvest.NewSite(s, "sites "+verb)
				if err != nil {
					return err
				}
				if edited && !changed("next") {
					ns.Next = time.Now().UTC()
				}
				if changed("next") {
					t := time.Now().UTC() // "now", as sites list prints it
					if next != "now" {
						var err error
						if t, err = manifest.ParseDatetime(next); err != nil {
							return usagef("--next: %v (or now)", err)
						}
					}
					ns.Next = t
				}
				if err := registryHarvester(reg).CheckSinks(ctx, &ns.Site); err != nil {
					var e *config.Error
					if errors.As(err, &e) {
						// Not at a position in the text the flags made.
						return &harvest.InvalidError{Err: fmt.Errorf("sites %s: %w", verb, e.Err)}
					}
					return err
				}
				if err := reg.Put(ctx, ns); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s %s: %s, %s\n", map[string]string{"add": "added", "edit": "changed"}[verb], ns.Name, ns.When, state.SourceKey(ns.Source()))
				if paused {
					fmt.Fprintf(a.stdout, "site %s stays paused: it is not harvested, at its next harvest or by the schedule, until resumed (rsharvest sites resume %s); rsharvest run %s harvests it once now\n", ns.Name, ns.Name, ns.Name)
				}
				return nil
			})
		},
	}
	fl := c.Flags()
	table.Register(fl, config.AsFlag|config.InSite, &job)
	fl.StringVar(&every, "every", "", "harvest every N h, d, w or mo after the last harvest (1d, 2w, 1mo)")
	fl.StringVar(&cron, "cron", "", `harvest at the times of a cron expression ("0 3 * * *", "@daily")`)
	fl.StringVar(&def.Contact, "contact", "", "the e-mail address the site's reports go to")
	fl.StringVar(&def.Notify, "notify", "", "when the contact hears of a harvest: always, on_error, on_change (default always)")
	fl.BoolVar(&def.Metrics, "metrics", false, "give the site's own series in /metrics, whatever the size of the registry (by default only a small registry's sites have them)")
	fl.StringVar(&next, "next", "", "the next harvest: now, or a W3C datetime (default: derived from the last harvest and the schedule)")
	return c
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// exactArgs requires the arguments use names.
func exactArgs(cmd, use string) cobra.PositionalArgs {
	want := len(strings.Fields(use))
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == want:
			return nil
		case want == 1:
			return usagef("%s takes one %s, got %d arguments", cmd, use, len(args))
		}
		return usagef("%s takes %d arguments (%s), got %d", cmd, want, use, len(args))
	}
}

// noSite makes an unknown site a usage error.
func noSite(err error) error {
	if errors.Is(err, state.ErrNoSite) {
		return usageError{err}
	}
	return err
}

// urlArgs requires the arguments use names, the first an absolute http(s)
// URL.
func urlArgs(cmd, use string) cobra.PositionalArgs {
	n := exactArgs(cmd, use)
	return func(c *cobra.Command, args []string) error {
		if err := n(c, args); err != nil {
			return err
		}
		if u, err := url.Parse(args[0]); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("%s: %q is not an absolute http(s) URL", cmd, state.SourceKey(args[0]))
		}
		return nil
	}
}

// registryHarvester is the harvest library on the store of registry reg
// (the state store the sites command opened).
func registryHarvester(reg site.Registry) *harvest.Harvester {
	st, _ := reg.Store.(*state.Store)
	return &harvest.Harvester{Store: st}
}
