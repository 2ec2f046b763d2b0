package manifest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// result is everything a Reader yields for one document.
type result struct {
	header  Header
	entries []*Entry
	bad     []*EntryError
	err     error // terminal error; nil when the document ended with io.EOF
	warn    string
}

// readAll reads a whole document, collecting entries, entry errors and
// warnings. NewReader's error lands in err.
func readAll(t testing.TB, r io.Reader, opts Options) result {
	t.Helper()
	var logs bytes.Buffer
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}
	var res result
	rd, err := NewReader(r, opts)
	if err != nil {
		res.err = err
		res.warn = logs.String()
		return res
	}
	res.header = rd.Header()
	for {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		var ee *EntryError
		if errors.As(err, &ee) {
			res.bad = append(res.bad, ee)
			continue
		}
		if err != nil {
			res.err = err
			if again, _ := rd.Next(); again != nil {
				t.Fatalf("Next after terminal error returned an entry")
			}
			if _, again := rd.Next(); again != err {
				t.Fatalf("Next after terminal error %v returned %v", err, again)
			}
			break
		}
		res.entries = append(res.entries, e)
	}
	if res.err == nil {
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("Next after io.EOF returned %v", err)
		}
		if rd.Count() != int64(len(res.entries)) {
			t.Fatalf("Count() = %d, want %d", rd.Count(), len(res.entries))
		}
	}
	res.warn = logs.String()
	return res
}

func readString(t testing.TB, doc string) result {
	t.Helper()
	return readAll(t, strings.NewReader(doc), Options{})
}

func mustOK(t testing.TB, res result) {
	t.Helper()
	if res.err != nil {
		t.Fatalf("unexpected error: %v", res.err)
	}
	for _, b := range res.bad {
		t.Errorf("unexpected entry error: %v", b)
	}
}

func ts(s string) time.Time {
	t, err := ParseDatetime(s)
	if err != nil {
		panic(err)
	}
	return t
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

const xmlHead = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"

// doc wraps body in a urlset with both namespaces declared.
func doc(body string) string {
	return xmlHead + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">` +
		body + "</urlset>\n"
}

// Fixtures written from the specification's descriptions (sections 8-13),
// so the package tests without the shared example files.
var fixtures = map[string]string{
	"description": doc(`
  <rs:ln rel="describedby" href="http://src.example.org/about.html"/>
  <rs:md capability="description"/>
  <url><loc>http://src.example.org/set-a/caps.xml</loc><rs:md capability="capabilitylist"/>
    <rs:ln rel="describedby" href="http://src.example.org/set-a/about.html"/></url>
  <url><loc>http://src.example.org/set-b/caps.xml</loc><rs:md capability="capabilitylist"/></url>`),
	"capabilitylist": doc(`
  <rs:ln rel="up" href="http://src.example.org/.well-known/resourcesync"/>
  <rs:md capability="capabilitylist"/>
  <url><loc>http://src.example.org/set-a/rl.xml</loc><rs:md capability="resourcelist"/></url>
  <url><loc>http://src.example.org/set-a/rd.xml</loc><rs:md capability="resourcedump"/></url>
  <url><loc>http://src.example.org/set-a/cl.xml</loc><rs:md capability="changelist"/></url>
  <url><loc>http://src.example.org/set-a/cd.xml</loc><rs:md capability="changedump"/></url>`),
	"resourcelist": doc(`
  <rs:md capability="resourcelist" at="2020-05-01T10:00:00Z" completed="2020-05-01T10:02:30.25Z"/>
  <url><loc>http://src.example.org/a.txt</loc><lastmod>2020-04-30T08:00:00Z</lastmod>
    <rs:md hash="md5:0cc175b9c0f1b6a831c399e269772661" length="1" type="text/plain"/></url>
  <url><loc> http://src.example.org/b.pdf
    </loc><lastmod>2020-04-30</lastmod><changefreq>daily</changefreq>
    <rs:md hash="md5:92eb5ffee6ae2fec3ad71c777531578f  sha-256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d" length="1234" type="application/pdf"/>
    <rs:ln rel="duplicate" href="http://mirror.example.net/b.pdf"/></url>`),
	"changelist": doc(`
  <rs:ln rel="up" href="http://src.example.org/set-a/caps.xml"/>
  <rs:md capability="changelist" from="2020-05-01T00:00:00Z" until="2020-05-02T00:00:00Z"/>
  <url><loc>http://src.example.org/a.txt</loc><lastmod>2020-05-01T09:00:00Z</lastmod><rs:md change="created"/></url>
  <url><loc>http://src.example.org/b.pdf</loc><lastmod>2020-05-01T10:00:00+02:00</lastmod><rs:md change="updated"/></url>
  <url><loc>http://src.example.org/c.gif</loc><lastmod>2020-05-01T11:00:00Z</lastmod><rs:md change="deleted"/></url>`),
	"resourcedump": doc(`
  <rs:ln rel="up" href="http://src.example.org/set-a/caps.xml"/>
  <rs:md capability="resourcedump" at="2020-05-01T10:00:00Z" completed="2020-05-01T10:30:00Z"/>
  <url><loc>http://src.example.org/dump/part1.zip</loc>
    <rs:md type="application/zip" length="65536" at="2020-05-01T10:00:00Z" completed="2020-05-01T10:10:00Z"
      hash="sha-256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"/>
    <rs:ln rel="contents" href="http://src.example.org/dump/part1-manifest.xml" type="application/xml"/></url>`),
	"resourcedump-manifest": doc(`
  <rs:md capability="resourcedump-manifest" at="2020-05-01T10:00:00Z"/>
  <url><loc>http://src.example.org/a.txt</loc><lastmod>2020-04-30T08:00:00Z</lastmod>
    <rs:md hash="md5:0cc175b9c0f1b6a831c399e269772661" length="1" path="/res/a.txt" type="text/plain"/></url>`),
	"changedump-manifest": doc(`
  <rs:md capability="changedump-manifest" from="2020-05-01T00:00:00Z" until="2020-05-02T00:00:00Z"/>
  <url><loc>http://src.example.org/a.txt</loc><lastmod>2020-05-01T09:00:00Z</lastmod>
    <rs:md change="updated" hash="md5:0cc175b9c0f1b6a831c399e269772661" length="1" path="/changes/a.txt"/></url>
  <url><loc>http://src.example.org/c.gif</loc><lastmod>2020-05-01T11:00:00Z</lastmod><rs:md change="deleted"/></url>`),
	"changelist-1.1": doc(`
  <rs:md capability="changelist" from="2020-05-01T00:00:00Z"/>
  <url><loc>http://src.example.org/a.txt</loc><lastmod>1999-01-01T00:00:00Z</lastmod>
    <rs:md change="updated" datetime="2020-05-01T09:15:00Z"/></url>`),
	"index": xmlHead + `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="changelist" from="2020-05-01T00:00:00Z"/>
  <sitemap><loc>http://src.example.org/cl-1.xml</loc><rs:md from="2020-05-01T00:00:00Z" until="2020-05-02T00:00:00Z"/></sitemap>
  <sitemap><loc>http://src.example.org/cl-2.xml</loc><rs:md from="2020-05-02T00:00:00Z"/></sitemap>
</sitemapindex>`,
	"mirrors": doc(`
  <rs:md capability="changelist" from="2020-05-01T00:00:00Z"/>
  <url><loc>http://src.example.org/big.iso</loc><lastmod>2020-05-01T12:00:00Z</lastmod>
    <rs:md change="updated" length="123456789012"/>
    <rs:ln rel="duplicate" pri="1" href="http://m1.example.net/big.iso" modified="2020-05-01T12:00:00Z"/>
    <rs:ln rel="duplicate" pri="999999" href="ftp://m2.example.net/big.iso"/>
    <rs:ln rel="duplicate" href="rsync://m3.example.net/big.iso" length="123456789012" hash="md5:0cc175b9c0f1b6a831c399e269772661" path="/x" encoding="gzip" type="application/x-iso9660-image"/></url>`),
}

func TestFixtures(t *testing.T) {
	md := func(f func(*Metadata)) Metadata {
		m := NewMetadata()
		f(&m)
		return m
	}
	ln := func(rel, href string, f func(*Link)) Link {
		l := NewLink(rel, href)
		if f != nil {
			f(&l)
		}
		return l
	}
	md5a := unhex("0cc175b9c0f1b6a831c399e269772661")
	sha := unhex("3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d")
	tests := []struct {
		name    string
		header  Header
		entries []*Entry
	}{
		{"description", Header{Root: URLSet, Metadata: md(func(m *Metadata) { m.Capability = Description }),
			Links: []Link{ln("describedby", "http://src.example.org/about.html", nil)}},
			[]*Entry{
				{Loc: "http://src.example.org/set-a/caps.xml", Metadata: md(func(m *Metadata) { m.Capability = CapabilityList }),
					Links: []Link{ln("describedby", "http://src.example.org/set-a/about.html", nil)}},
				{Loc: "http://src.example.org/set-b/caps.xml", Metadata: md(func(m *Metadata) { m.Capability = CapabilityList })},
			}},
		{"capabilitylist", Header{Root: URLSet, Metadata: md(func(m *Metadata) { m.Capability = CapabilityList }),
			Links: []Link{ln("up", "http://src.example.org/.well-known/resourcesync", nil)}},
			[]*Entry{
				{Loc: "http://src.example.org/set-a/rl.xml", Metadata: md(func(m *Metadata) { m.Capability = ResourceList })},
				{Loc: "http://src.example.org/set-a/rd.xml", Metadata: md(func(m *Metadata) { m.Capability = ResourceDump })},
				{Loc: "http://src.example.org/set-a/cl.xml", Metadata: md(func(m *Metadata) { m.Capability = ChangeList })},
				{Loc: "http://src.example.org/set-a/cd.xml", Metadata: md(func(m *Metadata) { m.Capability = ChangeDump })},
			}},
		{"resourcelist", Header{Root: URLSet, Metadata: md(func(m *Metadata) {
			m.Capability, m.At, m.Completed = ResourceList, ts("2020-05-01T10:00:00Z"), ts("2020-05-01T10:02:30.25Z")
		})},
			[]*Entry{
				{Loc: "http://src.example.org/a.txt", Lastmod: ts("2020-04-30T08:00:00Z"), Metadata: md(func(m *Metadata) {
					m.Hashes, m.Length, m.Type = fixity.Hashes{MD5: md5a}, 1, "text/plain"
				})},
				{Loc: "http://src.example.org/b.pdf", Lastmod: ts("2020-04-30"), ChangeFreq: "daily", Metadata: md(func(m *Metadata) {
					m.Hashes = fixity.Hashes{MD5: unhex("92eb5ffee6ae2fec3ad71c777531578f"), SHA256: sha}
					m.Length, m.Type = 1234, "application/pdf"
				}), Links: []Link{ln("duplicate", "http://mirror.example.net/b.pdf", nil)}},
			}},
		{"changelist", Header{Root: URLSet, Metadata: md(func(m *Metadata) {
			m.Capability, m.From, m.Until = ChangeList, ts("2020-05-01T00:00:00Z"), ts("2020-05-02T00:00:00Z")
		}), Links: []Link{ln("up", "http://src.example.org/set-a/caps.xml", nil)}},
			[]*Entry{
				{Loc: "http://src.example.org/a.txt", Lastmod: ts("2020-05-01T09:00:00Z"), Metadata: md(func(m *Metadata) { m.Change = Created })},
				{Loc: "http://src.example.org/b.pdf", Lastmod: ts("2020-05-01T08:00:00Z"), Metadata: md(func(m *Metadata) { m.Change = Updated })},
				{Loc: "http://src.example.org/c.gif", Lastmod: ts("2020-05-01T11:00:00Z"), Metadata: md(func(m *Metadata) { m.Change = Deleted })},
			}},
		{"resourcedump", Header{Root: URLSet, Metadata: md(func(m *Metadata) {
			m.Capability, m.At, m.Completed = ResourceDump, ts("2020-05-01T10:00:00Z"), ts("2020-05-01T10:30:00Z")
		}), Links: []Link{ln("up", "http://src.example.org/set-a/caps.xml", nil)}},
			[]*Entry{{Loc: "http://src.example.org/dump/part1.zip", Metadata: md(func(m *Metadata) {
				m.Type, m.Length, m.At, m.Completed = "application/zip", 65536, ts("2020-05-01T10:00:00Z"), ts("2020-05-01T10:10:00Z")
				m.Hashes = fixity.Hashes{SHA256: sha}
			}), Links: []Link{ln("contents", "http://src.example.org/dump/part1-manifest.xml", func(l *Link) { l.Type = "application/xml" })}}}},
		{"resourcedump-manifest", Header{Root: URLSet, Metadata: md(func(m *Metadata) {
			m.Capability, m.At = ResourceDumpManifest, ts("2020-05-01T10:00:00Z")
		})},
			[]*Entry{{Loc: "http://src.example.org/a.txt", Lastmod: ts("2020-04-30T08:00:00Z"), Metadata: md(func(m *Metadata) {
				m.Hashes, m.Length, m.Path, m.Type = fixity.Hashes{MD5: md5a}, 1, "/res/a.txt", "text/plain"
			})}}},
		{"changedump-manifest", Header{Root: URLSet, Metadata: md(func(m *Metadata) {
			m.Capability, m.From, m.Until = ChangeDumpManifest, ts("2020-05-01T00:00:00Z"), ts("2020-05-02T00:00:00Z")
		})},
			[]*Entry{
				{Loc: "http://src.example.org/a.txt", Lastmod: ts("2020-05-01T09:00:00Z"), Metadata: md(func(m *Metadata) {
					m.Change, m.Hashes, m.Length, m.Path = Updated, fixity.Hashes{MD5: md5a}, 1, "/changes/a.txt"
				})},
				{Loc: "http://src.example.org/c.gif", Lastmod: ts("2020-05-01T11:00:00Z"), Metadata: md(func(m *Metadata) { m.Change = Deleted })},
			}},
		{"changelist-1.1", Header{Root: URLSet, Metadata: md(func(m *Metadata) { m.Capability, m.From = ChangeList, ts("2020-05-01T00:00:00Z") })},
			[]*Entry{{Loc: "http://src.example.org/a.txt", Lastmod: ts("1999-01-01T00:00:00Z"), Metadata: md(func(m *Metadata) {
				m.Change, m.Datetime = Updated, ts("2020-05-01T09:15:00Z")
			})}}},
		{"index", Header{Root: SitemapIndex, Metadata: md(func(m *Metadata) { m.Capability, m.From = ChangeList, ts("2020-05-01T00:00:00Z") })},
			[]*Entry{
				{Loc: "http://src.example.org/cl-1.xml", Metadata: md(func(m *Metadata) { m.From, m.Until = ts("2020-05-01T00:00:00Z"), ts("2020-05-02T00:00:00Z") })},
				{Loc: "http://src.example.org/cl-2.xml", Metadata: md(func(m *Metadata) { m.From = ts("2020-05-02T00:00:00Z") })},
			}},
		{"mirrors", Header{Root: URLSet, Metadata: md(func(m *Metadata) { m.Capability, m.From = ChangeList, ts("2020-05-01T00:00:00Z") })},
			[]*Entry{{Loc: "http://src.example.org/big.iso", Lastmod: ts("2020-05-01T12:00:00Z"),
				Metadata: md(func(m *Metadata) { m.Change, m.Length = Updated, 123456789012 }),
				Links: []Link{
					ln("duplicate", "http://m1.example.net/big.iso", func(l *Link) { l.Pri, l.Modified = 1, ts("2020-05-01T12:00:00Z") }),
					ln("duplicate", "ftp://m2.example.net/big.iso", nil),
					ln("duplicate", "rsync://m3.example.net/big.iso", func(l *Link) {
						l.Length, l.Hashes, l.Path, l.Encoding, l.Type = 123456789012, fixity.Hashes{MD5: md5a}, "/x", "gzip", "application/x-iso9660-image"
					}),
				}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := readString(t, fixtures[tt.name])
			mustOK(t, res)
			if !reflect.DeepEqual(res.header, tt.header) {
				t.Errorf("header\n got %+v\nwant %+v", res.header, tt.header)
			}
			if len(res.entries) != len(tt.entries) {
				t.Fatalf("%d entries, want %d", len(res.entries), len(tt.entries))
			}
			for i := range tt.entries {
				if !reflect.DeepEqual(res.entries[i], tt.entries[i]) {
					t.Errorf("entry %d\n got %+v\nwant %+v", i, res.entries[i], tt.entries[i])
				}
			}
		})
	}
	if len(tests) != len(fixtures) {
		t.Errorf("%d fixtures, %d checked", len(fixtures), len(tests))
	}
}

func TestMalformedEntriesContinue(t *testing.T) {
	res := readString(t, doc(`<rs:md capability="resourcedump-manifest"/>
  <url><loc>http://x/0</loc></url>
  <url><loc>http://x/1</loc><lastmod>2013-02-30</lastmod></url>
  <url><loc>http://x/2</loc><rs:md hash="md5:zz"/></url>
  <url><loc>http://x/3</loc><rs:md length="-5"/></url>
  <url><lastmod>2013-01-01</lastmod></url>
  <url><loc>http://x/5</loc><rs:ln rel="duplicate" href="http://m/5" pri="0"/></url>
  <url><loc>http://x/6</loc><rs:md length="1"/><rs:md length="2"/></url>
  <url><loc>http://x/7</loc><rs:ln href="http://m/7"/></url>
  <url><loc>http://x/8</loc><rs:md at="yesterday"/></url>
  <url><loc>http://x/9</loc><loc>http://x/9b</loc></url>
  <url><loc>http://x/10</loc><rs:md length="1" length="2"/></url>
  <url><loc>   </loc></url>
  <url><loc>http://x/12<b>bold</b></loc></url>
  <url><loc>http://x/13</loc><rs:md length="99999999999999999999"/></url>
  <url><loc>http://x/14</loc><rs:ln rel="x" href="http://m/14" pri="1000000"/></url>
  <url><loc>http://x/15</loc><rs:md hash="md5:0cc175b9c0f1b6a831c399e269772661 sha-384:abcd"/></url>
`))
	if res.err != nil {
		t.Fatal(res.err)
	}
	var good []string
	for _, e := range res.entries {
		good = append(good, e.Loc)
	}
	// In a snapshot document, an unusable datetime (entries 1 and 8) is
	// dropped with a warning and the entry kept.
	if want := []string{"http://x/0", "http://x/1", "http://x/8", "http://x/15"}; !reflect.DeepEqual(good, want) {
		t.Fatalf("good entries %v, want %v", good, want)
	}
	if !res.entries[1].Lastmod.IsZero() || !res.entries[2].Metadata.At.IsZero() {
		t.Errorf("unusable datetimes kept: %v %v", res.entries[1].Lastmod, res.entries[2].Metadata.At)
	}
	if !strings.Contains(res.warn, "datetime that cannot be read is ignored") {
		t.Errorf("no warning about the dropped datetime: %s", res.warn)
	}
	if got := res.entries[3].Metadata.Hashes.Unknown; !reflect.DeepEqual(got, []string{"sha-384:abcd"}) {
		t.Errorf("unknown hash kept as %v", got)
	}
	if !strings.Contains(res.warn, "hash algorithm not verified") {
		t.Errorf("no warning about the unknown algorithm: %s", res.warn)
	}
	wantBad := []struct {
		index int64
		loc   string
		msg   string
		is    error
	}{
		{2, "http://x/2", "hash", fixity.ErrMalformed},
		{3, "http://x/3", "length", nil},
		{4, "", "no <loc>", nil},
		{5, "http://x/5", "pri", nil},
		{6, "http://x/6", "more than one rs:md", nil},
		{7, "http://x/7", "no rel", nil},
		{9, "http://x/9b", "more than one <loc>", nil},
		{10, "http://x/10", "given twice", nil},
		{11, "", "no <loc>", nil},
		{12, "http://x/12", "contains an element", nil},
		{13, "http://x/13", "length", nil},
		{14, "http://x/14", "pri", nil},
	}
	if len(res.bad) != len(wantBad) {
		t.Fatalf("%d entry errors, want %d: %v", len(res.bad), len(wantBad), res.bad)
	}
	for i, w := range wantBad {
		b := res.bad[i]
		if b.Index != w.index || b.Loc != w.loc || !strings.Contains(b.Error(), w.msg) {
			t.Errorf("entry error %d = {%d %q %v}, want index %d loc %q mentioning %q", i, b.Index, b.Loc, b, w.index, w.loc, w.msg)
		}
		if errclass.Of(b) != errclass.Permanent {
			t.Errorf("entry error %v is %v, want permanent", b, errclass.Of(b))
		}
		if errors.Is(b, ErrMalformed) {
			t.Errorf("entry error %v must not wrap ErrMalformed (that means terminal)", b)
		}
		if w.is != nil && !errors.Is(b, w.is) {
			t.Errorf("entry error %v does not wrap %v", b, w.is)
		}
	}
}

// hugeAttr produces a document whose root rs:md has an attribute of n bytes,
// generated lazily, and counts the bytes read.
type hugeAttr struct {
	head, tail string
	n, read    int64
}

func (h *hugeAttr) Read(p []byte) (int, error) {
	head, body := int64(len(h.head)), int64(len(h.head))+h.n
	var k int
	switch {
	case h.read < head:
		k = copy(p, h.head[h.read:])
	case h.read < body:
		k = int(min(int64(len(p)), body-h.read))
		for i := range k {
			p[i] = 'a'
		}
	case h.read < body+int64(len(h.tail)):
		k = copy(p, h.tail[h.read-body:])
	default:
		return 0, io.EOF
	}
	h.read += int64(k)
	return k, nil
}

func TestHostile(t *testing.T) {
	const root = `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">`
	const md = `<rs:md capability="resourcelist"/>`
	laughs := xmlHead + `<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>` + root + md + `<url><loc>&lol3;</loc></url></urlset>`
	tests := []struct {
		name string
		doc  string
		opts Options
		want []string // substrings of the error
		is   []error
	}{
		{"billion laughs", laughs, Options{}, []string{"DOCTYPE", "line 3"}, []error{ErrMalformed}},
		{"bare entity declaration", xmlHead + `<!ENTITY x "y">` + root + md + `</urlset>`, Options{}, []string{"ENTITY"}, []error{ErrMalformed}},
		{"external entity", xmlHead + `<!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>` + root + md + `<url><loc>&x;</loc></url></urlset>`, Options{}, []string{"DOCTYPE"}, []error{ErrMalformed}},
		{"undeclared entity", doc(md + `<url><loc>&x;</loc></url>`), Options{}, []string{"entity"}, []error{ErrMalformed}},
		{"deep nesting", doc(md + `<url><loc>http://x/</loc>` + strings.Repeat("<x>", 40) + strings.Repeat("</x>", 40) + `</url>`), Options{}, []string{"deeper than 32"}, []error{ErrMalformed}},
		{"deep nesting small cap", doc(md + `<url><loc>http://x/</loc><a><b/></a></url>`), Options{MaxDepth: 3}, []string{"deeper than 3"}, []error{ErrMalformed}},
		{"huge text", doc(md + `<url><loc>http://x/` + strings.Repeat("a", 2000) + `</loc></url>`), Options{MaxTokenSize: 1024}, []string{"larger than 1024"}, []error{ErrMalformed}},
		{"text split by comments", doc(md + `<url><loc>` + strings.Repeat("aaaaaaaaa<!---->", 200) + `</loc></url>`), Options{MaxTokenSize: 1024}, []string{"larger than 1024"}, []error{ErrMalformed}},
		{"huge comment", doc(md + `<!--` + strings.Repeat("-a", 1000) + `-->`), Options{MaxTokenSize: 1024}, []string{"larger than 1024"}, []error{ErrMalformed}},
		{"too many entries", doc(md + strings.Repeat(`<url><loc>http://x/</loc></url>`, 4)), Options{MaxEntries: 3}, []string{"more than 3 entries"}, []error{ErrMalformed}},
		{"truncated", doc(md + `<url><loc>http://x/</loc></url>`)[:200], Options{}, []string{"unexpected EOF"}, []error{ErrMalformed}},
		{"junk after root", doc(md) + "junk", Options{}, []string{"text after the root"}, []error{ErrMalformed}},
		{"second root", doc(md) + root + md + "</urlset>", Options{}, []string{"after the root"}, []error{ErrMalformed}},
		{"declaration after root", doc(md) + `<?xml version="1.0"?>`, Options{}, []string{"XML declaration after"}, []error{ErrMalformed}},
		{"mismatched tags", doc(md + `<url><loc>http://x/</url></loc>`), Options{}, []string{"line"}, []error{ErrMalformed}},
		{"empty", "", Options{}, []string{"empty document"}, []error{ErrMalformed}},
		{"only whitespace", "  \n ", Options{}, []string{"empty document"}, []error{ErrMalformed}},
		{"text before root", "hello" + doc(md), Options{}, []string{"before the root"}, []error{ErrMalformed}},
		{"html", "<html><head><title>x</title></head><body/></html>", Options{}, []string{"<html>", "<urlset> or <sitemapindex>"}, []error{ErrMalformed, ErrNotResourceSync}},
		{"html doctype", "<!DOCTYPE html>\n<html></html>", Options{}, []string{"DOCTYPE"}, []error{ErrMalformed}},
		{"plain sitemap", doc(`<url><loc>http://x/</loc></url>`), Options{}, []string{"no rs:md capability", RSNS}, []error{ErrMalformed, ErrNotResourceSync}},
		{"rs:md without capability", doc(`<rs:md at="2013-01-01"/>`), Options{}, []string{"no rs:md capability"}, []error{ErrNotResourceSync}},
		{"rs:md in wrong namespace", xmlHead + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms"><rs:md capability="resourcelist"/></urlset>`,
			Options{}, []string{`found an md element in namespace "http://www.openarchives.org/rs/terms"`}, []error{ErrNotResourceSync}},
		{"two root rs:md", doc(md + md), Options{}, []string{"more than one rs:md"}, []error{ErrMalformed}},
		{"bad root datetime", doc(`<rs:md capability="resourcelist" at="2013-99"/>`), Options{}, []string{"root rs:md", "at"}, []error{ErrMalformed, ErrDatetime}},
		{"bad root link", doc(md + `<rs:ln rel="up"/>`), Options{}, []string{"no href"}, []error{ErrMalformed}},
		{"unknown encoding", `<?xml version="1.0" encoding="x-klingon"?>` + root + md + `</urlset>`, Options{}, []string{"unsupported encoding", "x-klingon"}, []error{ErrMalformed}},
		{"invalid utf-8", doc(md + "<url><loc>http://x/\xff</loc></url>"), Options{}, []string{"UTF-8"}, []error{ErrMalformed}},
		{"xml 1.1", `<?xml version="1.1"?>` + root + md + `</urlset>`, Options{}, []string{"version"}, []error{ErrMalformed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := readAll(t, strings.NewReader(tt.doc), tt.opts)
			if res.err == nil {
				t.Fatalf("no error; entries %d, entry errors %v", len(res.entries), res.bad)
			}
			for _, s := range tt.want {
				if !strings.Contains(res.err.Error(), s) {
					t.Errorf("error %q does not mention %q", res.err, s)
				}
			}
			for _, e := range tt.is {
				if !errors.Is(res.err, e) {
					t.Errorf("error %q does not wrap %q", res.err, e)
				}
			}
			if !errclass.IsPermanent(res.err) {
				t.Errorf("error %q is %v, want permanent", res.err, errclass.Of(res.err))
			}
		})
	}
}

func TestHugeAttributeFailsFast(t *testing.T) {
	const n = 10 << 20
	for _, where := range []string{"header", "entry"} {
		t.Run(where, func(t *testing.T) {
			h := &hugeAttr{
				head: xmlHead + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="resourcelist" x="`,
				tail: `"/></urlset>`,
				n:    n,
			}
			if where == "entry" {
				h.head = strings.Replace(h.head, `x="`, `/><url><loc>http://x/</loc><rs:md type="`, 1)
				h.tail = `"/></url></urlset>`
			}
			// The default cap, or a smaller one where the race detector
			// makes byte-by-byte decoding slow.
			opts, limit := Options{}, DefaultMaxTokenSize
			if raceEnabled || testing.Short() {
				opts.MaxTokenSize, limit = 1<<20, 1<<20
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res := readAll(t, h, opts)
			runtime.ReadMemStats(&after)
			if !errors.Is(res.err, ErrMalformed) || !strings.Contains(res.err.Error(), fmt.Sprintf("larger than %d", limit)) {
				t.Fatalf("error %v, want a token-size error", res.err)
			}
			// The cap stops the read at MaxTokenSize past the last token
			// (plus one buffer of read-ahead), long before the 10 MB
			// attribute ends; the decoder never holds more than that.
			if max := int64(limit) + 64<<10 + int64(len(h.head)); h.read > max {
				t.Fatalf("read %d bytes before failing, want at most %d", h.read, max)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("read %d bytes, allocated %d", h.read, alloc)
			if alloc > uint64(4*limit) && !raceEnabled {
				t.Fatalf("allocated %d bytes for a %d-byte cap", alloc, limit)
			}
		})
	}
}

func TestTruncatedEverywhere(t *testing.T) {
	full := fixtures["mirrors"]
	end := strings.LastIndex(full, "</urlset>") + len("</urlset>")
	for i := 0; i < end; i++ {
		res := readString(t, full[:i])
		if res.err == nil {
			t.Fatalf("prefix of %d bytes (%q…) read without error", i, full[max(0, i-20):i])
		}
		if !errors.Is(res.err, ErrMalformed) {
			t.Fatalf("prefix of %d bytes: error %v does not wrap ErrMalformed", i, res.err)
		}
	}
	for i := end; i <= len(full); i++ {
		mustOK(t, readString(t, full[:i]))
	}
}

func TestReadErrorKeepsItsClass(t *testing.T) {
	cause := errclass.Retryablef("connection reset")
	r := io.MultiReader(strings.NewReader(doc(`<rs:md capability="resourcelist"/><url><loc>http://x/</loc></url>`)[:150]), &failing{cause})
	res := readAll(t, r, Options{})
	if !errors.Is(res.err, cause) || !errclass.IsRetryable(res.err) || errors.Is(res.err, ErrMalformed) {
		t.Fatalf("error %v (%v): want the reader's retryable error, not ErrMalformed", res.err, errclass.Of(res.err))
	}
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

func TestTolerances(t *testing.T) {
	const body = `<rs:md capability="resourcedump-manifest"/>
  <url><loc>http://x/a b/café</loc><lastmod>2026-11-22T14:03:54.060458Z</lastmod><rs:md hash="  md5:0cc175b9c0f1b6a831c399e269772661
      sha-256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d " path="a.txt"/></url>
  <url><loc>http://x/2</loc><rs:md path="b.txt" hash="md5:DMF1ucDxtqgxw5niaXcmYQ=="/></url>`
	tests := []struct {
		name  string
		doc   string
		warns []string
		check func(t *testing.T, res result)
	}{
		{"spec conform", doc(body), []string{"path without a leading slash", "extra whitespace"}, func(t *testing.T, res result) {
			if len(res.entries) != 2 || res.entries[0].Metadata.Path != "a.txt" || res.entries[0].Loc != "http://x/a b/café" {
				t.Errorf("entries %+v", res.entries)
			}
			if !bytes.Equal(res.entries[1].Metadata.Hashes.MD5, unhex("0cc175b9c0f1b6a831c399e269772661")) {
				t.Errorf("base64 md5 read as %x", res.entries[1].Metadata.Hashes.MD5)
			}
		}},
		{"no declaration", strings.TrimPrefix(doc(body), xmlHead), []string{"no XML declaration"}, nil},
		{"single quotes, lower case", strings.Replace(doc(body), xmlHead, `<?xml version='1.0' encoding='utf-8'?>`, 1), []string{"single quotes", "lower-case"}, nil},
		{"us-ascii", strings.Replace(doc(`<rs:md capability="resourcelist"/><url><loc>http://x/</loc></url>`), "UTF-8", "US-ASCII", 1), nil, nil},
		{"byte order mark", "\uFEFF" + doc(body), []string{"byte order mark"}, nil},
		{"root without namespace", `<urlset xmlns:rs="http://www.openarchives.org/rs/terms/">` + body + `</urlset>`, []string{"not in the sitemap namespace"}, func(t *testing.T, res result) {
			if len(res.entries) != 2 {
				t.Errorf("%d entries, want 2", len(res.entries))
			}
		}},
		{"url in index", xmlHead + `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">` + body + `<sitemap><loc>http://x/3</loc></sitemap></sitemapindex>`,
			[]string{"does not match the root"}, func(t *testing.T, res result) {
				if len(res.entries) != 3 || res.header.Root != SitemapIndex {
					t.Errorf("%d entries, root %v", len(res.entries), res.header.Root)
				}
			}},
		{"foreign elements and attributes", doc(`<rs:md capability="resourcelist" xmlns:x="urn:x" x:capability="evil" x:at="nonsense" extra="1"/>
  <x:thing xmlns:x="urn:x"><x:deep><x:deeper>text</x:deeper></x:deep></x:thing>
  <url><loc>http://x/1</loc><image:image xmlns:image="urn:img"><image:loc>http://x/1.png</image:loc></image:image><foo>bar</foo>
    <rs:ln rel="alternate" href="http://x/1.html" xmlns:y="urn:y" y:pri="0" bogus="z"/></url>
  <!-- a comment --><?pi data?>`), nil, func(t *testing.T, res result) {
			if res.header.Metadata.Capability != ResourceList || len(res.entries) != 1 || res.entries[0].Loc != "http://x/1" || res.entries[0].Links[0].Pri != DefaultPri {
				t.Errorf("header %+v entries %+v", res.header, res.entries)
			}
		}},
		{"header links after md, late header elements", doc(`<rs:md capability="resourcelist"/><rs:ln rel="up" href="http://x/caps"/><url><loc>http://x/1</loc></url><rs:ln rel="index" href="http://x/idx"/>`),
			[]string{"after the first entry is ignored"}, func(t *testing.T, res result) {
				if len(res.header.Links) != 1 || res.header.Links[0].Rel != "up" {
					t.Errorf("header links %+v", res.header.Links)
				}
			}},
		{"link hash that does not parse", doc(`<rs:md capability="changelist"/><url><loc>http://x/1</loc><rs:ln rel="patch" href="http://x/p" hash="sha-256:notbase64"/></url>`),
			[]string{"kept verbatim"}, func(t *testing.T, res result) {
				if got := res.entries[0].Links[0].Hashes; !reflect.DeepEqual(got, fixity.Hashes{Unknown: []string{"sha-256:notbase64"}}) {
					t.Errorf("link hashes %+v", got)
				}
			}},
		{"trailing comments and whitespace", doc(`<rs:md capability="resourcelist"/>`) + "<!-- end -->\n<?pi x?>\n\n", nil, nil},
		{"CDATA loc", doc(`<rs:md capability="resourcelist"/><url><loc><![CDATA[http://x/?a=1&b=2]]></loc></url>`), nil, func(t *testing.T, res result) {
			if res.entries[0].Loc != "http://x/?a=1&b=2" {
				t.Errorf("loc %q", res.entries[0].Loc)
			}
		}},
		{"unknown change value", doc(`<rs:md capability="changelist"/><url><loc>http://x/1</loc><rs:md change="moved"/></url>`), []string{"unknown change"}, func(t *testing.T, res result) {
			if res.entries[0].Metadata.Change != "moved" {
				t.Errorf("change %q", res.entries[0].Metadata.Change)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := readString(t, tt.doc)
			mustOK(t, res)
			for _, w := range tt.warns {
				if n := strings.Count(res.warn, w); n != 1 {
					t.Errorf("warning %q logged %d times, want once:\n%s", w, n, res.warn)
				}
			}
			if tt.warns == nil && res.warn != "" {
				t.Errorf("unexpected warnings:\n%s", res.warn)
			}
			if tt.check != nil {
				tt.check(t, res)
			}
		})
	}
}

func TestNilLogger(t *testing.T) {
	rd, err := NewReader(strings.NewReader(strings.TrimPrefix(fixtures["resourcelist"], xmlHead)), Options{Logger: nil})
	if err != nil {
		t.Fatal(err)
	}
	if rd.Header().Metadata.Capability != ResourceList {
		t.Fatal("bad header")
	}
	for {
		if _, err := rd.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if rd.InputOffset() != int64(len(fixtures["resourcelist"])-len(xmlHead)) {
		t.Errorf("InputOffset %d at the end, want %d", rd.InputOffset(), len(fixtures["resourcelist"])-len(xmlHead))
	}
}

func TestWriterRoundTrip(t *testing.T) {
	md5a := unhex("0cc175b9c0f1b6a831c399e269772661")
	sha1a := unhex("86f7e437faa5a7fce15d1ddcb9eaeaea377667b8")
	sha := unhex("ca978112ca1bbdcafac231b39a23dc4da786eff8147fb4e7e7e6c69b6e8b2f0b")
	hashes := fixity.Hashes{MD5: md5a, SHA1: sha1a, SHA256: sha, Unknown: []string{"sha-384:abc"}}
	link := Link{Rel: "duplicate", Href: "http://m.example.net/a?x=1&y=<2>", Type: "text/plain", Encoding: "gzip",
		Hashes: hashes, Length: 42, Modified: ts("2021-01-02T03:04:05.678Z"), Path: "/p/a", Pri: 7}
	for _, root := range []Root{URLSet, SitemapIndex} {
		t.Run(root.String(), func(t *testing.T) {
			h := Header{Root: root, Metadata: Metadata{
				Capability: ChangeDumpManifest, At: ts("2021-01-01T00:00:00Z"), Completed: ts("2021-01-01T00:00:01.5Z"),
				From: ts("2020-12-31T00:00:00Z"), Until: ts("2021-01-01T00:00:00Z"), Datetime: ts("2021-01-01T00:00:00.000000001Z"),
				Change: Updated, Encoding: "identity", Hashes: hashes, Length: 0, Path: "/manifest.xml", Type: "application/xml",
			}, Links: []Link{NewLink("up", "http://x/caps.xml"), link}}
			entries := []*Entry{
				{Loc: "http://x/a b/\"café\" & <more>", Lastmod: ts("2021-01-01T12:00:00+05:00"), ChangeFreq: "hourly",
					Metadata: h.Metadata, Links: []Link{link, NewLink("alternate", "http://x/a.html")}},
				{Loc: "http://x/minimal", Metadata: NewMetadata()},
				{Loc: "http://x/deleted", Lastmod: ts("2021-01-01T13:00:00Z"), Metadata: Metadata{Change: Deleted, Length: -1}},
			}
			var buf bytes.Buffer
			w, err := NewWriter(&buf, h)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if err := w.Write(e); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			res := readAll(t, &buf, Options{})
			mustOK(t, res)
			if !reflect.DeepEqual(res.header, h) {
				t.Errorf("header\n got %+v\nwant %+v", res.header, h)
			}
			if !reflect.DeepEqual(res.entries, entries) {
				for i := range entries {
					if i >= len(res.entries) || !reflect.DeepEqual(res.entries[i], entries[i]) {
						t.Errorf("entry %d differs:\n got %+v\nwant %+v", i, res.entries[i], entries[i])
					}
				}
			}
			if n := strings.Count(res.warn, "level=WARN"); n != 1 || !strings.Contains(res.warn, "sha-384:abc") {
				t.Errorf("want one warning, about sha-512:\n%s", res.warn)
			}
		})
	}
}

// genManifest writes a resource dump manifest of n entries, with lastmod,
// hash and path when full.
func genManifest(w io.Writer, n int, full bool) error {
	mw, err := NewWriter(w, Header{Root: URLSet, Metadata: Metadata{Capability: ResourceDumpManifest, At: ts("2021-01-01T00:00:00Z"), Length: -1}})
	if err != nil {
		return err
	}
	md5a := unhex("0cc175b9c0f1b6a831c399e269772661")
	lastmod := ts("2021-01-01T00:00:00Z")
	for i := range n {
		e := Entry{Loc: "http://example.org/r/" + strconv.Itoa(i), Metadata: Metadata{Length: int64(i)}}
		if full {
			e.Lastmod, e.Metadata.Hashes, e.Metadata.Path = lastmod, fixity.Hashes{MD5: md5a}, "/r/"+strconv.Itoa(i)
		}
		if err := mw.Write(&e); err != nil {
			return err
		}
	}
	return mw.Close()
}

func TestConstantMemory(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 50_000
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(genManifest(pw, n, false)) }()
	defer pr.Close()

	rd, err := NewReader(pr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 32 << 20
	var ms runtime.MemStats
	var peak uint64
	for i := 0; ; i++ {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Metadata.Length != int64(i) {
			t.Fatalf("entry %d has length %d", i, e.Metadata.Length)
		}
		if i%(n/8) == n/16 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	if rd.Count() != int64(n) {
		t.Fatalf("Count() = %d, want %d", rd.Count(), n)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapInuse)
	t.Logf("%d entries, %d bytes, heap in use at most %d bytes", n, rd.InputOffset(), peak)
	if peak > limit {
		t.Fatalf("heap in use reached %d bytes, want under %d: the Reader retains memory", peak, limit)
	}
}

func BenchmarkReader(b *testing.B) {
	var buf bytes.Buffer
	if err := genManifest(&buf, 100_000, true); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rd, err := NewReader(bytes.NewReader(data), Options{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
