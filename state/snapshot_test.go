package state

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
)

// TestView: a Snapshot's queries read one state, change stamps are unique
// and increase in commit order (even when the clock goes back), and the
// resource and change walks select what their queries say.
func TestView(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	sum := fixity.Hashes{MD5: make([]byte, 16)}
	var rs []Resource
	for i, src := range []string{"A", "A", "A", "B"} {
		r := Resource{URI: fmt.Sprintf("u%d", i), Source: src, Length: 3, Hashes: sum, Outcome: OutcomeWritten, RunID: run}
		if i == 1 {
			r.Deleted, r.Outcome = true, OutcomeDeleted
		}
		if i == 2 {
			r.Outcome = OutcomeFailed
		}
		rs = append(rs, r)
	}
	batch := func(src string, n int) Batch {
		var b Batch
		for i := range n {
			b.Changes = append(b.Changes, ChangeRecord{URI: fmt.Sprintf("c%d", i), Change: ChangeCreated, Source: src, RunID: run, Length: 3, Hashes: sum, Type: "text/plain"})
		}
		return b
	}
	b := batch("A", 3)
	b.Resources = rs
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	// A stamp far ahead: the next commit's stamps must still follow it.
	future := time.Now().Add(time.Hour).UTC()
	if _, err := s.w.ExecContext(ctx, "UPDATE changes SET recorded = ? WHERE uri = 'c2'", future.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, batch("B", 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, batch("B", 1)); err != nil { // c0 again
		t.Fatal(err)
	}

	err := s.View(ctx, func(v *Snapshot) error {
		// Committed after the view began: not seen.
		if err := s.Commit(ctx, batch("A", 1)); err != nil {
			return err
		}
		last, err := v.LastRecorded(ctx)
		if err != nil {
			return err
		}
		if !last.After(future.Add(time.Nanosecond)) {
			t.Errorf("LastRecorded = %v, want after %v (the stamps after the future one)", last, future)
		}
		srcs, err := v.Sources(ctx)
		if err != nil {
			return err
		}
		if fmt.Sprint(srcs) != "[A B]" {
			t.Errorf("Sources = %v", srcs)
		}
		for _, tc := range []struct {
			q    ResourceQuery
			want string
		}{
			{ResourceQuery{}, "[u0 u1 u2 u3]"},
			{ResourceQuery{Source: "A"}, "[u0 u1 u2]"},
			{ResourceQuery{Source: "A", Held: true}, "[u0]"},
		} {
			var got []string
			if err := v.WalkResources(ctx, tc.q, func(r Resource) error { got = append(got, r.URI); return nil }); err != nil {
				return err
			}
			n, err := v.CountResources(ctx, tc.q)
			if err != nil {
				return err
			}
			if fmt.Sprint(got) != tc.want || n != int64(len(got)) {
				t.Errorf("WalkResources(%+v) = %v (count %d), want %s", tc.q, got, n, tc.want)
			}
		}
		var prev time.Time
		var got []string
		walk := func(src string, after time.Time) error {
			got, prev = nil, time.Time{}
			return v.WalkChanges(ctx, ChangeQuery{Source: src, After: after, Superseded: true}, func(c ChangeRecord) error {
				if !c.Recorded.After(prev) {
					t.Errorf("change %s recorded %v, not after %v", c.URI, c.Recorded, prev)
				}
				if c.Length != 3 || c.Hashes.MD5 == nil || c.Type != "text/plain" {
					t.Errorf("change %s lost its fixity: %+v", c.URI, c)
				}
				prev = c.Recorded
				got = append(got, fmt.Sprintf("%s%s", c.URI, map[bool]string{true: "(superseded)"}[c.Superseded]))
				return nil
			})
		}
		if err := walk("A", time.Time{}); err != nil {
			return err
		}
		if fmt.Sprint(got) != "[c0 c1 c2]" {
			t.Errorf("changes of A = %v", got)
		}
		if err := walk("B", future); err != nil {
			return err
		}
		if fmt.Sprint(got) != "[c0(superseded) c1 c0]" {
			t.Errorf("changes of B after the future stamp = %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
