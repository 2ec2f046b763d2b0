package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/internal/sqlitefile"
)

// TestLinkTimeOutOfRange: a link's time past the year 9999 refuses the
// commit, as every time out of range does, instead of the resource's
// links being lost.
func TestLinkTimeOutOfRange(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	r := Resource{URI: "http://x/a", Source: "http://x/", Length: 1, Outcome: OutcomeWritten,
		Links: []Link{{Rel: "via", Href: "http://orig/a", Modified: far}, {Rel: "describedby", Href: "http://x/meta"}}}
	err := s.Commit(ctx, Batch{Resources: []Resource{r}})
	if err != nil {
		return // rejected: as documented
	}
	got, _, err := s.Resource(ctx, r.Source, r.URI)
	if err != nil {
		t.Fatal(err)
	}
	t.Errorf("Commit accepted a link time in year 10000 and stored %d links of 2: %+v", len(got.Links), got.Links)
}

// TestLinkTimeComesBackUTC: a link's time given in another zone comes
// back in UTC, equal to it, as every time does.
func TestLinkTimeComesBackUTC(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	m := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 2*3600))
	r := Resource{URI: "http://x/a", Source: "http://x/", Length: 1, Outcome: OutcomeWritten,
		Links: []Link{{Rel: "via", Href: "http://orig/a", Modified: m}}}
	if err := s.Commit(ctx, Batch{Resources: []Resource{r}}); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Resource(ctx, r.Source, r.URI)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Links) != 1 || !sameTime(got.Links[0].Modified, m) {
		t.Errorf("link Modified came back %v (location %v), want %v in UTC", got.Links[0].Modified, got.Links[0].Modified.Location(), m.UTC())
	}
}

// TestReadableEmptyDatabaseMadePrivate: an SQLite database other users
// may read that holds nothing yet (no application id, no schema) is made
// private (0600) before it becomes a state store, which holds the
// registry's credentials; and a state store whose application id is still
// in its write-ahead log, made readable, is refused (ErrReadable) as one
// whose header says so is.
func TestReadableEmptyDatabaseMadePrivate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sqlitefile.Open(path, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (x); DROP TABLE t"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		if errors.Is(err, ErrReadable) {
			return
		}
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.PutSite(ctx, Site{Name: "a", Definition: `{"headers":{"Authorization":"secret"}}`}); err != nil {
		t.Logf("PutSite: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("Open took a database others may read (mode %04o) as its state store, and left it so", fi.Mode().Perm())
	}
	// Made readable while its application id may be in the log alone.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path)
	if err == nil {
		s2.Close()
	}
	if !errors.Is(err, ErrReadable) {
		t.Errorf("a second Open of the state store made readable: %v, want ErrReadable", err)
	}
}

// TestDocumentAndPackageTimes: a document's or a package record's time
// past the year 9999 is refused, not stored to be read back as the zero
// time.
func TestDocumentAndPackageTimes(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	far := time.Date(10000, 6, 1, 0, 0, 0, 0, time.UTC)
	if err := s.PutDocument(ctx, Document{URL: "http://x/cl.xml", ETag: `"e"`, Body: []byte("<x/>"), Updated: far}); err == nil {
		d, ok, err := s.Document(ctx, "http://x/cl.xml")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if !d.Updated.Equal(far) {
			t.Errorf("PutDocument accepted Updated %v and it reads back as %v", far, d.Updated)
		}
	}
	if err := s.SetPackagesDone(ctx, []PackageRecord{{URL: "http://x/p.zip", Sinks: "fs:/d", Fingerprint: "f", Resources: 1, Updated: far}}); err == nil {
		p, ok, err := s.PackageDone(ctx, "http://x/p.zip", "fs:/d")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if !p.Updated.Equal(far) {
			t.Errorf("SetPackagesDone accepted Updated %v and it reads back as %v", far, p.Updated)
		}
	}
}

// TestResolvedWithNothingHeld: Batch.Resolved clears a retry only when a
// version of the resource is held (at least as new as the change that
// failed): with none held, the retry stays.
func TestResolvedWithNothingHeld(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if err := s.Commit(ctx, Batch{Retries: []Retry{{Source: "s", URI: "u", Record: "rec"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, Batch{Resolved: []Key{{Source: "s", URI: "u"}}}); err != nil {
		t.Fatal(err)
	}
	_, held, _ := s.Resource(ctx, "s", "u")
	rs, err := s.Retries(ctx, "s", "")
	if err != nil {
		t.Fatal(err)
	}
	if !held && len(rs) == 0 {
		t.Errorf("Resolved cleared the retry of %q though no version of it is held", "u")
	}
}
