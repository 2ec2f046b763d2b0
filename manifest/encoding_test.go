package manifest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

// TestDeclaredEncodings: documents in the encodings real producers declare
// are decoded; an encoding nobody knows fails the document with an error
// naming it.
func TestDeclaredEncodings(t *testing.T) {
	text := func(enc string) string {
		return `<?xml version="1.0" encoding="` + enc + `"?>` + "\n" +
			`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">` +
			`<rs:md capability="resourcelist"/>` +
			`<url><loc>http://example.org/caf%C3%A9/é</loc><rs:md type="text/plain" path="/r/Ünïcödé"/></url>` +
			`<url><loc>http://example.org/€/“quoted”</loc></url>` +
			"</urlset>\n"
	}
	mustEncode := func(b []byte, err error) []byte {
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	utf16 := func(e unicode.Endianness, bom unicode.BOMPolicy, label string) []byte {
		return mustEncode(unicode.UTF16(e, bom).NewEncoder().Bytes([]byte(text(label))))
	}
	latin1 := strings.ReplaceAll(strings.ReplaceAll(text("ISO-8859-1"), "€", "E"), "“quoted”", "quoted")
	tests := []struct {
		name  string
		doc   []byte
		locs  []string
		wrong string // a substring of the error, when the document fails
	}{
		{"UTF-8", []byte(text("UTF-8")), []string{"http://example.org/caf%C3%A9/é", "http://example.org/€/“quoted”"}, ""},
		{"ISO-8859-1", mustEncode(charmap.ISO8859_1.NewEncoder().Bytes([]byte(latin1))), []string{"http://example.org/caf%C3%A9/é", "http://example.org/E/quoted"}, ""},
		{"latin1 label", mustEncode(charmap.ISO8859_1.NewEncoder().Bytes([]byte(strings.Replace(latin1, "ISO-8859-1", "latin1", 1)))), []string{"http://example.org/caf%C3%A9/é", "http://example.org/E/quoted"}, ""},
		{"windows-1252", mustEncode(charmap.Windows1252.NewEncoder().Bytes([]byte(text("windows-1252")))), []string{"http://example.org/caf%C3%A9/é", "http://example.org/€/“quoted”"}, ""},
		{"UTF-16LE with BOM", utf16(unicode.LittleEndian, unicode.UseBOM, "UTF-16"), []string{"http://example.org/caf%C3%A9/é", "http://example.org/€/“quoted”"}, ""},
		{"UTF-16BE with BOM", utf16(unicode.BigEndian, unicode.UseBOM, "UTF-16"), []string{"http://example.org/caf%C3%A9/é", "http://example.org/€/“quoted”"}, ""},
		{"UTF-16LE without BOM", utf16(unicode.LittleEndian, unicode.IgnoreBOM, "UTF-16LE"), []string{"http://example.org/caf%C3%A9/é", "http://example.org/€/“quoted”"}, ""},
		{"UTF-8 with BOM", append([]byte{0xef, 0xbb, 0xbf}, text("UTF-8")...), []string{"http://example.org/caf%C3%A9/é", "http://example.org/€/“quoted”"}, ""},
		{"unknown encoding", []byte(text("x-klingon")), nil, `unsupported encoding "x-klingon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := readAll(t, bytes.NewReader(tt.doc), Options{})
			if tt.wrong != "" {
				if res.err == nil || !strings.Contains(res.err.Error(), tt.wrong) || !errors.Is(res.err, ErrMalformed) {
					t.Fatalf("err = %v, want one saying %q", res.err, tt.wrong)
				}
				return
			}
			mustOK(t, res)
			var locs []string
			for _, e := range res.entries {
				locs = append(locs, e.Loc)
			}
			if strings.Join(locs, " ") != strings.Join(tt.locs, " ") {
				t.Fatalf("locs %q, want %q", locs, tt.locs)
			}
			if p := res.entries[0].Metadata.Path; p != "/r/Ünïcödé" {
				t.Errorf("path %q", p)
			}
		})
	}
}
