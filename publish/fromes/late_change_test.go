package fromes

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/es"
)

// readPublished reads the published document at url (under base) from out.
func readPublished(t *testing.T, out, base, url string) (manifest.Header, []manifest.Entry) {
	t.Helper()
	f, err := os.Open(filepath.Join(out, publish.Current, filepath.FromSlash(strings.TrimPrefix(url, base+"/"))))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := manifest.NewReader(f, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var es []manifest.Entry
	for {
		e, err := r.Next()
		if err == io.EOF {
			return r.Header(), es
		}
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, *e)
	}
}

// readLists reads the one set's Resource List (its at and locs) and
// every change of its Change Lists, as a Destination would.
func readLists(t *testing.T, out, base string) (at time.Time, resources map[string]bool, changes []manifest.Entry) {
	t.Helper()
	resources = map[string]bool{}
	_, sets := readPublished(t, out, base, base+"/"+publish.WellKnown)
	for _, s := range sets {
		_, caps := readPublished(t, out, base, s.Loc)
		for _, c := range caps {
			h, es := readPublished(t, out, base, c.Loc)
			var docs []struct {
				h  manifest.Header
				es []manifest.Entry
			}
			if h.IsIndex() {
				for _, p := range es {
					ph, pes := readPublished(t, out, base, p.Loc)
					docs = append(docs, struct {
						h  manifest.Header
						es []manifest.Entry
					}{ph, pes})
				}
			} else {
				docs = append(docs, struct {
					h  manifest.Header
					es []manifest.Entry
				}{h, es})
			}
			for _, d := range docs {
				switch c.Metadata.Capability {
				case manifest.ResourceList:
					at = d.h.Metadata.At
					for _, e := range d.es {
						resources[e.Loc] = true
					}
				case manifest.ChangeList:
					changes = append(changes, d.es...)
				}
			}
		}
	}
	return at, resources, changes
}

// TestLateChangeAfterAt: two sinks write one index; one stamps a change
// and sends it after the other's, later change, and after a publication
// in between: the change is stamped when it is sent, so a Destination that
// baselined from that publication's Resource List and applies the later
// Change Lists holds it.
func TestLateChangeAfterAt(t *testing.T) {
	z := zincAt(t)
	ctx := t.Context()
	index := z.NewIndex()
	// Sink A stamps its Put of /a; its batch is not sent yet.
	a, err := es.New(ctx, es.Options{URL: z.URL, Username: zincUser, Password: zincPassword, Index: index})
	if err != nil {
		t.Fatal(err)
	}
	ra := sink.Resource{URI: "http://example.com/a", Length: 5}
	if err := a.Put(ctx, &ra, strings.NewReader("alpha")); err != nil {
		t.Fatal(err)
	}
	// Sink B writes /b, later, and closes.
	write(t, z, es.Options{Index: index}, []op{put("http://example.com/b", "beta")})
	h := openHoldings(t, spec(z, index), 100)
	settle(t, h, 1, 1)
	out := t.TempDir()
	base := "http://127.0.0.1:1/pub"
	o := publish.Options{Out: out, BaseURL: base}
	if _, err := publish.Publish(ctx, h, o); err != nil {
		t.Fatal(err)
	}
	at, held, _ := readLists(t, out, base)

	// Sink A closes: its batch is sent.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, h, 2, 2)
	if _, err := publish.Publish(ctx, h, o); err != nil {
		t.Fatal(err)
	}
	at2, want, changes := readLists(t, out, base)
	for _, c := range changes {
		if !c.Metadata.Datetime.After(at) {
			continue
		}
		switch c.Metadata.Change {
		case manifest.Deleted:
			delete(held, c.Loc)
		default:
			held[c.Loc] = true
		}
	}
	for loc := range want {
		if !held[loc] {
			var dt time.Time
			for _, c := range changes {
				if c.Loc == loc {
					dt = c.Metadata.Datetime
				}
			}
			t.Errorf("a Destination that baselined from the Resource List at %s and applied the later changes never holds %s (its change is listed at %s; the next Resource List is at %s)",
				at.Format(time.RFC3339Nano), loc, dt.Format(time.RFC3339Nano), at2.Format(time.RFC3339Nano))
		}
	}
}
