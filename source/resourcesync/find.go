package resourcesync

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/manifest"
)

// sniffLen is how many leading bytes tell an HTML page from XML.
const sniffLen = 512

// doc is one fetched URL, as far as discovery read it.
type doc struct {
	url  string   // as requested: the key of the walk
	base *url.URL // the final URL after redirects, for relative references
	// err is set when the document could not be fetched.
	err error
	// header is set for a ResourceSync document.
	header *manifest.Header
	// entries are those of a Source Description, Capability List or index
	// (at most Options.MaxDocuments).
	entries []*manifest.Entry
	// html is set for an HTML page; notRS says why an XML (or other)
	// document is not ResourceSync.
	html  bool
	notRS string
	// htmlLinks and headerLinks are the absolute targets of rel="resourcesync"
	// links in the page and in the response's Link header.
	htmlLinks, headerLinks []string
}

// capability returns the root rs:md capability, "" if not ResourceSync.
func (d *doc) capability() manifest.Capability {
	if d.header == nil {
		return ""
	}
	return d.header.Metadata.Capability
}

// usable reports whether discovery can start from d: a Source Description,
// Capability List or capability document (not a package manifest).
func (d *doc) usable() bool { return level(d.capability()) > 0 }

// what describes d for messages: "a resourcedump index", "an HTML page…".
func (d *doc) what() string {
	switch {
	case d.err != nil:
		return d.err.Error()
	case d.header != nil && d.header.IsIndex():
		return fmt.Sprintf("a %s index", d.capability())
	case d.header != nil:
		return fmt.Sprintf("a %s document", d.capability())
	case d.html:
		return `an HTML page without <link rel="resourcesync">`
	}
	return d.notRS
}

// why says why d cannot start discovery, naming its URL.
func (d *doc) why() string {
	if d.err != nil {
		return d.err.Error()
	}
	return d.url + " is " + d.what()
}

// level places a capability in the tree: 3 for the Source Description, 2
// for a Capability List, 1 for a capability document, 0 for anything else
// (package manifests, unknown capabilities).
func level(c manifest.Capability) int {
	switch c {
	case manifest.Description:
		return 3
	case manifest.CapabilityList:
		return 2
	case manifest.ResourceList, manifest.ResourceDump, manifest.ChangeList, manifest.ChangeDump:
		return 1
	}
	return 0
}

// isChange reports whether a capability grows over time (no until: open).
func isChange(c manifest.Capability) bool {
	return c == manifest.ChangeList || c == manifest.ChangeDump
}

// finder holds the state of one Discover call (or locate): it finds a
// source's documents and climbs to the top; the tree below is read by
// the planner's walk (see survey.go).
type finder struct {
	client   *fetch.Client
	opts     Options
	log      *slog.Logger
	docs     map[string]*doc // every URL fetched, by requested URL
	fetched  int
	warnings []string
}

// warnf records a warning once.
func (w *finder) warnf(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	for _, m := range w.warnings {
		if m == msg {
			return
		}
	}
	w.warnings = append(w.warnings, msg)
	w.log.Debug("discovery: " + msg)
}

// found is a ResourceSync document discovery starts its walk from.
type found struct {
	d   *doc
	how string
}

// site looks for a bare site's ResourceSync documents: the well-known URI,
// robots.txt, then the home page's links.
func (w *finder) site(ctx context.Context, start *url.URL) ([]found, error) {
	root := &url.URL{Scheme: start.Scheme, Host: start.Host, Path: "/"}
	var tried []string
	retry := false
	note := func(s string, err error) {
		tried = append(tried, s)
		retry = retry || errclass.IsRetryable(err)
	}

	wk := root.JoinPath(".well-known", "resourcesync").String()
	d := w.load(ctx, wk)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.usable() {
		return []found{{d, FoundWellKnown}}, nil
	}
	note(d.why(), d.err)

	robots := root.JoinPath("robots.txt").String()
	sitemaps, err := w.robots(ctx, robots)
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	var fs []found
	var skipped []string
	for _, sm := range sitemaps {
		d := w.load(ctx, sm)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d.usable() {
			fs = append(fs, found{d, FoundRobots})
			continue
		}
		w.log.Debug("discovery: robots.txt sitemap skipped", "url", sm, "reason", d.what())
		skipped = append(skipped, d.why())
		retry = retry || errclass.IsRetryable(d.err)
	}
	if len(fs) > 0 {
		return fs, nil
	}
	switch {
	case err != nil:
		note(err.Error(), err)
	case len(sitemaps) == 0:
		note(robots+" has no Sitemap: line", nil)
	default:
		note(fmt.Sprintf("%s lists no ResourceSync document (%s)", robots, strings.Join(skipped, "; ")), nil)
	}

	home := root.String()
	d = w.load(ctx, home)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.usable() {
		return []found{{d, FoundGiven}}, nil
	}
	fs, why, lretry := w.follow(ctx, d)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(fs) > 0 {
		return fs, nil
	}
	note(why, d.err)
	return nil, notFound(expectedSite, tried, retry || lretry)
}

// given looks for the ResourceSync documents of a URL that is not a bare
// site: the document itself, or what its page or Link header points at.
func (w *finder) given(ctx context.Context, start string) ([]found, error) {
	d := w.load(ctx, start)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.err != nil {
		// d.err names start (fetch errors name the URL requested).
		err := fmt.Errorf("%w: %w", ErrNotFound, d.err)
		if errclass.IsRetryable(d.err) {
			return nil, errclass.NewRetryable(err)
		}
		return nil, errclass.NewPermanent(err)
	}
	if d.usable() {
		return []found{{d, FoundGiven}}, nil
	}
	fs, why, retry := w.follow(ctx, d)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(fs) > 0 {
		return fs, nil
	}
	return nil, notFound(expectedDoc, []string{why}, retry)
}

// follow reads the rel="resourcesync" targets of d's page, then of its
// Link header, and returns the usable ones. When there are none, why says
// what d and its targets were, and retry whether a request failed
// temporarily.
func (w *finder) follow(ctx context.Context, d *doc) (fs []found, why string, retry bool) {
	var bad []string
	n := 0
	for _, set := range []struct {
		targets []string
		how     string
	}{{d.htmlLinks, FoundHTMLLink}, {d.headerLinks, FoundLinkHeader}} {
		for _, t := range set.targets {
			if t == d.url || n >= maxLinkTargets {
				continue
			}
			n++
			td := w.load(ctx, t)
			if ctx.Err() != nil {
				return nil, "", false
			}
			if td.usable() {
				fs = append(fs, found{td, set.how})
				continue
			}
			bad = append(bad, td.why())
			retry = retry || errclass.IsRetryable(td.err)
		}
	}
	if len(fs) > 0 {
		return fs, "", false
	}
	why = d.why()
	if d.err == nil && n > 0 {
		why = fmt.Sprintf("%s is %s whose rel=\"resourcesync\" links lead to no usable document (%s)", d.url, d.kindOfPage(), strings.Join(bad, "; "))
	}
	return nil, why, retry
}

// kindOfPage names what carried links: an HTML page or another response.
func (d *doc) kindOfPage() string {
	if d.html {
		return "an HTML page"
	}
	return "a response"
}

// robots reads the Sitemap: lines of a robots.txt. A robots.txt that
// cannot be read yields an error naming it; one without Sitemap: lines,
// nothing.
func (w *finder) robots(ctx context.Context, robotsURL string) ([]string, error) {
	if w.fetched >= w.opts.MaxDocuments {
		return nil, w.limitError(robotsURL)
	}
	w.fetched++
	w.log.Debug("discovery: reading", "url", robotsURL)
	body, err := w.client.Open(ctx, robotsURL)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	page, err := io.ReadAll(io.LimitReader(body, MaxPageBytes))
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(body.URL)
	if err != nil {
		return nil, errclass.Permanentf("%s: %w", robotsURL, err)
	}
	sm := robotsSitemaps(string(page), base)
	if len(sm) > w.opts.MaxDocuments {
		w.warnf("%s lists more than %d sitemaps; the rest are ignored", robotsURL, w.opts.MaxDocuments)
		sm = sm[:w.opts.MaxDocuments]
	}
	return sm, nil
}

// limitError is the error of a document not read because of MaxDocuments.
func (w *finder) limitError(u string) error {
	w.warnf("stopped reading documents after %d (Options.MaxDocuments)", w.opts.MaxDocuments)
	return errclass.Permanentf("%s: not read: the limit of %d documents was reached", u, w.opts.MaxDocuments)
}

// load returns the document at rawURL, fetching it on first use.
func (w *finder) load(ctx context.Context, rawURL string) *doc {
	if d, ok := w.docs[rawURL]; ok {
		return d
	}
	d := &doc{url: rawURL}
	if w.fetched >= w.opts.MaxDocuments {
		d.err = w.limitError(rawURL)
		return d
	}
	w.fetched++
	w.docs[rawURL] = d
	w.read(ctx, d)
	w.log.Debug("discovery: read", "url", rawURL, "is", d.what())
	return d
}

// read fetches d and reads what discovery needs of it: the header of a
// ResourceSync document (and the entries of a description, capability list
// or index), the links of an HTML page, the Link header of any response.
func (w *finder) read(ctx context.Context, d *doc) {
	body, err := w.client.Open(ctx, d.url)
	if err != nil {
		d.err = err
		return
	}
	defer body.Close()
	if d.base, err = url.Parse(body.URL); err != nil {
		d.err = errclass.Permanentf("%s: %w", d.url, err)
		return
	}
	d.headerLinks = linkHeaderTargets(body.Header.Values("Link"), d.base)
	if err := body.Limit(w.opts.MaxDocumentSize); err != nil {
		d.err = err
		return
	}
	// A document may come gzip-compressed (a sitemap.xml.gz, or
	// Content-Encoding sent unasked); the cap applies to what it holds.
	in, err := fetch.DecodeDocument(body, d.url, body.Header.Get("Content-Encoding"), w.opts.MaxDocumentSize)
	if err != nil {
		d.err = err
		return
	}
	br := bufio.NewReaderSize(in, 64<<10)
	peek, err := br.Peek(sniffLen)
	if err != nil && err != io.EOF {
		d.err = err
		return
	}
	if isHTML(body.ContentType, peek) {
		d.html = true
		page, err := io.ReadAll(io.LimitReader(br, MaxPageBytes))
		if err != nil {
			d.err = err
			return
		}
		d.htmlLinks = htmlTargets(page, d.base)
		return
	}
	rd, err := manifest.NewReader(br, manifest.Options{Logger: w.log})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		d.err = ctx.Err()
		return
	case errors.Is(err, manifest.ErrNotResourceSync):
		d.notRS = "not a ResourceSync document (" + detail(err, manifest.ErrNotResourceSync) + ")"
		return
	case errors.Is(err, manifest.ErrMalformed):
		d.notRS = "not a well-formed XML document (" + detail(err, manifest.ErrMalformed) + ")"
		return
	default:
		d.err = errclass.About(d.url, err)
		return
	}
	h := rd.Header()
	d.header = &h
	if level(h.Metadata.Capability) >= 2 || h.IsIndex() {
		w.readEntries(ctx, d, rd)
	}
}

// readEntries reads up to MaxDocuments entries of d. Malformed entries and
// a document broken midway are reported; the entries before are kept.
func (w *finder) readEntries(ctx context.Context, d *doc, rd *manifest.Reader) {
	for {
		if len(d.entries) >= w.opts.MaxDocuments {
			w.warnf("%s lists more than %d documents; the rest are ignored", d.url, w.opts.MaxDocuments)
			return
		}
		e, err := rd.Next()
		if err == io.EOF {
			return
		}
		var ee *manifest.EntryError
		switch {
		case err == nil:
			d.entries = append(d.entries, e)
		case ctx.Err() != nil:
			return
		case errors.As(err, &ee):
			w.warnf("%s: %v (entry skipped)", d.url, err)
		default:
			w.warnf("%s: %v (read %d entries before)", d.url, err, len(d.entries))
			return
		}
	}
}

// isHTML tells an HTML page by its Content-Type or, when that says
// neither HTML nor XML, by its first bytes. A document whose first bytes
// hold a sitemap root and no <html> is XML whatever its Content-Type says.
func isHTML(contentType string, peek []byte) bool {
	lp := asciiLower(string(peek))
	if (strings.Contains(lp, "<urlset") || strings.Contains(lp, "<sitemapindex")) && !strings.Contains(lp, "<html") {
		return false
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "text/html", mt == "application/xhtml+xml":
		return true
	case mt == "application/xml", mt == "text/xml", strings.HasSuffix(mt, "+xml"):
		return false
	}
	return strings.HasPrefix(http.DetectContentType(peek), "text/html")
}

// reach is where the climb from one document ended.
type reach struct {
	desc, caplist *doc
	// capdoc is the highest capability document below any capability list.
	capdoc *doc
	// parent is the unusable target of capdoc's up link, when caplist is nil.
	parent string
}

// climb follows up links (or, without one, an index link or the
// rel="resourcesync" Link header) from d as far as the Source Description.
func (w *finder) climb(ctx context.Context, d *doc) reach {
	var r reach
	seen := map[string]bool{d.url: true}
	cur := d
	for step := 0; ; step++ {
		switch level(cur.capability()) {
		case 3:
			r.desc = cur
			return r
		case 2:
			r.caplist = cur
		default:
			r.capdoc = cur
		}
		next, rel := w.parentOf(cur)
		switch {
		case next == "":
			return r
		case step >= w.opts.MaxDepth:
			w.warnf("stopped following up links at %s after %d steps", cur.url, w.opts.MaxDepth)
			return r
		case seen[next]:
			w.warnf("link loop: the %s link of %s leads back to %s; not followed again", rel, cur.url, next)
			return r
		}
		seen[next] = true
		p := w.load(ctx, next)
		if ctx.Err() != nil {
			return r
		}
		if !p.usable() {
			w.warnf("%s: its %s link cannot be followed: %s", cur.url, rel, p.why())
			if r.caplist == nil && rel != "index" {
				r.parent = next
			}
			return r
		}
		if !fits(cur, p, rel) {
			w.warnf("%s: its %s link leads to %s (%s), which is not above it; not followed", cur.url, rel, p.what(), next)
			return r
		}
		cur = p
	}
}

// parentOf returns the URL of the document above d and the kind of link
// that says so: rs:ln up, else rs:ln index, else an HTTP Link header with
// rel="resourcesync".
func (w *finder) parentOf(d *doc) (string, string) {
	for _, rel := range []string{"up", "index"} {
		if l, ok := d.header.Link(rel); ok {
			if u, ok := resolve(d.base, l.Href); ok {
				return u, rel
			}
			w.warnf("%s: its %s link %q is not a usable http(s) URL", d.url, rel, l.Href)
			return "", ""
		}
	}
	if len(d.headerLinks) > 0 && d.capability() != manifest.Description {
		return d.headerLinks[0], `Link header rel="resourcesync"`
	}
	return "", ""
}

// fits reports whether p may sit above cur: an index of the same
// capability for an index link, a higher level otherwise.
func fits(cur, p *doc, rel string) bool {
	if rel == "index" {
		return p.header.IsIndex() && p.capability() == cur.capability()
	}
	return level(p.capability()) > level(cur.capability())
}

// setPlan is a resource set to read.
type setPlan struct {
	url         string // the Capability List, "" for none
	describedby string
	orphans     []*doc // capability documents found without a readable capability list
}

// build climbs from every document found and reads the tree down.
func (w *finder) build(ctx context.Context, start string, fs []found) (*Source, error) {
	s := &Source{Start: start, Found: fs[0].how}
	var desc *doc
	var plans []*setPlan
	byURL := map[string]*setPlan{}
	orphanSeen := map[string]bool{}
	for _, f := range fs {
		r := w.climb(ctx, f.d)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch {
		case r.desc == nil:
		case desc == nil:
			desc = r.desc
		case r.desc.url != desc.url:
			w.warnf("%s leads to a second Source Description %s; %s is used", f.d.url, r.desc.url, desc.url)
		}
		switch {
		case r.caplist != nil:
			if byURL[r.caplist.url] == nil {
				p := &setPlan{url: r.caplist.url}
				byURL[p.url] = p
				plans = append(plans, p)
			}
		case r.capdoc != nil && !orphanSeen[r.capdoc.url]:
			orphanSeen[r.capdoc.url] = true
			if p := byURL[r.parent]; p != nil && r.parent != "" {
				p.orphans = append(p.orphans, r.capdoc)
				continue
			}
			p := &setPlan{url: r.parent, orphans: []*doc{r.capdoc}}
			if p.url != "" {
				byURL[p.url] = p
			}
			plans = append(plans, p)
		}
	}
	if desc != nil {
		s.Description = desc.url
		if s.Found == FoundGiven && fs[0].d != desc {
			s.Found = FoundUpLinks
		}
		plans = w.describedSets(desc, plans, byURL)
	}
	for _, p := range plans {
		st := w.set(ctx, desc, p)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.Sets = append(s.Sets, st)
	}
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.describedby
	}
	nameSets(s.Sets, names)
	w.checkReached(s, fs)
	s.Warnings = w.warnings
	return s, nil
}

// describedSets returns the sets of the Source Description in its order,
// then the other sets reached (with a warning each).
func (w *finder) describedSets(desc *doc, reached []*setPlan, byURL map[string]*setPlan) []*setPlan {
	var plans []*setPlan
	listed := map[string]bool{}
	for _, e := range desc.entries {
		if c := e.Metadata.Capability; c != "" && c != manifest.CapabilityList {
			w.warnf("%s lists %s as a %s, expected a capabilitylist; skipped", desc.url, e.Loc, c)
			continue
		}
		u, ok := w.resolveLoc(desc, e.Loc)
		if !ok {
			continue
		}
		if listed[u] {
			w.warnf("%s lists %s twice", desc.url, u)
			continue
		}
		listed[u] = true
		p := byURL[u]
		if p == nil {
			p = &setPlan{url: u}
		}
		if l, ok := e.Link("describedby"); ok {
			p.describedby = l.Href
		}
		plans = append(plans, p)
	}
	for _, p := range reached {
		if !listed[p.url] {
			if p.url != "" {
				w.warnf("capability list %s is not listed in the Source Description %s", p.url, desc.url)
			}
			plans = append(plans, p)
		}
	}
	return plans
}

// resolveLoc resolves an entry's <loc> against its document, reporting an
// unusable one.
func (w *finder) resolveLoc(d *doc, loc string) (string, bool) {
	u, ok := resolve(d.base, loc)
	if !ok {
		w.warnf("%s: entry %q is not a usable http(s) URL; skipped", d.url, loc)
	}
	return u, ok
}

// checkReached warns about documents discovery started from that the tree
// read down does not contain.
func (w *finder) checkReached(s *Source, fs []found) {
	in := map[string]bool{s.Description: true}
	var mark func([]Capability)
	mark = func(cs []Capability) {
		for _, c := range cs {
			in[c.URL] = true
			mark(c.Children)
		}
	}
	for _, st := range s.Sets {
		in[st.CapabilityList] = true
		mark(st.Capabilities)
	}
	for _, f := range fs {
		if !in[f.d.url] {
			w.warnf("%s is not in the tree read down from %s", f.d.url, orNone(s.Description, "its capability list"))
		}
	}
}

func orNone(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// resolve resolves ref against base and returns it when it is an absolute
// http(s) URL, without fragment.
func resolve(base *url.URL, ref string) (string, bool) {
	r, err := url.Parse(strings.TrimSpace(ref))
	if err != nil {
		return "", false
	}
	if base != nil {
		r = base.ResolveReference(r)
	}
	if s := strings.ToLower(r.Scheme); (s != "http" && s != "https") || r.Host == "" {
		return "", false
	}
	r.Fragment, r.RawFragment = "", ""
	return r.String(), true
}

// detail returns what err's message says after sentinel's own words, so
// that a message built around it does not say them twice ("not a
// ResourceSync document (line 1: …)", not "(manifest: malformed document:
// not a ResourceSync document: line 1: …)"); the whole message when they
// are not in it.
func detail(err, sentinel error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, sentinel.Error()+": "); ok && after != "" {
		return after
	}
	return msg
}
