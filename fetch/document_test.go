package fetch

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"

	"github.com/rsharvest/rsharvest/errclass"
)

func TestDecodeDocument(t *testing.T) {
	doc := []byte(`<?xml version="1.0"?><urlset>` + strings.Repeat("<url><loc>http://example.org/x</loc></url>", 200) + `</urlset>`)
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	zl := func(b []byte) []byte {
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	raw := func(b []byte) []byte {
		var buf bytes.Buffer
		w, _ := flate.NewWriter(&buf, flate.BestSpeed)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	bomb := gz(bytes.Repeat([]byte(" "), 10<<20))
	corrupt := gz(doc)
	corrupt[len(corrupt)-6] ^= 0xff // the CRC-32
	tests := []struct {
		name, url, ce string
		body          []byte
		max           int64
		want          []byte
		err           error
		says          string
	}{
		{name: "plain", url: "http://x/d.xml", body: doc, want: doc},
		{name: "gzip by URL", url: "http://x/d.xml.gz", body: gz(doc), want: doc},
		{name: "gzip unannounced", url: "http://x/d.xml", body: gz(doc), want: doc},
		{name: "Content-Encoding gzip", url: "http://x/d.xml", ce: "gzip", body: gz(doc), want: doc},
		{name: "Content-Encoding x-gzip", url: "http://x/d.xml", ce: "x-gzip", body: gz(doc), want: doc},
		{name: "Content-Encoding deflate, zlib", url: "http://x/d.xml", ce: "deflate", body: zl(doc), want: doc},
		{name: "Content-Encoding deflate, raw", url: "http://x/d.xml", ce: "Deflate", body: raw(doc), want: doc},
		{name: "zlib without Content-Encoding", url: "http://x/oai", body: zl(doc), want: doc},
		{name: ".gz already decompressed", url: "http://x/d.xml.gz", ce: "gzip", body: doc, want: doc},
		{name: "cap on what it holds", url: "http://x/d.xml", body: gz(doc), max: int64(len(doc)), want: doc},
		{name: "gzip bomb", url: "http://x/bomb.xml.gz", body: bomb, max: 1 << 20, err: ErrTooLarge, says: "larger than allowed"},
		{name: "plain over the cap", url: "http://x/d.xml", body: doc, max: 100, err: ErrTooLarge, says: "http://x/d.xml"},
		{name: "corrupt gzip", url: "http://x/c.xml.gz", body: corrupt, err: gzip.ErrChecksum, says: "gzip-compressed body cannot be read"},
		{name: "truncated gzip", url: "http://x/t.xml.gz", body: gz(doc)[:40], err: io.ErrUnexpectedEOF, says: "gzip-compressed body cannot be read"},
		{name: "deflate label on plain XML", url: "http://x/d.xml", ce: "deflate", body: doc, want: doc},
		{name: "deflate label on UTF-16", url: "http://x/d.xml", ce: "deflate", body: []byte("\xff\xfe<\x00?\x00"), want: []byte("\xff\xfe<\x00?\x00")},
		{name: "charset as Content-Encoding", url: "http://x/d.xml", ce: "UTF-8", body: doc, want: doc},
		{name: "br on plain XML", url: "http://x/d.xml", ce: "br", body: append([]byte("\xef\xbb\xbf\r\n "), doc...), want: append([]byte("\xef\xbb\xbf\r\n "), doc...)},
		{name: "gzip body labelled br", url: "http://x/d.xml", ce: "br", body: gz(doc), want: doc},
		{name: "br not decoded", url: "http://x/d.xml", ce: "br", body: []byte{0x0b, 0x02, 0x80, 0x3c}, says: `Content-Encoding "br"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeDocument(bytes.NewReader(tt.body), tt.url, tt.ce, tt.max)
			var got []byte
			if err == nil {
				got, err = io.ReadAll(r)
			}
			if tt.says != "" {
				if (tt.err != nil && !errors.Is(err, tt.err)) || !errclass.IsPermanent(err) || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), tt.url) {
					t.Fatalf("err = %v; want a permanent error wrapping %v, saying %q and naming %s", err, tt.err, tt.says, tt.url)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("got %d bytes, %v; want the document", len(got), err)
			}
		})
	}
}

func FuzzDecodeDocument(f *testing.F) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write([]byte("<urlset/>"))
	w.Close()
	f.Add(buf.Bytes(), "")
	f.Add([]byte("<urlset/>"), "gzip")
	f.Add([]byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01}, "deflate")
	f.Add([]byte{0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff}, "")
	f.Add([]byte("\xef\xbb\xbf <?xml version=\"1.0\"?><urlset/>"), "deflate")
	f.Add([]byte{0x0b, 0x02, 0x80, 0x3c}, "br")
	f.Add([]byte("\xff\xfe<\x00"), "utf-8")
	f.Fuzz(func(t *testing.T, body []byte, ce string) {
		const max = 1 << 16
		r, err := DecodeDocument(bytes.NewReader(body), "http://x/d.xml", ce, max)
		if err != nil {
			if !errclass.IsPermanent(err) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		n, err := io.Copy(io.Discard, r)
		if n > max {
			t.Fatalf("%d bytes read past the cap of %d", n, max)
		}
		if err != nil && !errclass.IsPermanent(err) {
			t.Fatalf("unclassified error %v", err)
		}
	})
}
