package manifest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"golang.org/x/text/encoding/unicode"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/xmlcap/xmlcaptest"
)

func FuzzReader(f *testing.F) {
	for _, d := range fixtures {
		f.Add([]byte(d))
	}
	for _, d := range specSeeds(f) {
		f.Add(d)
	}
	for _, d := range []string{
		doc(`<rs:md capability="resourcelist"/><url><loc>http://x/1</loc><lastmod>2013-02-30</lastmod></url><url><loc>http://x/2</loc></url>`),
		doc(`<rs:md capability="resourcelist"/><url><rs:md length="1"/><rs:md length="2"/></url>`),
		doc(`<rs:md capability="changelist"/><url><loc>a</loc><rs:ln rel="r" href="h" pri="5" hash="md5:DMF1ucDxtqgxw5niaXcmYQ=="/></url>`),
		`<!DOCTYPE x [<!ENTITY a "aaaa">]><urlset/>`,
		`<urlset xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="x"/><sitemap><loc>y</loc></sitemap></urlset><!-- c -->`,
		"\uFEFF<?xml version='1.0' encoding='us-ascii'?><sitemapindex><rs:md xmlns:rs=\"http://www.openarchives.org/rs/terms/\" capability=\"x\"/></sitemapindex>",
		doc(`<rs:md capability="resourcelist"/>`) + "junk",
		`<?xml version="1.0" encoding="ISO-8859-1"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="resourcelist"/><url><loc>http://x/caf` + "\xe9" + `</loc></url></urlset>`,
		`<?xml version="1.0" encoding="windows-1252"?><urlset><rs:md xmlns:rs="http://www.openarchives.org/rs/terms/" capability="resourcelist"/><url><loc>http://x/` + "\x80\x93" + `</loc></url></urlset>`,
		doc(`<rs:md capability="changelist"/><url><loc>http://x/1</loc><lastmod>2013-01-02 10:00:00</lastmod><rs:md change="updated" datetime="Wed, 02 Jan 2013 10:00:00 GMT"/></url>`),
	} {
		f.Add([]byte(d))
	}
	// UTF-16, with and without a byte order mark.
	u16 := doc(`<rs:md capability="resourcelist"/><url><loc>http://x/é</loc></url>`)
	for _, e := range []unicode.Endianness{unicode.LittleEndian, unicode.BigEndian} {
		for _, bom := range []unicode.BOMPolicy{unicode.UseBOM, unicode.IgnoreBOM} {
			b, _ := unicode.UTF16(e, bom).NewEncoder().Bytes([]byte(strings.Replace(u16, "UTF-8", "UTF-16", 1)))
			f.Add(b)
		}
	}
	// What producers get wrong: windows-1252 bytes declared ISO-8859-1, a
	// byte order mark contradicting the declaration, a WHATWG-only label,
	// one x/text refuses, and a document still gzip-compressed (its reader
	// must refuse it cleanly: decompression is fetch's).
	ls := doc(`<rs:md capability="resourcelist"/><url><loc>http://x/“é”</loc></url>`)
	le, _ := unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder().Bytes([]byte(strings.Replace(ls, "UTF-8", "ISO-8859-1", 1)))
	f.Add(le)
	for _, d := range []string{
		strings.Replace(strings.ReplaceAll(ls, "“é”", "\x93\xe9\x94"), "UTF-8", "ISO-8859-1", 1),
		"\xef\xbb\xbf" + strings.Replace(ls, "UTF-8", "latin1", 1),
		strings.Replace(strings.ReplaceAll(ls, "“é”", "\x85"), "UTF-8", "cp1252", 1),
		strings.Replace(ls, "UTF-8", "ISO-2022-KR", 1),
		"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xb2\x29\x2d\xca\x29\x4e\x2d\xd1\xb7\x03\x04\x00\x00\xff\xff",
	} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		xmlcaptest.Agree(t, data)
		for _, opts := range []Options{{}, {MaxTokenSize: 64, MaxDepth: 4, MaxEntries: 3}} {
			checkReader(t, data, opts)
		}
	})
}

// checkReader reads data to the end and checks the Reader's contract.
func checkReader(t *testing.T, data []byte, opts Options) {
	rd, err := NewReader(bytes.NewReader(data), opts)
	if err != nil {
		if !errors.Is(err, ErrMalformed) || !errclass.IsPermanent(err) {
			t.Fatalf("NewReader: error %v is not a permanent ErrMalformed", err)
		}
		return
	}
	h := rd.Header()
	if h.Metadata.Capability == "" || (h.Root != URLSet && h.Root != SitemapIndex) {
		t.Fatalf("header without capability or root: %+v", h)
	}
	var good, next int64
	// Every entry takes at least a few bytes, so this bound is never
	// reached unless Next fails to make progress.
	for calls := 0; ; calls++ {
		if calls > len(data) {
			t.Fatalf("%d calls of Next on %d bytes", calls, len(data))
		}
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		var ee *EntryError
		if errors.As(err, &ee) {
			if e != nil || ee.Index != next || errclass.Of(err) != errclass.Permanent || errors.Is(err, ErrMalformed) {
				t.Fatalf("bad entry error %v (index %d, want %d)", err, ee.Index, next)
			}
			next++
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) || !errclass.IsPermanent(err) {
				t.Fatalf("terminal error %v is not a permanent ErrMalformed", err)
			}
			if _, again := rd.Next(); again != err {
				t.Fatalf("terminal error not sticky: %v then %v", err, again)
			}
			break
		}
		if e == nil || e.Loc == "" || e.Loc != strings.TrimSpace(e.Loc) {
			t.Fatalf("entry without a trimmed loc: %+v", e)
		}
		if e.Metadata.Length < -1 || e.Lastmod.Location().String() != "UTC" {
			t.Fatalf("entry with bad length or lastmod: %+v", e)
		}
		for _, l := range e.Links {
			if l.Rel == "" || l.Href == "" || l.Pri < 1 || l.Pri > DefaultPri {
				t.Fatalf("bad link %+v", l)
			}
		}
		good++
		next++
	}
	if rd.Count() != good {
		t.Fatalf("Count() = %d, want %d", rd.Count(), good)
	}
	if opts.MaxEntries > 0 && next > opts.MaxEntries {
		t.Fatalf("%d entries read with MaxEntries %d", next, opts.MaxEntries)
	}
}
