package site

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/state"
)

// Site is a site of the registry: its definition (config.Site: name,
// schedule, contact, notification policy and the settings its harvests
// run with), its schedule parsed, and where its harvests stand.
type Site struct {
	config.Site
	// When is Schedule parsed.
	When Schedule
	// Next is the next harvest when one was set explicitly (zero:
	// derived, see NextHarvest).
	Next time.Time
	// Last is when the last harvest began (zero: never), with its status
	// and run.
	Last       time.Time
	LastStatus string
	LastRunID  int64
	// Paused says the site is never due until resumed (Registry.Pause);
	// it can still be harvested by name.
	Paused bool
}

// New checks the schedule of a site's definition; its error names the
// site and, for a definition read from a file, the line.
func New(def config.Site) (*Site, error) {
	when, err := ParseSchedule(def.Schedule)
	if err != nil {
		return nil, def.Errorf("schedule", "%v", err)
	}
	return &Site{Site: def, When: when}, nil
}

// Never is the next harvest of a site whose schedule gives none (a cron
// expression that never fires, stored before such were refused).
var Never = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// NextHarvest returns when s is due next: Next when it was set, else its
// schedule's next time after its last harvest (in loc); a site never
// harvested is due at once (zero), one whose schedule gives no next time
// never (Never).
func (s *Site) NextHarvest(loc *time.Location) time.Time {
	switch {
	case !s.Next.IsZero():
		return s.Next
	case s.Last.IsZero():
		return time.Time{}
	}
	if next := s.When.Next(s.Last, loc); !next.IsZero() {
		return next
	}
	return Never
}

// FirstRetry is how long after a harvest that failed or was interrupted a
// site is due again; each consecutive one doubles it, up to its period.
const FirstRetry = 5 * time.Minute

// RetryAfter is when s is due again after its harvest begun at last ended
// failed or interrupted, the failures-th such harvest in a row: FirstRetry
// later, doubled for each earlier one, but never later than its schedule
// would have it.
func (s *Site) RetryAfter(last time.Time, failures int, loc *time.Location) time.Time {
	wait, period := FirstRetry, s.When.Next(last, loc).Sub(last)
	if period <= 0 {
		period = FirstRetry // no next time: retried, not harvested at once
	}
	for i := 1; i < failures && wait < period; i++ {
		if wait > period/2 {
			wait = period // doubled, it would pass the period (or overflow)
			break
		}
		wait *= 2
	}
	return last.Add(min(wait, period))
}

// statusFailed is runreport.StatusFailed, a run's status (site does not
// import runreport).
const statusFailed = "failed"

// LastFailed reports whether s's last harvest failed or was interrupted.
func (s *Site) LastFailed() bool {
	return s.LastStatus == statusFailed || s.LastStatus == state.StatusInterrupted
}

// RetriesBefore is how many harvests in a row had failed or been
// interrupted before the one s was read for, as far as its explicit next
// harvest shows: set by RetryAfter after the last of them, it is FirstRetry
// doubled once for each earlier one. Zero when the last harvest did not
// fail, or s's next was not set so. It counts failures that recorded no
// run (a sink that cannot be opened), which the harvest log cannot.
func (s *Site) RetriesBefore() int {
	if !s.LastFailed() || !s.Next.After(s.Last) {
		return 0
	}
	n, wait, gap := 1, FirstRetry, s.Next.Sub(s.Last)
	for wait < gap {
		n++
		if wait > gap/2 {
			break // doubled, it would pass the gap (or overflow)
		}
		wait *= 2
	}
	return n
}

// Due reports whether s is due at now: never while it is paused.
func (s *Site) Due(now time.Time, loc *time.Location) bool {
	return !s.Paused && !s.NextHarvest(loc).After(now)
}

// Store is the site registry as the state keeps it: the part of the state
// store's contract a Registry uses (state.Store implements it; see
// state/statetest).
type Store interface {
	Sites(ctx context.Context) ([]state.Site, error)
	Site(ctx context.Context, name string) (state.Site, error)
	PutSite(ctx context.Context, s state.Site) error
	RemoveSite(ctx context.Context, name string) error
	SetSiteNext(ctx context.Context, name string, next time.Time) error
	SetSitePaused(ctx context.Context, name string, paused bool) error
	DueSites(ctx context.Context, now time.Time) ([]state.Site, error)
	SetSitesDue(ctx context.Context, due []state.DueTime) error
}

var _ Store = (*state.Store)(nil)

// Registry is the site registry in a state store.
type Registry struct {
	Store Store
}

// Sites returns every site, by name.
func (r Registry) Sites(ctx context.Context) ([]*Site, error) {
	rows, err := r.Store.Sites(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Site, 0, len(rows))
	for _, row := range rows {
		s, err := FromRow(row)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Due returns the sites due at now (Site.Due, schedules read in loc), by
// name: of the candidates the state gives (state.Store.DueSites: those
// whose recorded next harvest has come or is not known), those their
// schedules make due; the next harvest of the others is recorded, so that
// with nothing due nothing is read (ten thousand sites cost one index
// look-up, not ten thousand definitions read). A candidate whose
// definition cannot be read here is left out, and named in the error,
// which wraps ErrUnreadable: the sites due are returned with it.
func (r Registry) Due(ctx context.Context, now time.Time, loc *time.Location) ([]*Site, error) {
	rows, err := r.Store.DueSites(ctx, now)
	if err != nil {
		return nil, err
	}
	var out []*Site
	var later []state.DueTime
	var unreadable []error
	for _, row := range rows {
		s, err := FromRow(row)
		if err != nil {
			unreadable = append(unreadable, fmt.Errorf("%w: %s: %w", ErrUnreadable, row.Name, err))
			continue
		}
		if s.Due(now, loc) {
			out = append(out, s)
		} else {
			later = append(later, state.DueTime{Name: s.Name, At: s.NextHarvest(loc), Updated: row.Updated})
		}
	}
	return out, errors.Join(r.Store.SetSitesDue(ctx, later), errors.Join(unreadable...))
}

// ErrUnreadable is wrapped by Due's error for each site whose definition
// cannot be read here (a schedule's zone this machine lacks, say): the
// sites due are returned all the same.
var ErrUnreadable = errors.New("site cannot be read")

// Refresh records site name's next harvest (see Due), after a change of
// where its harvests stand.
func (r Registry) Refresh(ctx context.Context, name string, loc *time.Location) error {
	row, err := r.Store.Site(ctx, name)
	if err != nil {
		return err
	}
	s, err := FromRow(row)
	if err != nil {
		return err
	}
	return r.Store.SetSitesDue(ctx, []state.DueTime{{Name: name, At: s.NextHarvest(loc), Updated: row.Updated}})
}

// Site returns site name; its error wraps state.ErrNoSite when there is
// none.
func (r Registry) Site(ctx context.Context, name string) (*Site, error) {
	row, err := r.Store.Site(ctx, name)
	if err != nil {
		return nil, err
	}
	return FromRow(row)
}

// FromRow reads a site's row of the state back.
func FromRow(row state.Site) (*Site, error) {
	def, err := config.DecodeSite([]byte(row.Definition), "the state's site "+row.Name, nil, nil)
	if err != nil {
		return nil, err
	}
	// As it was stored: a schedule taken then is taken now.
	when, err := parseSchedule(def.Schedule)
	if err != nil {
		return nil, def.Errorf("schedule", "%v", err)
	}
	s := &Site{Site: *def, When: when}
	s.Next, s.Last, s.LastStatus, s.LastRunID, s.Paused = row.Next, row.Last, row.LastStatus, row.LastRunID, row.Paused
	return s, nil
}

// Unreadable is site row as far as it can be shown when its definition
// cannot be read here (FromRow failed): its name, and where its harvests
// stand; no schedule, source or sinks.
func Unreadable(row state.Site) *Site {
	s := &Site{Next: row.Next, Last: row.Last, LastStatus: row.LastStatus, LastRunID: row.LastRunID, Paused: row.Paused}
	s.Name = row.Name
	return s
}

// Pause makes site name never due until Resume; it can still be
// harvested by name.
func (r Registry) Pause(ctx context.Context, name string) error {
	return r.Store.SetSitePaused(ctx, name, true)
}

// Resume makes a paused site name due again by its schedule.
func (r Registry) Resume(ctx context.Context, name string) error {
	return r.Store.SetSitePaused(ctx, name, false)
}

// definition is s's definition as the state keeps it.
func definition(def *config.Site) (string, error) {
	b, err := yaml.Marshal(def)
	if err != nil {
		return "", fmt.Errorf("site %q: %w", def.Name, err)
	}
	return string(b), nil
}

// Put adds s, or replaces the definition of the site of its name (where
// its harvests stand is kept). A Next set on s is stored.
func (r Registry) Put(ctx context.Context, s *Site) error {
	def, err := definition(&s.Site)
	if err != nil {
		return err
	}
	if err := r.Store.PutSite(ctx, state.Site{Name: s.Name, Definition: def}); err != nil {
		return err
	}
	if !s.Next.IsZero() {
		return r.Store.SetSiteNext(ctx, s.Name, s.Next)
	}
	return nil
}

// Remove removes site name.
func (r Registry) Remove(ctx context.Context, name string) error {
	return r.Store.RemoveSite(ctx, name)
}

// Changes are what Apply changes, by site name; Fields says, of each site
// changed, which of its keys change.
type Changes struct {
	Added, Changed, Removed, Unchanged []string
	Fields                             map[string][]Change
}

// Change is one key of a site's definition that changes: its old and new
// values as the definition writes them ("" when absent).
type Change struct {
	Key      string
	Old, New string
}

// Plan says what applying sites (a registry file's) would change, without
// changing anything: the sites the registry lacks (added), those whose
// definition differs (changed, with the keys that differ), those not in
// sites (removed, which Apply removes only when asked to prune), and the
// others (unchanged). Every schedule is checked.
func (r Registry) Plan(ctx context.Context, sites []config.Site) (Changes, map[string]string, error) {
	ch := Changes{Fields: map[string][]Change{}}
	want := map[string]string{}
	for i := range sites {
		if _, err := New(sites[i]); err != nil {
			return ch, nil, err
		}
		def, err := definition(&sites[i])
		if err != nil {
			return ch, nil, err
		}
		want[sites[i].Name] = def
	}
	rows, err := r.Store.Sites(ctx)
	if err != nil {
		return ch, nil, err
	}
	have := map[string]string{}
	for _, row := range rows {
		have[row.Name] = row.Definition
	}
	for _, name := range sortedKeys(want) {
		old, ok := have[name]
		switch {
		case ok && (old == want[name] || respelled(old, want[name])):
			ch.Unchanged = append(ch.Unchanged, name)
		case ok:
			ch.Changed = append(ch.Changed, name)
			ch.Fields[name] = diff(old, want[name])
		default:
			ch.Added = append(ch.Added, name)
		}
	}
	for _, name := range sortedKeys(have) {
		if _, ok := want[name]; !ok {
			ch.Removed = append(ch.Removed, name)
		}
	}
	return ch, want, nil
}

// Apply makes the registry hold sites (a registry file's) as Plan says:
// sites it lacks are added, sites whose definition differs are redefined
// (where their harvests stand is kept), and the others are not touched,
// so that applying the same sites twice changes nothing. Sites not in
// sites are removed only with prune; without it they stay, and Changes
// still names them as Removed (what prune would remove). Every schedule
// is checked before anything is written.
func (r Registry) Apply(ctx context.Context, sites []config.Site, prune bool) (Changes, error) {
	ch, want, err := r.Plan(ctx, sites)
	if err != nil {
		return ch, err
	}
	for _, name := range append(slices.Clone(ch.Added), ch.Changed...) {
		if err := r.Store.PutSite(ctx, state.Site{Name: name, Definition: want[name]}); err != nil {
			return ch, err
		}
	}
	if prune {
		for _, name := range ch.Removed {
			if err := r.Store.RemoveSite(ctx, name); err != nil && !errors.Is(err, state.ErrNoSite) {
				return ch, err
			}
		}
	}
	return ch, nil
}

// respelled says whether two definitions differ only in how they spell
// one source with the same credentials (state.SameSource): the site is
// unchanged, and keeps its definition (sites show prints the source as
// its key, which applied again changes nothing).
func respelled(old, new string) bool {
	d := diff(old, new)
	return len(d) == 1 && d[0].Key == "source" && state.SameSource(d[0].Old, d[0].New)
}

// diff is the keys whose values differ between two definitions.
func diff(old, new string) []Change {
	flat := func(def string) ([]string, map[string]string) {
		var n yaml.Node
		var keys []string
		out := map[string]string{}
		if yaml.Unmarshal([]byte(def), &n) != nil || len(n.Content) == 0 {
			return nil, out
		}
		m := n.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			v := m.Content[i+1]
			text := v.Value
			if v.Kind != yaml.ScalarNode {
				b, _ := yaml.Marshal(v)
				text = strings.TrimSpace(string(b))
			}
			keys = append(keys, m.Content[i].Value)
			out[m.Content[i].Value] = text
		}
		return keys, out
	}
	ok, o := flat(old)
	nk, n := flat(new)
	var out []Change
	seen := map[string]bool{}
	for _, k := range append(nk, ok...) {
		if seen[k] {
			continue
		}
		seen[k] = true
		if o[k] != n[k] {
			out = append(out, Change{Key: k, Old: o[k], New: n[k]})
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
