package state

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// TestCommitShapes: batches whose rows share some columns and not others
// (every pattern of eight fields, more patterns than the shapes kept, NULL
// in some rows and not in others, a row that differs in one field only)
// are stored as given, resources and changes alike, the second pass
// overwriting the first, in a file and in PostgreSQL.
func TestCommitShapes(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		s, _ := openTemp(t)
		testCommitShapes(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		s, _ := openPostgresTemp(t)
		testCommitShapes(t, s)
	})
}

func testCommitShapes(t *testing.T, s *Store) {
	ctx := context.Background()
	run := mustRun(t, s)
	base := time.Date(2025, 6, 7, 8, 9, 10, 123456789, time.UTC)
	md5 := hashesOf(t, md5Hex)
	all := hashesOf(t, md5Hex+" "+sha1Hex+" "+sha256Hex)
	const perBatch = 2*rowsPerInsert + 7 // two inserts of many rows and some of one
	// resource gives row i of a batch in pass p: each bit of pattern
	// makes one field vary from row to row, else it is the batch's.
	resource := func(p, pattern, i int) Resource {
		vary := func(bit int) bool { return pattern&(1<<bit) != 0 }
		r := Resource{URI: fmt.Sprintf("http://example.com/shapes/%d/%d", pattern, i), Source: "http://example.com/",
			ResourceSet: "set", Length: 10, Type: "text/plain", Package: "pkg", Outcome: OutcomeWritten,
			RunID: run, ETag: `"e"`, Verified: VerifiedHash, Lastmod: base, ChangeTime: base.Add(time.Duration(p) * time.Hour)}
		if p > 0 {
			r.Type, r.Package = "text/xml", "pkg2"
		}
		if vary(0) {
			r.ResourceSet = fmt.Sprintf("set%d", i%3)
		}
		if vary(1) {
			r.Length = int64(i)
		}
		if vary(2) && i%2 == 0 {
			r.Hashes = md5
		} else if vary(2) {
			r.Hashes = all
		}
		if vary(3) && i%4 == 1 {
			r.Lastmod = time.Time{}
		} else if vary(3) {
			r.Lastmod = base.Add(time.Duration(i) * time.Second)
		}
		if vary(4) && i%5 == 0 {
			r.Outcome, r.Deleted, r.Length = OutcomeDeleted, true, -1
		}
		if vary(5) && (i == rowsPerInsert-1 || i == rowsPerInsert+1) {
			r.Type = "application/pdf" // one row differs: the last of an insert, the second
		}
		if vary(6) {
			r.ETag = fmt.Sprintf(`"e%d"`, i)
		}
		if vary(7) && i%3 == 0 {
			r.RunID = 0
		}
		return r
	}
	var want []Resource
	var changes []ChangeRecord
	for p := range 2 {
		for pattern := range 1 << 8 {
			if pattern%17 != 0 && pattern != 255 && p == 1 {
				continue // the second pass overwrites some batches
			}
			if pattern%3 != 0 && pattern != 255 && pattern != 1 {
				continue // 86 patterns of 256, far more than maxShapes
			}
			var b Batch
			for i := range perBatch {
				r := resource(p, pattern, i)
				b.Resources = append(b.Resources, r)
				if r.RunID != 0 {
					b.Changes = append(b.Changes, ChangeRecord{URI: r.URI, Change: ChangeCreated, Datetime: r.ChangeTime, RunID: run,
						Package: r.Package, Source: r.Source, Length: r.Length, Hashes: r.Hashes, Type: r.Type, Lastmod: r.Lastmod})
				}
			}
			if err := s.Commit(ctx, b); err != nil {
				t.Fatalf("pass %d, pattern %08b: %v", p, pattern, err)
			}
			changes = append(changes, b.Changes...)
			if p == 1 || pattern%17 != 0 && pattern != 255 {
				want = append(want, b.Resources...)
			}
		}
	}
	for _, w := range want {
		got, ok, err := s.Resource(ctx, w.Source, w.URI)
		if err != nil || !ok {
			t.Fatalf("%s: %v, %v", w.URI, ok, err)
		}
		w.Updated = got.Updated // the commit's time
		if d := diffResource(got, w); d != "" {
			t.Errorf("%s: %s", w.URI, d)
		}
	}
	n, err := s.CountResources(ctx, "http://example.com/", true)
	if err != nil || n != int64(len(want)) {
		t.Errorf("CountResources = %d, %v; want %d", n, err, len(want))
	}
	got, err := s.Changes(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(changes) {
		t.Fatalf("%d changes, want %d", len(got), len(changes))
	}
	checkShapes(t, s, true)
	for i, w := range changes {
		g := got[i]
		if g.URI != w.URI || g.Change != w.Change || !sameTime(g.Datetime, w.Datetime) || g.RunID != w.RunID || g.Package != w.Package ||
			g.Source != w.Source || g.Length != w.Length || !g.Hashes.Equal(w.Hashes) || g.Type != w.Type || !g.Lastmod.Equal(w.Lastmod) {
			t.Errorf("change %d = %+v, want %+v", i, g, w)
		}
	}
}

// checkShapes checks that s's inserts hold at most maxShapes shapes,
// prepared or asked for, none left half prepared, and, if used, that
// some were prepared.
func checkShapes(t *testing.T, s *Store, used bool) {
	t.Helper()
	for name, m := range map[string]*multiInsert{"resources": &s.upsertResource, "changes": &s.insertChange} {
		m.mu.Lock()
		prepared, asked := len(m.shapes), len(m.asked)
		for mask, p := range m.asked {
			if p == shapePreparing {
				t.Errorf("%s: shape %x left half prepared", name, mask)
			}
		}
		m.mu.Unlock()
		if prepared+asked > maxShapes || used && prepared == 0 {
			t.Errorf("%s: %d shapes prepared, %d asked for", name, prepared, asked)
		}
	}
}

// TestCommitShapesConcurrently: commits from several goroutines at once,
// each with rows sharing other columns, store every row, and prepare each
// shape once, within the bound.
func TestCommitShapesConcurrently(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	const workers, batches = 4, 12
	var g errgroup.Group
	for w := range workers {
		g.Go(func() error {
			for b := range batches {
				var batch Batch
				for i := range 2 * rowsPerInsert {
					r := Resource{URI: fmt.Sprintf("http://example.com/c/%d/%d/%d", w, b, i), Source: "http://example.com/",
						Length: 1, Outcome: OutcomeWritten, RunID: run, Type: fmt.Sprintf("type/%d", w)}
					switch (w + b) % 3 {
					case 1:
						r.Length = int64(i)
					case 2:
						r.ETag = fmt.Sprint(i)
					}
					batch.Resources = append(batch.Resources, r)
					batch.Changes = append(batch.Changes, ChangeRecord{URI: r.URI, Change: ChangeCreated, RunID: run, Source: r.Source, Length: r.Length, Type: r.Type})
				}
				if err := s.Commit(ctx, batch); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountResources(ctx, "http://example.com/", true); err != nil || n != workers*batches*2*rowsPerInsert {
		t.Errorf("CountResources = %d, %v; want %d", n, err, workers*batches*2*rowsPerInsert)
	}
	changes, err := s.Changes(ctx, run)
	if err != nil || len(changes) != workers*batches*2*rowsPerInsert {
		t.Errorf("%d changes, %v; want %d", len(changes), err, workers*batches*2*rowsPerInsert)
	}
	for _, c := range changes {
		var w, b, i int
		if _, err := fmt.Sscanf(c.URI, "http://example.com/c/%d/%d/%d", &w, &b, &i); err != nil || c.Type != fmt.Sprintf("type/%d", w) {
			t.Fatalf("change %+v", c)
		}
		if want := int64(1); (w+b)%3 == 1 && c.Length != int64(i) || (w+b)%3 != 1 && c.Length != want {
			t.Fatalf("change %+v: length", c)
		}
	}
	checkShapes(t, s, true)
}

// TestPrepareWanted: a shape that cannot be prepared is refused, not
// asked for again, and fails no commit; a cancelled context leaves the
// shapes asked for to the next commit, and says so.
func TestPrepareWanted(t *testing.T) {
	s, _ := openTemp(t)
	m := &multiInsert{names: []string{"a", "b"}, query: func(cols, values string) string {
		return "INSERT INTO no_such_table (" + cols + ") VALUES " + values
	}}
	if _, st := m.shape(1); st != nil { // nil: m's plain statement, not prepared here
		t.Fatalf("a shape before any was prepared: %v", st)
	}
	if err := m.prepareWanted(context.Background(), s.w); err != nil {
		t.Fatalf("a refused shape failed the commit: %v", err)
	}
	if p, ok := m.asked[1]; !ok || p != shapeRefused || len(m.shapes) != 0 {
		t.Fatalf("asked %v, shapes %v: want shape 1 refused", m.asked, m.shapes)
	}
	m.shape(1)
	if m.asked[1] != shapeRefused {
		t.Errorf("a refused shape was asked for again: %v", m.asked)
	}

	m.query = func(cols, values string) string { return "SELECT " + strings.ReplaceAll(values, "(", "") }
	m.shape(2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.prepareWanted(ctx, s.w); err == nil {
		t.Fatal("prepared with a cancelled context")
	}
	if m.asked[2] != shapeWanted {
		t.Errorf("after a cancelled commit, asked %v: want shape 2 still wanted", m.asked)
	}
}
