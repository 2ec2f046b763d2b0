package xmlcap_test

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/internal/xmlcap"
)

var errSourceReset = errors.New("connection reset")

// chunkReader hands out chunks, one per Read, then err (with the last
// chunk when together is set, else on the Read after it).
type chunkReader struct {
	chunks   []string
	err      error
	together bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		if r.err == nil {
			return 0, io.EOF
		}
		return 0, r.err
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	if len(r.chunks) == 0 && r.together && r.err != nil {
		return n, r.err
	}
	return n, nil
}

type tokenStep struct {
	tok    string
	off    int64
	line   int
	errMsg string
}

func (s tokenStep) String() string {
	if s.errMsg != "" {
		return "error " + s.errMsg
	}
	return fmt.Sprintf("%s @%d line %d", s.tok, s.off, s.line)
}

func readSteps(next func() (xml.Token, error), off func() int64, pos func() (int, int)) []tokenStep {
	var out []tokenStep
	for len(out) < 10000 {
		tok, err := next()
		if err != nil {
			return append(out, tokenStep{errMsg: err.Error()})
		}
		l, _ := pos()
		out = append(out, tokenStep{tok: fmt.Sprintf("%#v", xml.CopyToken(tok)), off: off(), line: l})
	}
	return out
}

// compareSteps reads what mk makes with encoding/xml's strict Decoder and
// with an xmlcap Decoder under limits the input cannot reach, and compares
// the tokens, offsets, lines and errors.
func compareSteps(t *testing.T, mk func() io.Reader) {
	t.Helper()
	ref := xml.NewDecoder(mk())
	ref.CharsetReader = xmlcap.CharsetReader
	got := xmlcap.NewDecoder(mk(), math.MaxInt32, math.MaxInt32)
	r := readSteps(ref.Token, ref.InputOffset, ref.InputPos)
	g := readSteps(got.Token, got.InputOffset, got.InputPos)
	if !reflect.DeepEqual(r, g) {
		t.Errorf("encoding/xml:\n  %v\nxmlcap:\n  %v", r, g)
	}
}

// TestLimitAfterHandBack: what gosax read ahead and hands back to
// encoding/xml (here at a CDATA section, a character reference) is counted
// against the limit again as encoding/xml reads it: a 5000-byte token
// after it fails a 100-byte limit.
func TestLimitAfterHandBack(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for _, doc := range []string{
		`<?xml version="1.0"?><a><![CDATA[x]]>` + long + `</a>`,
		`<?xml version="1.0"?><a>&#65;<b c="` + long + `"/></a>`,
		`<!-- c -->&#65;<![CDATA[` + long + `]]>`,
	} {
		d := xmlcap.NewDecoder(strings.NewReader(doc), 100, 0)
		for {
			tok, err := d.Token()
			if err != nil {
				if !errors.Is(err, xmlcap.ErrTokenTooLarge) {
					t.Errorf("%.60q: %v, want ErrTokenTooLarge", doc, err)
				}
				break
			}
			if n := tokenSize(tok); n > 100 {
				t.Errorf("%.60q: a %T of %d bytes under a 100-byte limit", doc, tok, n)
				break
			}
		}
	}
}

func tokenSize(tok xml.Token) int {
	switch t := tok.(type) {
	case xml.CharData:
		return len(t)
	case xml.Comment:
		return len(t)
	case xml.Directive:
		return len(t)
	case xml.ProcInst:
		return len(t.Inst)
	case xml.StartElement:
		n := len(t.Name.Local)
		for _, a := range t.Attr {
			n += len(a.Name.Local) + len(a.Value)
		}
		return n
	}
	return 0
}

// TestSourceErrorInOrder: what comes before a source's error (a text, a
// directive, a syntax error) is returned before it, as encoding/xml
// returns it, although gosax read ahead to the error.
func TestSourceErrorInOrder(t *testing.T) {
	for _, c := range []struct {
		name     string
		chunks   []string
		together bool
	}{
		{"text then error", []string{`<?xml version="1.0"?><a>text`}, false},
		{"text and error together", []string{`<?xml version="1.0"?><a>text`}, true},
		{"directive with the error", []string{`<?xml version="1.0"?><a><!x>`}, true},
		{"bad attribute then error", []string{`<?xml version="1.0"?><a><b c=d e="f"`}, false},
		{"bad comment then error", []string{`<?xml version="1.0"?><a><!-- x -- y`}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			compareSteps(t, func() io.Reader {
				return &chunkReader{chunks: append([]string(nil), c.chunks...), err: errSourceReset, together: c.together}
			})
		})
	}
}

// TestLongTextUnderLimit: a text longer than gosax may hold is read by
// encoding/xml under the limit: no token returned is longer than it.
func TestLongTextUnderLimit(t *testing.T) {
	doc := `<?xml version="1.0"?><a>` + strings.Repeat("x", 200000) + `</a>`
	for _, max := range []int{1000, 70000} {
		d := xmlcap.NewDecoder(strings.NewReader(doc), max, 0)
		for {
			tok, err := d.Token()
			if err != nil {
				break
			}
			if n := tokenSize(tok); n > max {
				t.Errorf("limit %d: a %T of %d bytes", max, tok, n)
			}
		}
	}
}

// TestDoctypeWithQuotedAngles: a DOCTYPE whose quoted entity value holds
// a '<' (gosax counts it, and would run on through the document) is read
// by encoding/xml, and a document of small tokens reads to its end under a
// small limit.
func TestDoctypeWithQuotedAngles(t *testing.T) {
	doc := `<?xml version="1.0"?><!DOCTYPE a [<!ENTITY e "a<b">]><a>` +
		strings.Repeat("<b>x</b>", 50) + `1 &gt; 0 but also 2 > 1</a>`
	d := xmlcap.NewDecoder(strings.NewReader(doc), 100, 0)
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("every token is under 100 bytes: %v", err)
		}
	}
}

// TestSyntaxErrorBeforeLimit: a malformed tag, comment or text fails with
// encoding/xml's syntax error, found in its first bytes, not with the
// limit that gosax, scanning on to a far '>' or "-->", would meet.
func TestSyntaxErrorBeforeLimit(t *testing.T) {
	long := strings.Repeat("y", 200)
	for _, c := range []struct{ doc, want string }{
		{`<!----><a><d z=` + long + `/></a>`, "unquoted or missing attribute value in element"},
		{`<!----><a><!-- x -- ` + long + `--></a>`, `invalid sequence "--" not allowed in comments`},
		{`<!----><a><d z="x<` + long + `"/></a>`, "unescaped < inside quoted string"},
	} {
		d := xmlcap.NewDecoder(strings.NewReader(c.doc), 100, 0)
		var err error
		for err == nil {
			_, err = d.Token()
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: %v, want the syntax error %q", c.doc, err, c.want)
		}
	}
}

// TestAlternationCost: a document that makes the two tokenizers alternate
// (a character reference in every element) costs no more to read than a
// few times its size: what gosax read ahead is not copied again at every
// hand-back.
func TestAlternationCost(t *testing.T) {
	doc := `<?xml version="1.0"?><r>` + strings.Repeat(`<a>&#65;</a>`, 20000) + `</r>`
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := xmlcap.NewDecoder(strings.NewReader(doc), 0, 0)
	for {
		if _, err := d.Token(); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 50*uint64(len(doc)) {
		t.Errorf("reading %d bytes allocated %d bytes", len(doc), alloc)
	}
}
