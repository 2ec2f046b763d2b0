package publish

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/state"
)

// headerReserve is what a page's budget leaves for its XML declaration,
// root element, header and end.
const headerReserve = 4 << 10

// page is one document of a list: its entries are the items first to
// first+n-1 of the list's walk. A change list's page belongs to a period and
// starts at the stamp of its first change (from).
type page struct {
	first, n     int64
	period, from time.Time
	last         time.Time // the stamp of its last entry
}

// stampName is the layout of a stamp in a document's or package's name.
const stampName = "20060102T150405.000000Z"

// pager cuts a list into pages on a first walk, from an upper bound of each
// entry's size, so that the second walk writes each page with a header that
// already knows its bounds. It keeps one value per page, never per entry.
// A dump's pages are packages, with two budgets: their bodies' bytes, and
// their manifests' (docBudget; 0 for a list, whose page is its document).
type pager struct {
	max       int64
	budget    int64
	docBudget int64
	pages     []page
	size      int64
	docSize   int64
	i         int64
}

func (p *publisher) newPager() *pager {
	return &pager{max: int64(p.o.MaxEntries), budget: p.o.MaxBytes - headerReserve}
}

// add counts an item of at most bound bytes (and of at most doc bytes in
// a package's manifest); newPeriod starts a page for a change list's next
// period.
func (pg *pager) add(bound, doc int64, period, stamp time.Time, newPeriod bool) {
	n := len(pg.pages)
	if n == 0 || newPeriod || pg.pages[n-1].n == pg.max || pg.size+bound > pg.budget ||
		(pg.docBudget > 0 && pg.docSize+doc > pg.docBudget) {
		pg.pages = append(pg.pages, page{first: pg.i, period: period, from: stamp})
		pg.size, pg.docSize = 0, 0
	}
	pg.pages[len(pg.pages)-1].n++
	pg.pages[len(pg.pages)-1].last = stamp
	pg.size += bound
	pg.docSize += doc
	pg.i++
}

// cursor follows a list's second walk through the pages its first walk
// cut.
type cursor struct {
	pages []page
	total int64
	k     int
	i     int64
}

func newCursor(pg *pager) *cursor { return &cursor{pages: pg.pages, total: pg.i, k: -1} }

// next places the walk's next item: open is called for each page that
// starts with it, and the item must lie in the first walk's pages
// (errChanged otherwise).
func (c *cursor) next(open func(k int) error) error {
	for c.k+1 < len(c.pages) && c.i == c.pages[c.k+1].first && c.pages[c.k+1].n > 0 {
		c.k++
		if err := open(c.k); err != nil {
			return err
		}
	}
	if c.k < 0 || c.i >= c.pages[c.k].first+c.pages[c.k].n {
		return errChanged
	}
	c.i++
	return nil
}

// end checks that the walk met every item of the first, and opens the
// pages left, which are empty.
func (c *cursor) end(open func(k int) error) error {
	if c.i != c.total {
		return errChanged
	}
	for c.k+1 < len(c.pages) {
		c.k++
		if err := open(c.k); err != nil {
			return err
		}
	}
	return nil
}

// writePages is a list's second walk: each item's entry is written into
// the page the cursor places it in (open starts page k), and counted.
func writePages[T any](walk func(func(T) error) error, pg *pager, pw *pageWriter, open func(k int) error, entry func(*T) manifest.Entry, count *int64) error {
	cur := newCursor(pg)
	if err := walk(func(x T) error {
		if err := cur.next(open); err != nil {
			return err
		}
		e := entry(&x)
		*count++
		return pw.w.Write(&e)
	}); err != nil {
		return err
	}
	if err := cur.end(open); err != nil {
		return err
	}
	return pw.end()
}

// escBound is an upper bound of s's length once escaped as XML text.
func escBound(s string) int64 {
	var n int64
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '&' || c == '<' || c == '>' || c == '"' || c == '\'' || c < 0x20:
			n += 6
		case c >= 0x80:
			n += 3
		default:
			n++
		}
	}
	return n
}

// entryBound is an upper bound of the bytes the Writer writes for e.
func entryBound(e *manifest.Entry) int64 {
	n := 320 + escBound(e.Loc) + escBound(e.Metadata.Type) + int64(len(e.Metadata.Hashes.String()))
	for _, l := range e.Links {
		n += 160 + escBound(l.Rel) + escBound(l.Href) + escBound(l.Type) + int64(len(l.Hashes.String()))
	}
	return n
}

// pageWriter writes a list's pages one after the other.
type pageWriter struct {
	d *doc
	w *manifest.Writer
}

func (pw *pageWriter) start(g *generation, rel string, h manifest.Header) error {
	d, err := g.create(rel)
	if err != nil {
		return err
	}
	w, err := manifest.NewWriter(d, h)
	if err != nil {
		d.discard()
		return err
	}
	pw.d, pw.w = d, w
	return nil
}

func (pw *pageWriter) end() error {
	if pw.d == nil {
		return nil
	}
	d := pw.d
	pw.d = nil
	if err := pw.w.Close(); err != nil {
		d.discard()
		return err
	}
	return d.close()
}

func (pw *pageWriter) discard() {
	if pw.d != nil {
		pw.d.discard()
		pw.d = nil
	}
}

// errChanged: the second walk of a view met other items than the first.
var errChanged = errclass.Fatalf("publish: the holdings changed within one view")

// resourceEntry is a resource's entry in a Resource List: what the state
// says of it, republished (see republished).
func (p *publisher) resourceEntry(r *state.Resource) manifest.Entry {
	e := resourceMeta(r)
	p.republished(&e, r.URI)
	return e
}

// resourceMeta is what the state says of a resource, as an entry (also a
// dump manifest's, which names no copy).
func resourceMeta(r *state.Resource) manifest.Entry {
	e := manifest.Entry{Loc: manifest.ToURI(r.URI), Lastmod: r.Lastmod, Metadata: manifest.NewMetadata()}
	if e.Lastmod.IsZero() {
		e.Lastmod = r.ChangeTime
	}
	e.Metadata.Hashes, e.Metadata.Length, e.Metadata.Type = r.Hashes, r.Length, r.Type
	e.Links = manifestLinks(r.Links)
	return e
}

// manifestLinks are links of the state as a document writes them.
func manifestLinks(ls []state.Link) []manifest.Link {
	var out []manifest.Link
	for _, l := range ls {
		ln := manifest.NewLink(l.Rel, manifest.ToURI(l.Href))
		ln.Type, ln.Modified = l.Type, l.Modified
		if l.Length > 0 {
			ln.Length = l.Length
		}
		if h, err := fixity.ParseList(l.Hash); err == nil {
			ln.Hashes = h
		}
		out = append(out, ln)
	}
	return out
}

// republished makes e, what the state says of resource uri, the entry of
// an aggregator when the copies are served (Options.Copies), as the
// ResourceSync specification's section 14.8 says an aggregator
// republishes: its loc is the copy's URI (which a Destination fetches),
// its hash, length and type are the copy's (the same bytes as the
// original's, verified), and one rs:ln rel="via" names the original with
// its lastmod (modified), hash, length and type — or the via link the
// resource came with, when it was harvested from an aggregator: the
// original stays the original, never the aggregator in between. No other
// link is inherited (they were the original's). The entry's lastmod stays
// its content's, so that an unchanged resource's entry does not change
// from one publication to the next. Without copies served, e stays the
// original's.
func (p *publisher) republished(e *manifest.Entry, uri string) {
	if !p.o.Copies {
		return
	}
	via := manifest.NewLink("via", e.Loc)
	via.Modified, via.Hashes, via.Type = e.Lastmod, e.Metadata.Hashes, e.Metadata.Type
	if e.Metadata.Length >= 0 {
		via.Length = e.Metadata.Length
	}
	for _, l := range e.Links {
		if l.Rel == "via" {
			via = l
			break
		}
	}
	e.Loc, e.Links = p.url(p.dir+"/"+CopyPath(uri)), []manifest.Link{via}
}

// CopyPath is the path, under its set's directory (BaseURL/sets/NAME), of
// the held copy of uri — stable from one publication to the next: FilesPath
// and the fs sink's path of uri (fs.Encode), each element escaped for a
// URL, ":" too (so that a Destination naming its files after the URL's
// path gets names every file system holds). A web server serving a site's
// fs sink directory at BaseURL/sets/NAME/files serves its copies.
func CopyPath(uri string) string {
	parts := strings.Split(fs.Encode(uri), "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(url.PathEscape(s), ":", "%3A")
	}
	return FilesPath + "/" + strings.Join(parts, "/")
}

// resourceList writes a source's Resource List, or its index and pages,
// and returns the URL the Capability List names.
func (p *publisher) resourceList(ctx context.Context, v View, src, dir, capURL string) (string, error) {
	pg := p.newPager()
	if err := v.Resources(ctx, src, func(r state.Resource) error {
		e := p.resourceEntry(&r)
		pg.add(entryBound(&e), 0, time.Time{}, time.Time{}, false)
		return ctx.Err()
	}); err != nil {
		return "", err
	}
	md := manifest.NewMetadata()
	md.Capability, md.At, md.Completed = manifest.ResourceList, p.at, p.at
	up := manifest.NewLink("up", capURL)
	single := len(pg.pages) <= 1
	indexRel := dir + "/resourcelist-index.xml"
	// An index's pages are named after the at they are current to: a
	// publication that cuts them anew names them anew, so a consumer
	// that read the index before it never reads another cut's page under
	// the name it was given (publish serve still serves the previous
	// generation's; a plain web server answers 404, and the consumer
	// starts again), and one that cuts the same pages keeps their files.
	pageRel := func(k int) string {
		if single {
			return dir + "/resourcelist.xml"
		}
		return fmt.Sprintf("%s/resourcelist-%s-%05d.xml", dir, p.at.UTC().Format(stampName), k+1)
	}
	header := func() manifest.Header {
		h := manifest.Header{Root: manifest.URLSet, Metadata: md, Links: []manifest.Link{up}}
		if !single {
			h.Links = append(h.Links, manifest.NewLink("index", p.url(indexRel)))
		}
		return h
	}
	var pw pageWriter
	defer pw.discard()
	if len(pg.pages) == 0 {
		if err := pw.start(p.g, pageRel(0), header()); err != nil {
			return "", err
		}
	}
	open := func(k int) error {
		if err := pw.end(); err != nil {
			return err
		}
		return pw.start(p.g, pageRel(k), header())
	}
	walk := func(fn func(state.Resource) error) error { return v.Resources(ctx, src, fn) }
	if err := writePages(walk, pg, &pw, open, p.resourceEntry, &p.res.Resources); err != nil {
		return "", err
	}
	if single {
		return p.url(pageRel(0)), nil
	}
	if err := p.index(indexRel, md, capURL, len(pg.pages), func(k int) manifest.Entry {
		return manifest.Entry{Loc: p.url(pageRel(k)), Metadata: manifest.NewMetadata()}
	}); err != nil {
		return "", err
	}
	return p.url(indexRel), nil
}

// index writes an index document of n entries.
func (p *publisher) index(rel string, md manifest.Metadata, capURL string, n int, entry func(k int) manifest.Entry) error {
	if n > p.o.MaxEntries {
		return errclass.Permanentf("publish: %s would list %d documents, more than %d", rel, n, p.o.MaxEntries)
	}
	var pw pageWriter
	defer pw.discard()
	if err := pw.start(p.g, rel, manifest.Header{Root: manifest.SitemapIndex, Metadata: md, Links: []manifest.Link{manifest.NewLink("up", capURL)}}); err != nil {
		return err
	}
	for k := range n {
		e := entry(k)
		if err := pw.w.Write(&e); err != nil {
			return err
		}
	}
	return pw.end()
}

// changeEntry is a change's entry in a Change List, republished (see
// republished): a change a later change of its resource superseded still
// names the copy, with the hash of the version it produced, which the copy
// no longer holds (a consumer applies only each resource's latest change).
func (p *publisher) changeEntry(c *state.ChangeRecord) manifest.Entry {
	e := changeMeta(c)
	p.republished(&e, c.URI)
	return e
}

// changeMeta is a change as an entry: its datetime is when the
// destination recorded it, which is when the published Source changed; its
// lastmod the last modification of the version it produced (as the origin
// gave it, else when it was fetched), or for a deletion and a change
// recorded before that was kept, when the change happened at the origin,
// else its datetime.
func changeMeta(c *state.ChangeRecord) manifest.Entry {
	lastmod := c.Lastmod
	for _, t := range []time.Time{c.Datetime, c.Recorded} {
		if lastmod.IsZero() {
			lastmod = t
		}
	}
	e := manifest.Entry{Loc: manifest.ToURI(c.URI), Lastmod: lastmod, Metadata: manifest.NewMetadata()}
	e.Metadata.Change, e.Metadata.Datetime = manifest.Change(c.Change), c.Recorded
	if c.Change != state.ChangeDeleted {
		e.Metadata.Hashes, e.Metadata.Length, e.Metadata.Type = c.Hashes, c.Length, c.Type
	}
	e.Links = manifestLinks(c.Links)
	return e
}

// changeLists writes a source's Change Lists, one per period with changes
// (split further where one would pass the document limits) and an open one
// for the current period, under a Change List Index whose URL it returns,
// with the newest change's stamp (zero: no change).
func (p *publisher) changeLists(ctx context.Context, v View, src, dir, capURL string) (string, time.Time, error) {
	period := p.o.ChangePeriod
	var (
		pg           *pager
		last, newest time.Time
	)
	add := func(c state.ChangeRecord) error {
		e := p.changeEntry(&c)
		per := c.Recorded.UTC().Truncate(period)
		pg.add(entryBound(&e), 0, per, c.Recorded, len(pg.pages) == 0 || !per.Equal(last))
		last = per
		if c.Recorded.After(newest) {
			newest = c.Recorded
		}
		return ctx.Err()
	}
	walk := func(fn func(state.ChangeRecord) error) error { return v.Changes(ctx, src, p.o.Copies, fn) }
	pg = p.newPager()
	if err := walk(add); err != nil {
		return "", time.Time{}, err
	}
	if cutoff, ok := recentCutoff(pg.pages, p.o.MaxEntries); ok {
		pg, walk = p.newPager(), since(walk, cutoff)
		if err := walk(add); err != nil {
			return "", time.Time{}, err
		}
	}
	p.newest = newest
	current := p.now.Truncate(period)
	if n := len(pg.pages); n == 0 || pg.pages[n-1].period.Before(current) && p.closed(pg.pages[n-1].period) {
		// The current period, open and so far empty (after the last
		// period with changes, when that one is closed).
		pg.pages = append(pg.pages, page{first: pg.i, period: current, from: current})
	}
	bounds := p.pageBounds(pg.pages)
	indexRel := dir + "/changelist-index.xml"
	pageRel := func(k int) string { return p.pageName(dir+"/changelist", pg.pages, k) + ".xml" }
	header := func(k int) manifest.Header {
		md := manifest.NewMetadata()
		md.Capability, md.From, md.Until = manifest.ChangeList, bounds[k][0], bounds[k][1]
		return manifest.Header{Root: manifest.URLSet, Metadata: md,
			Links: []manifest.Link{manifest.NewLink("up", capURL), manifest.NewLink("index", p.url(indexRel))}}
	}
	var pw pageWriter
	defer pw.discard()
	open := func(k int) error {
		if err := pw.end(); err != nil {
			return err
		}
		return pw.start(p.g, pageRel(k), header(k))
	}
	if err := writePages(walk, pg, &pw, open, p.changeEntry, &p.res.Changes); err != nil {
		return "", time.Time{}, err
	}
	md := manifest.NewMetadata()
	md.Capability, md.From = manifest.ChangeList, bounds[0][0]
	if err := p.index(indexRel, md, capURL, len(pg.pages), func(k int) manifest.Entry {
		e := manifest.Entry{Loc: p.url(pageRel(k)), Metadata: manifest.NewMetadata()}
		e.Metadata.From, e.Metadata.Until = bounds[k][0], bounds[k][1]
		return e
	}); err != nil {
		return "", time.Time{}, err
	}
	return p.url(indexRel), newest, nil
}

// recentCutoff says, of the pages of a log of changes, where to leave out
// the older ones when there are more than keep: at the start of the
// oldest period of which the newest keep pages hold every page. The older
// changes are not published (the index, or the Change Dump, then says
// from when its changes begin): a log of changes outgrows any one
// document, and a consumer away that long starts again from the Resource
// List. ok is false when nothing need be left out, or nothing can (the
// newest period alone has more pages).
func recentCutoff(pages []page, keep int) (cutoff time.Time, ok bool) {
	s := len(pages) - keep
	if s <= 0 {
		return time.Time{}, false
	}
	for s < len(pages) && pages[s-1].period.Equal(pages[s].period) {
		s++
	}
	if s == len(pages) {
		return time.Time{}, false
	}
	return pages[s].period, true
}

// since is walk with the changes recorded before cutoff left out.
func since(walk func(func(state.ChangeRecord) error) error, cutoff time.Time) func(func(state.ChangeRecord) error) error {
	return func(fn func(state.ChangeRecord) error) error {
		return walk(func(c state.ChangeRecord) error {
			if c.Recorded.Before(cutoff) {
				return nil
			}
			return fn(c)
		})
	}
}

// closed reports whether the period starting at per is closed: the
// source's newest change (p.newest) is stamped at or after its end. The
// state stamps a change after every change it holds of its source,
// whatever the clock says, so no change can be added to a closed period
// later — not even after a clock that ran ahead is set back, and however
// far behind the stamps the clock is: every period but the last is
// closed. A period no later change follows stays open.
func (p *publisher) closed(per time.Time) bool {
	return !per.Add(p.o.ChangePeriod).After(p.newest)
}

// pageBounds gives each page of changes its interval: the first page
// starts with its period and a later period's first page where the period
// before it ended, a page ends where the next page of its period starts,
// and the last page of a closed period with the period; the last page of
// an open period has no end.
func (p *publisher) pageBounds(pages []page) [][2]time.Time {
	bounds := make([][2]time.Time, len(pages))
	for k, pp := range pages {
		from := pp.from
		switch {
		case k == 0:
			from = pp.period
		case !pages[k-1].period.Equal(pp.period):
			// Where the previous period ended (it is closed: a later
			// one has changes), not where this one begins: a period
			// without changes has no list, and the lists stay contiguous.
			from = pages[k-1].period.Add(p.o.ChangePeriod)
		}
		var until time.Time
		switch {
		case k+1 < len(pages) && pages[k+1].period.Equal(pp.period):
			until = pages[k+1].from
		case p.closed(pp.period):
			until = pp.period.Add(p.o.ChangePeriod)
		}
		bounds[k] = [2]time.Time{from, until}
	}
	return bounds
}

// pageName names page k of changes: prefix, its period, and its number
// within the period after the first.
func (p *publisher) pageName(prefix string, pages []page, k int) string {
	name := prefix + "-" + pages[k].period.Format("20060102T150405Z")
	if j := k - firstOfPeriod(pages, k); j > 0 {
		name += fmt.Sprintf("-%d", j+1)
	}
	return name
}

// firstOfPeriod returns the index of the first page of page k's period.
func firstOfPeriod(pages []page, k int) int {
	for k > 0 && pages[k-1].period.Equal(pages[k].period) {
		k--
	}
	return k
}
