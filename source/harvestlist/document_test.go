package harvestlist

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/xmlcap"
)

// FuzzReadDocument: readDocument reads a document element as
// encoding/xml's DecodeElement reads it into rawDocument — the same
// fields, or an error for both.
func FuzzReadDocument(f *testing.F) {
	for _, s := range []string{
		`<document><docid><scope>knb</scope><identifier>1</identifier><revision>2</revision></docid><documentType>t</documentType><documentURL>http://h/1</documentURL></document>`,
		`<document><docid><scope>a<b>x</b>c</scope></docid><docid><revision>3</revision></docid><other><scope>no</scope></other></document>`,
		`<document><documentURL><![CDATA[http://h/]]>2</documentURL><documentURL>http://h/3</documentURL><!-- c --><?pi x?></document>`,
		`<document xmlns:x="urn:x"><x:docid><x:scope> s </x:scope></x:docid><scope>top</scope></document>`,
		`<document><docid><scope>unclosed</docid></document>`,
		`<document><docid>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		start := func(dec interface{ Token() (xml.Token, error) }) (*xml.StartElement, bool) {
			for {
				tok, err := dec.Token()
				if err != nil {
					return nil, false
				}
				if se, ok := tok.(xml.StartElement); ok {
					return &se, true
				}
			}
		}
		want := rawDocument{}
		dec := xml.NewDecoder(strings.NewReader(doc))
		dec.Strict = true
		se, ok := start(dec)
		if !ok {
			return
		}
		wantErr := dec.DecodeElement(&want, se)
		// The same reading, its limits out of the way.
		capped := xmlcap.NewDecoder(strings.NewReader(doc), 1<<30, 1<<30)
		start(capped)
		got, gotErr := readDocument(capped)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("readDocument: %+v, %v; DecodeElement: %+v, %v", got, gotErr, want, wantErr)
		}
		if gotErr == nil && got != want {
			t.Errorf("readDocument: %+v; DecodeElement: %+v", got, want)
		}
	})
}

// endless is a reader of head, then body repeated n times, then tail,
// made as it is read (a document of hundreds of megabytes costs nothing to
// hold); read counts the bytes handed out.
type endless struct {
	head, body, tail []byte
	n                int // repetitions of body left
	cur              []byte
	read             int64
}

func (e *endless) Read(p []byte) (int, error) {
	for len(e.cur) == 0 {
		switch {
		case e.head != nil:
			e.cur, e.head = e.head, nil
		case e.n > 0:
			e.cur, e.n = e.body, e.n-1
		case e.tail != nil:
			e.cur, e.tail = e.tail, nil
		default:
			return 0, io.EOF
		}
	}
	k := copy(p, e.cur)
	e.cur = e.cur[k:]
	e.read += int64(k)
	return k, nil
}

func newEndless(head, body string, n int, tail string) *endless {
	return &endless{head: []byte(head), body: []byte(body), n: n, tail: []byte(tail)}
}

// TestListLimits: a list nested a million deep, or holding an attribute or
// a text of 200 MB, is refused once past the parser's limits — a few
// megabytes read, not the whole list held.
func TestListLimits(t *testing.T) {
	const head = `<harvestList xmlns="eml://ecoinformatics.org/harvestList">`
	tests := []struct {
		name string
		r    *endless
		want error
	}{
		{"nested a million deep", newEndless(head, "<document>", 1_000_000, ""), xmlcap.ErrTooDeep},
		{"a 200 MB attribute", newEndless(head+`<document x="`, "abcdefgh", 25_000_000, `"/>`), xmlcap.ErrTokenTooLarge},
		{"a 200 MB scope", newEndless(head+`<document><docid><scope>`, "abcdefgh", 25_000_000, `</scope></docid></document>`), xmlcap.ErrTokenTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Read(tc.r, func(Document) error { return nil }, func(*EntryError) error { return nil })
			if !errors.Is(err, tc.want) || !errclass.IsPermanent(err) {
				t.Fatalf("Read: %v; want a permanent error wrapping %v", err, tc.want)
			}
			if tc.r.read > 4*MaxTokenSize {
				t.Errorf("%d bytes read before the refusal", tc.r.read)
			}
		})
	}
}
