package publish

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
)

// FuzzEntryBound: whatever an entry holds, the bytes the Writer writes for
// it never pass entryBound (what keeps a page under MaxBytes), and the
// document stays one the strict reader reads back whole.
func FuzzEntryBound(f *testing.F) {
	f.Add("http://example.org/a", "text/plain", "http://example.org/copy", int64(3), true)
	f.Add("oai:example.org:1", "", "", int64(-1), false)
	f.Add("http://x/<&>\"'\t\n\r\x00\xff€", "a/b; x=\"&\"", "http://y/\x01é", int64(1<<40), true)
	f.Fuzz(func(t *testing.T, loc, typ, href string, length int64, hashed bool) {
		if length < -1 {
			length = -1
		}
		e := manifest.Entry{Loc: loc, Lastmod: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Metadata: manifest.NewMetadata()}
		e.Metadata.Type, e.Metadata.Length = typ, length
		e.Metadata.Change, e.Metadata.Datetime = manifest.Updated, e.Lastmod
		if hashed {
			e.Metadata.Hashes = fixity.Hashes{MD5: make([]byte, 16), SHA1: make([]byte, 20), SHA256: make([]byte, 32), SHA512: make([]byte, 64)}
		}
		if strings.TrimSpace(href) != "" {
			l := manifest.NewLink("duplicate", href)
			l.Type, l.Hashes, l.Length, l.Modified = typ, e.Metadata.Hashes, length, e.Lastmod
			e.Links = append(e.Links, l)
		}
		var buf bytes.Buffer
		md := manifest.NewMetadata()
		md.Capability = manifest.ChangeList
		w, err := manifest.NewWriter(&buf, manifest.Header{Root: manifest.URLSet, Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		empty := buf.Len()
		buf.Reset()
		w, _ = manifest.NewWriter(&buf, manifest.Header{Root: manifest.URLSet, Metadata: md})
		if err := w.Write(&e); err != nil {
			return // refused (a blank loc): nothing written
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if n := int64(buf.Len() - empty); n > entryBound(&e) {
			t.Fatalf("the entry took %d bytes, its bound is %d:\n%s", n, entryBound(&e), buf.Bytes())
		}
		r, err := manifest.NewReader(bytes.NewReader(buf.Bytes()), manifest.Options{})
		if err != nil {
			t.Fatalf("the document does not read back: %v\n%s", err, buf.Bytes())
		}
		got := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("the entry does not read back: %v\n%s", err, buf.Bytes())
			}
			got++
		}
		if got != 1 {
			t.Fatalf("%d entries read back, want 1", got)
		}
	})
}

// FuzzParsePeriod: a change period is refused, or at least a second.
func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"1d", "2w", "12h", "90m", "0d", "-1d", "1.5d", "500ms", "d", "99999999999999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParsePeriod(s)
		if err == nil && d < time.Second {
			t.Fatalf("ParsePeriod(%q) = %v", s, d)
		}
	})
}
