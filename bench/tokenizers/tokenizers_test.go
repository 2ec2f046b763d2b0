// Package tokenizers measures XML tokenizers on manifests shaped as real
// producers write them: the resync reference library's (compact) and a
// pretty-printed one with links, as DSpace writes them; 100,000 entries
// each. It reports µs per entry for encoding/xml (RawToken and Token),
// github.com/orisano/gosax (events, with each start element's name and
// attributes split), tdewolff/parse's XML lexer, and rsharvest's own
// manifest reader (built on encoding/xml), whose entries are complete.
package tokenizers

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"regexp"
	"testing"

	"github.com/orisano/gosax"
	"github.com/tdewolff/parse/v2"
	txml "github.com/tdewolff/parse/v2/xml"

	"github.com/rsharvest/rsharvest/manifest"
)

const entries = 100_000

// corpora: the resync reference producer's manifest (compact) and the
// same entries pretty-printed with rs:ln links, as DSpace writes them.
func corpora(tb testing.TB) map[string][]byte {
	raw, err := os.ReadFile("../../../shared/interop/resync-2.0.1/dump00000.xml")
	if err != nil {
		tb.Fatal(err)
	}
	url := regexp.MustCompile(`<url>.*?</url>`).FindAll(raw, -1)
	var compact, pretty bytes.Buffer
	head := `<?xml version='1.0' encoding='UTF-8'?>` + "\n" + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">`
	compact.WriteString(head + `<rs:md capability="resourcedump-manifest" />`)
	pretty.WriteString(head + "\n  <rs:md capability=\"resourcedump-manifest\" at=\"2024-01-01T00:00:00Z\"/>\n")
	for i := range entries {
		u := bytes.ReplaceAll(url[i%len(url)], []byte("r0"), []byte(fmt.Sprintf("x%d-r0", i)))
		compact.Write(u)
		p := bytes.ReplaceAll(u, []byte("<loc>"), []byte("\n    <loc>"))
		p = bytes.ReplaceAll(p, []byte("<lastmod>"), []byte("\n    <lastmod>"))
		p = bytes.ReplaceAll(p, []byte("<rs:md "), []byte("\n    <rs:ln rel=\"describedby\" href=\"http://example.org/meta\"/>\n    <rs:md "))
		p = bytes.ReplaceAll(p, []byte("</url>"), []byte("\n  </url>\n"))
		pretty.WriteString("  ")
		pretty.Write(p)
	}
	compact.WriteString("</urlset>")
	pretty.WriteString("</urlset>\n")
	return map[string][]byte{"resync": compact.Bytes(), "dspace-like": pretty.Bytes()}
}

func perEntry(b *testing.B) {
	b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N*entries), "µs/entry")
}

func BenchmarkTokenizers(b *testing.B) {
	for name, data := range corpora(b) {
		b.Run(name+"/encoding-xml-RawToken", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				d := xml.NewDecoder(bytes.NewReader(data))
				for {
					_, err := d.RawToken()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			perEntry(b)
		})
		b.Run(name+"/encoding-xml-Token", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				d := xml.NewDecoder(bytes.NewReader(data))
				for {
					_, err := d.Token()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			perEntry(b)
		})
		b.Run(name+"/gosax", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				r := gosax.NewReader(bytes.NewReader(data))
				for {
					e, err := r.Event()
					if err != nil {
						b.Fatal(err)
					}
					if e.Type() == gosax.EventEOF {
						break
					}
					if e.Type() == gosax.EventStart {
						// names and attributes, as a manifest reader needs them
						name, rest := gosax.Name(e.Bytes)
						_ = name
						for len(rest) > 0 {
							var a gosax.Attribute
							a, rest, err = gosax.NextAttribute(rest)
							if err != nil {
								b.Fatal(err)
							}
							if len(a.Key) == 0 {
								break
							}
						}
					}
				}
			}
			perEntry(b)
		})
		b.Run(name+"/tdewolff", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				l := txml.NewLexer(parse.NewInput(bytes.NewReader(data)))
				for {
					tt, _ := l.Next()
					if tt == txml.ErrorToken {
						if l.Err() != io.EOF {
							b.Fatal(l.Err())
						}
						break
					}
				}
			}
			perEntry(b)
		})
		b.Run(name+"/rsharvest-manifest-Reader", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				rd, err := manifest.NewReader(bytes.NewReader(data), manifest.Options{})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					_, err := rd.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != entries {
					b.Fatal(n)
				}
			}
			perEntry(b)
		})
	}
}
