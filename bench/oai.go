package bench

import (
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The namespaces a synthetic OAI-PMH repository uses.
const (
	OAINamespace   = "http://www.openarchives.org/OAI/2.0/"
	OAIDCNamespace = "http://www.openarchives.org/OAI/2.0/oai_dc/"
	DCNamespace    = "http://purl.org/dc/elements/1.1/"
)

// OAIOptions describe a synthetic OAI-PMH 2.0 repository (OAIRepository):
// its records, and the habits of real servers it can take on.
type OAIOptions struct {
	// Records is how many records revision 0 holds (default 100).
	Records int
	// PageSize is how many records a list response holds (default 100).
	PageSize int
	// DayGranularity: datestamps to the day; an argument with a time of
	// day is a badArgument, as such servers answer.
	DayGranularity bool
	// IgnoreDates: from and until are ignored (every record is listed),
	// as some servers do.
	IgnoreDates bool
	// EmptyLastToken: the last page of a multi-page list carries an empty
	// <resumptionToken/> (otherwise none).
	EmptyLastToken bool
	// RootNamespaces: the metadata's namespaces are declared on the
	// envelope's root only.
	RootNamespaces bool
	// ControlChars: every 7th record's title holds characters XML 1.0
	// forbids.
	ControlChars bool
	// OneUseTokens: a resumption token answered once is expired:
	// asking again is a badResumptionToken.
	OneUseTokens bool
	// ForgetTokens: every 10th resumption token asked for is answered
	// badResumptionToken, as by a server that restarted and forgot its
	// tokens (asking with that token again would fail again).
	ForgetTokens bool
	// Gzip: responses are gzip-compressed without saying so.
	Gzip bool
	// Deflate: responses are compressed with deflate (zlib) and say so
	// (Content-Encoding: deflate), whatever the request accepts.
	Deflate bool
	// LoopTokens: every page after the first sends back the token of the
	// second page, so a harvester that follows tokens blindly never ends.
	LoopTokens bool
	// MalformedPages: the first page of every list (every window) is not
	// well-formed XML: its first record carries a character XML 1.0
	// forbids written as a character reference (<dc:description>&#x1A;
	// …), every time it is asked for; GetRecord answers the record
	// without it.
	MalformedPages bool
	// BrokenPages: the first page of every list holds a record whose XML
	// is broken beyond repair (an end tag that does not match), every
	// time it is asked for; GetRecord answers the record well-formed.
	BrokenPages bool
}

// OAIRepository is a deterministic synthetic OAI-PMH repository, served
// by its ServeHTTP as a data provider (every verb, resumption tokens
// holding '+', '/' and spaces, the errors of the protocol). It holds
// records with a history: revision 0 is the initial load; Advance moves
// it to revision 1, where every 5th record was updated, every 7th deleted
// (deleted records persist, as headers) and a tenth more were created.
// Record i is in set "parity:even" or "parity:odd", and "tens" when i is
// a multiple of 10.
type OAIRepository struct {
	o OAIOptions

	mu   sync.Mutex
	rev  int
	used map[string]bool
	// tokens counts the requests with a resumption token (ForgetTokens);
	// issued the tokens issued (OneUseTokens).
	tokens, issued int
}

// NewOAIRepository returns the repository o describes, at revision 0.
func NewOAIRepository(o OAIOptions) *OAIRepository {
	if o.Records <= 0 {
		o.Records = 100
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	return &OAIRepository{o: o, used: map[string]bool{}}
}

// oaiBase is the datestamp of record 0 at revision 0.
var oaiBase = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Advance moves the repository to its next revision (there are two).
func (r *OAIRepository) Advance() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rev = min(r.rev+1, 1)
}

// AdvanceAfter advances the repository (Advance) once d has passed,
// unless ctx ends first; it says whether it did.
func (r *OAIRepository) AdvanceAfter(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		r.Advance()
		return true
	}
}

// Now returns the repository's clock, the responseDate it answers with:
// after every datestamp of the current revision.
func (r *OAIRepository) Now() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now(r.rev)
}

func (r *OAIRepository) now(rev int) time.Time {
	t := oaiBase.Add(time.Duration(r.o.Records)*time.Minute + 24*time.Hour)
	if rev > 0 {
		t = t.AddDate(0, 0, 30)
	}
	return t
}

// OAIRecord is one record of the repository as a harvester should see it.
type OAIRecord struct {
	Identifier string
	Datestamp  time.Time
	Sets       []string
	Deleted    bool
	// Title is the record's dc:title, which tells its version.
	Title string
	// About is the record's about container's element ("": none).
	About string
}

// Records returns the records of the current revision, by identifier.
func (r *OAIRepository) Records() []OAIRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.records(r.rev)
}

func (r *OAIRepository) records(rev int) []OAIRecord {
	out := make([]OAIRecord, r.count(rev))
	for i := range out {
		out[i] = r.recordAt(rev, i)
	}
	return out
}

// count is how many records revision rev holds, deleted ones included.
func (r *OAIRepository) count(rev int) int {
	if rev > 0 {
		return r.o.Records + r.o.Records/10
	}
	return r.o.Records
}

// recordAt returns record i of revision rev (0 <= i < count(rev)),
// computed: a list request costs what its page holds, not the
// repository's size (see headAt).
func (r *OAIRepository) recordAt(rev, i int) OAIRecord {
	rec, version := r.headAt(rev, i)
	rec.Identifier = fmt.Sprintf(oaiIDFormat, i)
	if !rec.Deleted {
		rec.Title = fmt.Sprintf("Record %d, version %d", i, version)
		if r.o.ControlChars && i%7 == 3 {
			rec.Title += " \x01\x1f"
		}
		if i%3 == 0 {
			rec.About = fmt.Sprintf(`<provenance xmlns="%s"><originDescription harvestDate="%s" altered="false"><baseURL>http://origin.example/oai</baseURL><identifier>%s</identifier></originDescription></provenance>`,
				OAIProvenanceNamespace, oaiBase.Format("2006-01-02"), rec.Identifier)
		}
	}
	return rec
}

// headAt returns what a selective list asks of record i of revision rev
// (its datestamp, sets and whether it is deleted, in an OAIRecord with
// nothing else set) and its version: cheap, so that a list request
// skipping the records before its window (as a repository's index does)
// costs little next to the page it answers.
func (r *OAIRepository) headAt(rev, i int) (rec OAIRecord, version int) {
	changed := r.now(0).Add(24 * time.Hour)
	rec.Datestamp = oaiBase.Add(time.Duration(i) * time.Minute)
	switch {
	case i >= r.o.Records: // created in revision 1
		rec.Datestamp = changed.Add(time.Duration(i) * time.Second)
	case rev > 0 && i%7 == 0:
		rec.Deleted, rec.Datestamp = true, changed.Add(time.Duration(i)*time.Second)
	case rev > 0 && i%5 == 0:
		version, rec.Datestamp = 1, changed.Add(time.Duration(i)*time.Second)
	}
	if r.o.DayGranularity {
		rec.Datestamp = rec.Datestamp.Truncate(24 * time.Hour)
	}
	rec.Sets = []string{"parity:odd"}
	if i%2 == 0 {
		rec.Sets[0] = "parity:even"
	}
	if i%10 == 0 {
		rec.Sets = append(rec.Sets, "tens")
	}
	return rec, version
}

// OAIProvenanceNamespace is the namespace of the provenance about
// containers the repository's records carry (every third record).
const OAIProvenanceNamespace = "http://www.openarchives.org/OAI/2.0/provenance"

// oaiIDFormat makes record i's identifier.
const oaiIDFormat = "oai:rsharvest.example:%07d"

// ServeHTTP answers an OAI-PMH request (GET or POST).
func (r *OAIRepository) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := req.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	rev := r.rev
	resp := r.answer(req.Form, rev)
	r.mu.Unlock()
	var out io.Writer = w
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	switch {
	case r.o.Gzip:
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	case r.o.Deflate:
		w.Header().Set("Content-Encoding", "deflate")
		zw := zlib.NewWriter(w)
		defer zw.Close()
		out = zw
	}
	base := "http://" + req.Host + req.URL.Path
	decls := ""
	if r.o.RootNamespaces {
		decls = ` xmlns:oai_dc="` + OAIDCNamespace + `" xmlns:dc="` + DCNamespace + `"`
	}
	fmt.Fprintf(out, `<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="%s" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"%s xsi:schemaLocation="%s http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd">
<responseDate>%s</responseDate>
`, OAINamespace, decls, OAINamespace, r.now(rev).Format(time.RFC3339))
	fmt.Fprintf(out, "<request%s>%s</request>\n", resp.request, xmlText(base))
	out.Write([]byte(strings.ReplaceAll(resp.body, "BASEURL", xmlText(base))))
	fmt.Fprint(out, "\n</OAI-PMH>\n")
}

// oaiAnswer is the part of a response that depends on the request.
type oaiAnswer struct {
	request string // the request element's attributes
	body    string
}

func oaiError(code, msg string) oaiAnswer {
	return oaiAnswer{body: fmt.Sprintf(`<error code="%s">%s</error>`, code, xmlText(msg))}
}

// answer builds the answer to args at revision rev; r.mu is held.
func (r *OAIRepository) answer(args map[string][]string, rev int) oaiAnswer {
	get := func(k string) string {
		if v := args[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	for k, v := range args {
		if len(v) > 1 {
			return oaiError("badArgument", "repeated argument "+k)
		}
	}
	verb := get("verb")
	var attrs strings.Builder
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&attrs, ` %s="%s"`, k, xmlText(get(k)))
	}
	var a oaiAnswer
	switch verb {
	case "Identify":
		gran := "YYYY-MM-DDThh:mm:ssZ"
		if r.o.DayGranularity {
			gran = "YYYY-MM-DD"
		}
		a.body = fmt.Sprintf(`<Identify><repositoryName>rsharvest synthetic repository</repositoryName><baseURL>BASEURL</baseURL>`+
			`<protocolVersion>2.0</protocolVersion><adminEmail>admin@rsharvest.example</adminEmail><earliestDatestamp>%s</earliestDatestamp>`+
			`<deletedRecord>persistent</deletedRecord><granularity>%s</granularity></Identify>`, r.stamp(oaiBase), gran)
	case "ListMetadataFormats":
		a.body = `<ListMetadataFormats><metadataFormat><metadataPrefix>oai_dc</metadataPrefix>` +
			`<schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</schema><metadataNamespace>` + OAIDCNamespace + `</metadataNamespace></metadataFormat></ListMetadataFormats>`
	case "ListSets":
		a.body = `<ListSets><set><setSpec>parity</setSpec><setName>Parity</setName></set><set><setSpec>parity:even</setSpec><setName>Even</setName></set>` +
			`<set><setSpec>parity:odd</setSpec><setName>Odd</setName></set><set><setSpec>tens</setSpec><setName>Multiples of ten</setName></set></ListSets>`
	case "GetRecord":
		if get("metadataPrefix") != "oai_dc" {
			return oaiError("cannotDisseminateFormat", "only oai_dc")
		}
		var i int
		if _, err := fmt.Sscanf(get("identifier"), oaiIDFormat, &i); err != nil || i < 0 || i >= r.count(rev) || fmt.Sprintf(oaiIDFormat, i) != get("identifier") {
			return oaiError("idDoesNotExist", get("identifier"))
		}
		a.body = "<GetRecord>" + r.record(r.recordAt(rev, i), true) + "</GetRecord>"
	case "ListRecords", "ListIdentifiers":
		var err oaiAnswer
		if a.body, err = r.list(verb, get, rev); a.body == "" {
			return err
		}
	default:
		return oaiError("badVerb", "no such verb: "+verb)
	}
	a.request = attrs.String()
	return a
}

// list answers ListRecords and ListIdentifiers. A token holds the index
// of the next matching record, so a page costs what it holds (and the
// records it skips), never the whole repository; completeListSize and
// cursor, optional, are not sent.
func (r *OAIRepository) list(verb string, get func(string) string, rev int) (string, oaiAnswer) {
	prefix, from, until, set, start := get("metadataPrefix"), get("from"), get("until"), get("set"), 0
	if tok := get("resumptionToken"); tok != "" {
		if prefix != "" || from != "" || until != "" || set != "" {
			return "", oaiError("badArgument", "resumptionToken is exclusive")
		}
		var ok bool
		r.tokens++
		if start, prefix, from, until, set, ok = parseOAIToken(tok); !ok || (r.o.OneUseTokens && r.used[tok]) || (r.o.ForgetTokens && r.tokens%10 == 0) {
			return "", oaiError("badResumptionToken", "expired or unknown: "+tok)
		}
		r.used[tok] = true
	}
	if prefix != "oai_dc" {
		return "", oaiError("cannotDisseminateFormat", "only oai_dc")
	}
	lo, hi, ok := r.bounds(from, until)
	if !ok {
		return "", oaiError("badArgument", "from or until not in the repository's granularity")
	}
	match := func(rec OAIRecord) bool {
		if set != "" && !slices.ContainsFunc(rec.Sets, func(s string) bool { return s == set || strings.HasPrefix(s, set+":") }) {
			return false
		}
		return r.o.IgnoreDates || ((lo.IsZero() || !rec.Datestamp.Before(lo)) && (hi.IsZero() || !rec.Datestamp.After(hi)))
	}
	// scan returns the page of matches from index from on, and the index
	// of the match after it (-1: none).
	scan := func(from int) (page []OAIRecord, next int) {
		for i := from; i < r.count(rev); i++ {
			if head, _ := r.headAt(rev, i); match(head) {
				if len(page) == r.o.PageSize {
					return page, i
				}
				page = append(page, r.recordAt(rev, i))
			}
		}
		return page, -1
	}
	page, next := scan(start)
	if len(page) == 0 {
		return "", oaiError("noRecordsMatch", "no record matches")
	}
	var b strings.Builder
	b.WriteString("<" + verb + ">")
	firstPage := get("resumptionToken") == ""
	for k, rec := range page {
		switch {
		case verb == "ListIdentifiers":
			b.WriteString(r.header(rec))
		case firstPage && k == 0 && !rec.Deleted && r.o.MalformedPages:
			b.WriteString(strings.Replace(r.record(rec, false), "</oai_dc:dc>", "<dc:description>flawed &#x1A; &#26;</dc:description></oai_dc:dc>", 1))
		case firstPage && k == len(page)/2 && !rec.Deleted && r.o.BrokenPages:
			b.WriteString(strings.Replace(r.record(rec, false), "</oai_dc:dc>", "<dc:description>broken</dc:descriptio></oai_dc:dc>", 1))
		default:
			b.WriteString(r.record(rec, false))
		}
	}
	switch {
	case next >= 0:
		if r.o.LoopTokens && start > 0 {
			_, next = scan(0) // the second page's token, again
		}
		head := strconv.Itoa(next)
		if r.o.OneUseTokens {
			// Each token issued is a new one, as such servers' are.
			r.issued++
			head += "." + strconv.Itoa(r.issued)
		}
		tok := fmt.Sprintf("%s+%s/%s %s %s", head, prefix, orDash(from), orDash(until), orDash(set))
		fmt.Fprintf(&b, `<resumptionToken>%s</resumptionToken>`, xmlText(tok))
	case start > 0 && r.o.EmptyLastToken:
		b.WriteString(`<resumptionToken/>`)
	}
	b.WriteString("</" + verb + ">")
	return b.String(), oaiAnswer{}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseOAIToken reads a token list made: "offset+prefix/from until set",
// the offset followed by ".serial" for one-use tokens.
func parseOAIToken(tok string) (offset int, prefix, from, until, set string, ok bool) {
	head, rest, ok1 := strings.Cut(tok, "+")
	head, _, _ = strings.Cut(head, ".")
	prefix, rest, ok2 := strings.Cut(rest, "/")
	f := strings.Split(rest, " ")
	n, err := strconv.Atoi(head)
	if !ok1 || !ok2 || len(f) != 3 || err != nil || n < 0 {
		return 0, "", "", "", "", false
	}
	undash := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	return n, prefix, undash(f[0]), undash(f[1]), undash(f[2]), true
}

// bounds parses from and until in the repository's granularity; until
// at day granularity covers its whole day.
func (r *OAIRepository) bounds(from, until string) (lo, hi time.Time, ok bool) {
	parse := func(s string) (time.Time, bool) {
		if s == "" {
			return time.Time{}, true
		}
		if t, err := time.Parse("2006-01-02", s); err == nil {
			return t, true
		}
		if r.o.DayGranularity {
			return time.Time{}, false
		}
		t, err := time.Parse("2006-01-02T15:04:05Z", s)
		return t, err == nil
	}
	var ok1, ok2 bool
	lo, ok1 = parse(from)
	hi, ok2 = parse(until)
	if ok2 && len(until) == len("2006-01-02") {
		hi = hi.Add(24*time.Hour - time.Second)
	}
	return lo, hi, ok1 && ok2
}

func (r *OAIRepository) stamp(t time.Time) string {
	if r.o.DayGranularity {
		return t.Format("2006-01-02")
	}
	return t.Format("2006-01-02T15:04:05Z")
}

func (r *OAIRepository) header(rec OAIRecord) string {
	var b strings.Builder
	b.WriteString("<header")
	if rec.Deleted {
		b.WriteString(` status="deleted"`)
	}
	fmt.Fprintf(&b, "><identifier>%s</identifier><datestamp>%s</datestamp>", rec.Identifier, r.stamp(rec.Datestamp))
	for _, s := range rec.Sets {
		fmt.Fprintf(&b, "<setSpec>%s</setSpec>", s)
	}
	b.WriteString("</header>")
	return b.String()
}

// record writes a record; single: as GetRecord answers it.
func (r *OAIRepository) record(rec OAIRecord, single bool) string {
	var b strings.Builder
	b.WriteString("<record>" + r.header(rec))
	if !rec.Deleted {
		decls := ` xmlns:oai_dc="` + OAIDCNamespace + `" xmlns:dc="` + DCNamespace + `"`
		if r.o.RootNamespaces && !single {
			decls = ""
		}
		fmt.Fprintf(&b, `<metadata><oai_dc:dc%s><dc:title>%s</dc:title><dc:identifier>%s</dc:identifier><dc:date>%s</dc:date></oai_dc:dc></metadata>`,
			decls, xmlTextKeepControls(rec.Title), rec.Identifier, rec.Datestamp.Format("2006-01-02"))
		if rec.About != "" {
			b.WriteString("<about>" + rec.About + "</about>")
		}
	}
	b.WriteString("</record>")
	return b.String()
}

// xmlText escapes s for XML character data and attribute values.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// xmlTextKeepControls escapes s but keeps the control characters XML
// forbids, as the servers that send them do.
func xmlTextKeepControls(s string) string {
	var b strings.Builder
	for _, part := range strings.SplitAfter(s, "") {
		if len(part) == 1 && part[0] < 0x20 {
			b.WriteString(part)
			continue
		}
		xml.EscapeText(&b, []byte(part))
	}
	return b.String()
}

// oaiQuirk is a habit of OAIOptions SetQuirks takes: its name and the
// field it turns on.
type oaiQuirk struct {
	name string
	on   func(*OAIOptions) *bool
}

// oaiQuirks are the habits SetQuirks takes.
var oaiQuirks = []oaiQuirk{
	{"day-granularity", func(o *OAIOptions) *bool { return &o.DayGranularity }},
	{"ignore-dates", func(o *OAIOptions) *bool { return &o.IgnoreDates }},
	{"empty-last-token", func(o *OAIOptions) *bool { return &o.EmptyLastToken }},
	{"root-namespaces", func(o *OAIOptions) *bool { return &o.RootNamespaces }},
	{"control-chars", func(o *OAIOptions) *bool { return &o.ControlChars }},
	{"one-use-tokens", func(o *OAIOptions) *bool { return &o.OneUseTokens }},
	{"forget-tokens", func(o *OAIOptions) *bool { return &o.ForgetTokens }},
	{"gzip", func(o *OAIOptions) *bool { return &o.Gzip }},
	{"deflate", func(o *OAIOptions) *bool { return &o.Deflate }},
	{"loop-tokens", func(o *OAIOptions) *bool { return &o.LoopTokens }},
	{"malformed-page", func(o *OAIOptions) *bool { return &o.MalformedPages }},
	{"broken-page", func(o *OAIOptions) *bool { return &o.BrokenPages }},
}

// OAIQuirks names the server habits SetQuirks takes.
func OAIQuirks() []string {
	names := make([]string, len(oaiQuirks))
	for i, q := range oaiQuirks {
		names[i] = q.name
	}
	return names
}

// SetQuirks turns on the habits named in list, comma-separated (see
// OAIQuirks; "" for none).
func (o *OAIOptions) SetQuirks(list string) error {
	for _, q := range strings.Split(list, ",") {
		name := strings.TrimSpace(q)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(oaiQuirks, func(k oaiQuirk) bool { return k.name == name })
		if i < 0 {
			return fmt.Errorf("no server habit %q (want some of %s)", q, strings.Join(OAIQuirks(), ", "))
		}
		*oaiQuirks[i].on(o) = true
	}
	return nil
}

// OAIServer serves an OAIRepository on loopback, at BaseURL.
type OAIServer struct {
	// BaseURL is the repository's base URL (the server's URL + "oai").
	BaseURL string
	srv     *http.Server
	served  chan struct{}
}

// ServeOAI serves repo on addr ("127.0.0.1:0" when empty; loopback only)
// at the path /oai, each request through wrap when it is set (fault
// injection, latency), until ctx is done or Close is called.
func ServeOAI(ctx context.Context, repo *OAIRepository, addr string, wrap func(http.Handler) http.Handler) (*OAIServer, error) {
	ln, err := listen(ctx, addr, false)
	if err != nil {
		return nil, err
	}
	var h http.Handler = repo
	if wrap != nil {
		h = wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle("/oai", h)
	s := &OAIServer{BaseURL: "http://" + ln.Addr().String() + "/oai", served: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.served)
		s.srv.Serve(ln)
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.served:
		}
	}()
	return s, nil
}

// Close stops the server and waits for it to stop.
func (s *OAIServer) Close() error {
	err := s.srv.Close()
	<-s.served
	return err
}
