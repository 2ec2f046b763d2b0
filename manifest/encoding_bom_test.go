package manifest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"github.com/rsharvest/rsharvest/internal/xmlcap"
)

// TestEncodingsAsProducersWriteThem: what real producers get wrong about
// encodings is read as they meant it — curly quotes, dashes and € written
// by Windows software in a document declaring ISO-8859-1 (read as
// windows-1252, as browsers do), a byte order mark contradicting the
// declaration (the mark wins, with a warning), UTF-16 without a mark — and
// what cannot be decoded fails the document, naming the label.
func TestEncodingsAsProducersWriteThem(t *testing.T) {
	text := func(enc string) string {
		decl := ""
		if enc != "" {
			decl = `<?xml version="1.0" encoding="` + enc + `"?>` + "\n"
		}
		return decl + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">` +
			`<rs:md capability="resourcelist"/>` +
			`<url><loc>http://example.org/café/€–“quoted”</loc><rs:md path="/r/Ünïcödé"/></url>` +
			"</urlset>\n"
	}
	const loc = "http://example.org/café/€–“quoted”"
	encode := func(enc interface{ Bytes([]byte) ([]byte, error) }, s string) []byte {
		b, err := enc.Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bom8 := "\xef\xbb\xbf"
	const slip = "byte order mark (or UTF-16 bytes) contradicts"
	tests := []struct {
		name  string
		doc   []byte
		warn  string // a warning logged, "" for none about the encoding
		wrong string // a substring of the error, when the document fails
	}{
		{name: "windows-1252 bytes declared ISO-8859-1", doc: encode(charmap.Windows1252.NewEncoder(), text("ISO-8859-1"))},
		{name: "windows-1252 bytes declared latin1", doc: encode(charmap.Windows1252.NewEncoder(), text("latin1"))},
		{name: "windows-1252 bytes declared cp1252", doc: encode(charmap.Windows1252.NewEncoder(), text("cp1252"))},
		{name: "UTF-8 declared utf8", doc: []byte(text("utf8"))},
		{name: "UTF-8 mislabelled UTF-16", doc: []byte(text("UTF-16"))},
		{name: "UTF-8 BOM declaring ISO-8859-1", doc: []byte(bom8 + text("ISO-8859-1")), warn: slip},
		{name: "UTF-16LE BOM declaring ISO-8859-1", doc: encode(unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder(), text("ISO-8859-1")), warn: slip},
		{name: "UTF-16BE BOM declaring UTF-8", doc: encode(unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewEncoder(), text("UTF-8")), warn: slip},
		{name: "UTF-16BE without BOM", doc: encode(unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM).NewEncoder(), text("UTF-16BE"))},
		{name: "UTF-16LE BOM, no declaration", doc: encode(unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder(), text(""))},
		{name: "UTF-16 BOM declaring UTF-16", doc: encode(unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder(), text("utf-16"))},
		{name: "label x/text cannot decode", doc: []byte(strings.ReplaceAll(text("UTF-7"), "€–“quoted”", "x")), wrong: `unsupported encoding "UTF-7"`},
		{name: "label nobody knows", doc: []byte(text("x-mac-klingon")), wrong: `unsupported encoding "x-mac-klingon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := readAll(t, bytes.NewReader(tt.doc), Options{})
			if tt.wrong != "" {
				if res.err == nil || !strings.Contains(res.err.Error(), tt.wrong) || !errors.Is(res.err, ErrMalformed) {
					t.Fatalf("err = %v, want a malformed document saying %q", res.err, tt.wrong)
				}
				return
			}
			mustOK(t, res)
			if len(res.entries) != 1 || res.entries[0].Loc != loc || res.entries[0].Metadata.Path != "/r/Ünïcödé" {
				t.Fatalf("entries %+v, want %s", res.entries, loc)
			}
			if got := strings.Contains(res.warn, slip); got != (tt.warn != "") {
				t.Errorf("warnings:\n%s\nwant %q: %v", res.warn, slip, tt.warn != "")
			}
		})
	}
}

// TestCharsetLabels: labels are looked up as browsers do (WHATWG), then in
// the IANA registry; encodings the WHATWG replaces with U+FFFD are refused.
func TestCharsetLabels(t *testing.T) {
	tests := []struct {
		label string
		in    string
		want  string // "" when the label is refused
	}{
		{"ISO-8859-1", "caf\xe9 \x93q\x94 \x80", "café “q” €"},
		{" Latin1 ", "caf\xe9", "café"},
		{"windows-1252", "\x96", "–"},
		{"cp1252", "\x85", "…"},
		{"ISO-8859-15", "\xa4", "€"},
		{"Shift_JIS", "\x93\xfa\x96\x7b", "日本"},
		{"IBM437", "caf\x82", "café"}, // IANA only
		{"US-ASCII", "caf\xc3\xa9", "caf\xc3\xa9"},
		{"UTF-16", "<x/>", "<x/>"}, // UTF-8 mislabelled
		{"ISO-2022-KR", "", ""},
		{"UTF-7", "", ""},
		{"x-klingon", "", ""},
	}
	for _, tt := range tests {
		r, err := xmlcap.CharsetReader(tt.label, strings.NewReader(tt.in))
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(tt.label)) {
				t.Errorf("%s: err = %v, want one naming the label", tt.label, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.label, err)
			continue
		}
		var got strings.Builder
		if _, err := io.Copy(&got, r); err != nil || got.String() != tt.want {
			t.Errorf("%s: %q (%v), want %q", tt.label, got.String(), err, tt.want)
		}
	}
}
