package harvestlist

import (
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/source"
)

// TestListSpool: what the first pass spools, the second replays, in the
// same order and field for field; an entry error comes back with its
// text, permanent; an error of fn or bad ends the replay as it is.
func TestListSpool(t *testing.T) {
	type item struct {
		doc *Document
		bad *EntryError
	}
	items := []item{
		{doc: &Document{Scope: "knb-lter", Identifier: 1, Revision: 3, Type: "eml://ecoinformatics.org/eml-2.1.1", URL: "https://example.org/1.3", Line: 4}},
		{bad: &EntryError{DocID: "knb.x", Line: 12, Err: errclass.Permanentf("identifier %q is not a number", "x")}},
		{doc: &Document{Scope: "", Identifier: 0, Revision: 0, URL: "", Line: 0}},
		{doc: &Document{Scope: "ü\x00\n\t" + strings.Repeat("s", 70000), Identifier: 1<<63 - 1, Revision: 1<<62 + 5, Type: "text/xml", URL: "http://h/é?a=b&c", Line: 1 << 30}},
		{bad: &EntryError{Line: 99, Err: errclass.Permanentf("no scope")}},
	}
	s, err := newListSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, it := range items {
		if it.doc != nil {
			err = s.document(*it.doc)
		} else {
			err = s.entryError(it.bad)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var got []item
	err = s.replay(func(d Document) error { got = append(got, item{doc: &d}); return nil },
		func(ee *EntryError) error { got = append(got, item{bad: ee}); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(items) {
		t.Fatalf("replayed %d items, want %d", len(got), len(items))
	}
	for i, want := range items {
		switch g := got[i]; {
		case want.doc != nil:
			if g.doc == nil || !reflect.DeepEqual(*g.doc, *want.doc) {
				t.Errorf("item %d: got %+v, want document %+v", i, g, *want.doc)
			}
		case g.bad == nil:
			t.Errorf("item %d: got %+v, want entry error %v", i, g, want.bad)
		default:
			if g.bad.DocID != want.bad.DocID || g.bad.Line != want.bad.Line || g.bad.Error() != want.bad.Error() || !errclass.IsPermanent(g.bad) {
				t.Errorf("item %d: got entry error %q (permanent %v), want %q", i, g.bad, errclass.IsPermanent(g.bad), want.bad)
			}
		}
	}

	stop := errors.New("stop")
	n := 0
	err = s.replay(func(Document) error { n++; return stop }, func(*EntryError) error { return nil })
	if err != stop || n != 1 {
		t.Errorf("a replay whose fn fails: %v after %d documents, want %v after 1", err, n, stop)
	}
}

// failingReader gives a list's first bytes, then fails as err.
type failingReader struct {
	head string
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.head == "" {
		return 0, r.err
	}
	n := copy(p, r.head)
	r.head = r.head[n:]
	return n, nil
}

func (r *failingReader) Close() error { return nil }

// TestReadListFails: a list that cannot be read to its end emits nothing
// and is the source's error, of its reading's class (a temporary failure
// stays temporary, where a list that is not well-formed is permanent);
// the scratch directory is left empty either way.
func TestReadListFails(t *testing.T) {
	const head = `<?xml version="1.0"?><hrv:harvestList xmlns:hrv="` + Namespace + `"><document><docid><scope>s</scope><identifier>1</identifier><revision>1</revision></docid><documentURL>http://h/1</documentURL></document>`
	for _, tc := range []struct {
		name      string
		body      io.ReadCloser
		permanent bool
	}{
		{"the connection lost", &failingReader{head: head, err: errclass.NewRetryable(errors.New("connection reset"))}, false},
		{"cut short", &failingReader{head: head, err: io.EOF}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := &Planner{ScratchDir: dir, OpenDocument: func(context.Context, string) (io.ReadCloser, error) { return tc.body, nil }}
			emitted := 0
			_, err := p.Plan(t.Context(), source.Task{Source: "http://h/list.xml", Mode: source.Baseline}, nil, func(context.Context, source.Unit) error {
				emitted++
				return nil
			})
			var se *source.SourceError
			if !errors.As(err, &se) || errclass.IsPermanent(err) != tc.permanent {
				t.Errorf("Plan: %v (permanent %v), want a source error, permanent %v", err, errclass.IsPermanent(err), tc.permanent)
			}
			if emitted != 0 {
				t.Errorf("%d units emitted, want none", emitted)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("the scratch directory holds %d files, want none", len(left))
			}
		})
	}
}
