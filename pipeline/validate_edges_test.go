package pipeline

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRootCheckWellFormed: validation promises "well-formed XML
// whose root element is in that namespace" (docs/harvest-lists.md). A
// document with a second root element, or with text after its root, is
// not well-formed XML (XML 1.0 § 2.1: exactly one root element); and a
// DOCTYPE whose public identifier is quoted with apostrophes (XML 1.0
// PubidLiteral allows both quotes) does name that identifier.
func TestRootCheckWellFormed(t *testing.T) {
	const ns = "https://eml.ecoinformatics.org/eml-2.2.0"
	const fpiEML = "-//ecoinformatics.org//eml-dataset-2.0.0beta6//EN"
	tests := []struct {
		name, doc, docType string
		valid              bool
	}{
		{"two root elements", `<e:eml xmlns:e="` + ns + `"/><html><body>500 Internal Server Error</body></html>`, ns, false},
		{"text after the root", `<e:eml xmlns:e="` + ns + `"/>Warning: mysql_connect() failed`, ns, false},
		{"public identifier in apostrophes", `<!DOCTYPE eml PUBLIC '` + fpiEML + `' 'eml.dtd'><eml/>`, fpiEML, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rootCheck(strings.NewReader(tt.doc), tt.docType, "")
			switch {
			case tt.valid && err != nil:
				t.Errorf("rootCheck refuses a valid document: %v", err)
			case !tt.valid && !errors.Is(err, ErrInvalid):
				t.Errorf("rootCheck accepts a document that is not well-formed XML (err = %v)", err)
			}
		})
	}
}

// TestRootCheckMemory: "the check runs as the bytes stream to the
// sinks, with an XML parser on a pipe, so memory does not grow with the
// document" and "every XML reader caps nesting and token size"
// (docs/harvest-lists.md, docs/safety.md): a document served by a
// documentURL with one 64 MiB text node, or nested 2 million deep, is not
// held in memory by the validating parser.
func TestRootCheckMemory(t *testing.T) {
	const ns = "https://eml.ecoinformatics.org/eml-2.2.0"
	tests := []struct {
		name       string
		head, tail string
		body       func(n int64) io.Reader
		n          int64
	}{
		{"one huge text node", `<e:eml xmlns:e="` + ns + `"><abstract>`, `</abstract></e:eml>`,
			func(n int64) io.Reader { return io.LimitReader(repeatReader('a'), n) }, 64 << 20},
		{"deep nesting", `<e:eml xmlns:e="` + ns + `">`, ``,
			func(n int64) io.Reader { return io.LimitReader(repeatString("<a>"), n) }, 3 * 2 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			var peak atomic.Uint64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				var m runtime.MemStats
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					runtime.ReadMemStats(&m)
					if m.HeapAlloc > peak.Load() {
						peak.Store(m.HeapAlloc)
					}
				}
			}()
			doc := io.MultiReader(strings.NewReader(tt.head), tt.body(tt.n), strings.NewReader(tt.tail))
			err := rootCheck(doc, ns, "")
			close(stop)
			<-sampled
			grew := int64(peak.Load()) - int64(base.HeapAlloc)
			t.Logf("rootCheck: %v; heap grew by %d MiB for a document of %d MiB", err, grew>>20, tt.n>>20)
			if grew > 16<<20 {
				t.Errorf("validating a document of %d MiB took %d MiB of heap: memory grows with the document", tt.n>>20, grew>>20)
			}
		})
	}
}

// repeatReader is an endless stream of c.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// repeatString is an endless stream of s repeated.
type repeatString string

func (s repeatString) Read(p []byte) (int, error) {
	n := 0
	for n+len(s) <= len(p) {
		n += copy(p[n:], s)
	}
	if n == 0 {
		return copy(p, s), nil // (a short buffer: a prefix; good enough here)
	}
	return n, nil
}

// TestRootCheckTextBeforeTheRoot: text before the root element is not
// well-formed either; a document of text alone has no root element.
func TestRootCheckTextBeforeTheRoot(t *testing.T) {
	const ns = "https://eml.ecoinformatics.org/eml-2.2.0"
	for doc, want := range map[string]string{
		`Warning: mysql_connect() failed<e:eml xmlns:e="` + ns + `"/>`: "text before the root element",
		`docid,revision`: "no root element",
	} {
		if err := rootCheck(strings.NewReader(doc), ns, ""); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("rootCheck(%q) = %v, want %q", doc, err, want)
		}
	}
}
