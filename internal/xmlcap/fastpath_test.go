package xmlcap

import (
	"io"
	"strings"
	"testing"
)

// TestFastPathTaken: gosax reads the body of a document as producers write
// them, declaration, comments and references included, and encoding/xml
// only what gosax is not trusted with.
func TestFastPathTaken(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<!-- made by x -->\n")
	b.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">` + "\r\n")
	b.WriteString(`<rs:md capability="resourcelist" at="2024-01-01T00:00:00Z"/>` + "\r\n")
	for range 1000 {
		b.WriteString("  <url><loc>http://example.org/r?a=1&amp;b=2</loc><lastmod>2024-01-01T00:00:00Z</lastmod>" +
			`<rs:md hash="sha-256:abc" length="12"/><rs:ln rel="describedby" href="http://example.org/m?x=&quot;y&quot;"/></url>` + "\r\n")
	}
	b.WriteString("</urlset>\n")
	doc := b.String()
	cases := []struct {
		name   string
		doc    string
		strict bool
		fast   float64 // the least share of the input gosax reads
	}{
		{"manifest", doc, true, 0.99},
		{"an encoding/xml document halfway", strings.Replace(doc, "<url>", "<url><![CDATA[x]]>", 500), true, 0.4},
		{"Latin-1", strings.Replace(doc, "UTF-8", "ISO-8859-1", 1), true, 0},
		{"not strict", doc, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder(strings.NewReader(c.doc), 0, 0)
			d.Strict = c.strict
			for {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if share := float64(d.fastOff) / float64(len(c.doc)); share < c.fast || c.fast == 0 && share > 0 {
				t.Fatalf("gosax read %.3f of the document, want %v", share, c.fast)
			}
			if d.InputOffset() != int64(len(c.doc)) {
				t.Fatalf("offset %d at the end, want %d", d.InputOffset(), len(c.doc))
			}
		})
	}
}
