package statetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

// testView: a snapshot's queries select what they say.
func testView[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	mine := errors.New("mine")
	if err := st.View(ctx, func(S) error { return mine }); err != mine {
		t.Errorf("View = %v, want fn's error unchanged", err)
	}
	must(t, st.View(ctx, func(v S) error {
		last, err := v.LastRecorded(ctx)
		if err != nil || !last.IsZero() {
			t.Errorf("empty store: LastRecorded = %v, %v; want zero", last, err)
		}
		srcs, err := v.Sources(ctx)
		if err != nil || len(srcs) != 0 {
			t.Errorf("empty store: Sources = %v, %v; want none", srcs, err)
		}
		n, err := v.CountResources(ctx, state.ResourceQuery{})
		if err != nil || n != 0 {
			t.Errorf("empty store: CountResources = %d, %v; want 0", n, err)
		}
		return nil
	}))

	run := mustRun(t, st)
	res := func(src, uri, outcome string) state.Resource {
		return state.Resource{URI: uri, Source: src, Length: 3, Outcome: outcome, Deleted: outcome == state.OutcomeDeleted, RunID: run}
	}
	chg := func(src, uri string) state.ChangeRecord {
		return state.ChangeRecord{URI: uri, Change: state.ChangeUpdated, Source: src, RunID: run, Length: 3, Hashes: hashes(), Type: "text/plain"}
	}
	must(t, st.Commit(ctx, state.Batch{
		Resources: []state.Resource{res(srcA, "u0", state.OutcomeWritten), res(srcA, "u1", state.OutcomeDeleted), res(srcA, "u2", state.OutcomeFailed),
			res(srcA, "u3", state.OutcomeUnchanged), res(srcB, "u0", state.OutcomeWritten)},
		Changes: []state.ChangeRecord{chg(srcA, "c0"), chg(srcA, "c1"), chg(srcA, "c2")},
	}))
	// Changes of a source with no resource, one superseded twice.
	must(t, st.Commit(ctx, state.Batch{Changes: []state.ChangeRecord{chg("http://c.example/", "c0"), chg("http://c.example/", "c1")}}))
	must(t, st.Commit(ctx, state.Batch{Changes: []state.ChangeRecord{chg("http://c.example/", "c0")}}))
	must(t, st.Commit(ctx, state.Batch{Changes: []state.ChangeRecord{chg("http://c.example/", "c0")}}))

	must(t, st.View(ctx, func(v S) error {
		srcs, err := v.Sources(ctx)
		if want := []string{srcA, srcB, "http://c.example/"}; err != nil || !slices.Equal(srcs, want) {
			t.Errorf("Sources = %v, %v; want %v", srcs, err, want)
		}
		for _, tc := range []struct {
			q    state.ResourceQuery
			want string
		}{
			{state.ResourceQuery{}, "a/u0 a/u1 a/u2 a/u3 b/u0"},
			{state.ResourceQuery{Source: srcA}, "a/u0 a/u1 a/u2 a/u3"},
			{state.ResourceQuery{Source: srcA, Held: true}, "a/u0 a/u3"},
			{state.ResourceQuery{Held: true}, "a/u0 a/u3 b/u0"},
			{state.ResourceQuery{Source: "http://c.example/"}, ""},
		} {
			var got []string
			if err := v.WalkResources(ctx, tc.q, func(r state.Resource) error {
				got = append(got, strings.TrimSuffix(strings.TrimPrefix(r.Source, "http://"), ".example/")+"/"+r.URI)
				return nil
			}); err != nil {
				return err
			}
			n, err := v.CountResources(ctx, tc.q)
			if err != nil {
				return err
			}
			if strings.Join(got, " ") != tc.want || n != int64(len(got)) {
				t.Errorf("WalkResources(%+v) = %v (counted %d), want %s", tc.q, got, n, tc.want)
			}
		}

		type walked struct {
			uri        string
			superseded bool
			recorded   time.Time
		}
		walk := func(q state.ChangeQuery) []walked {
			var out []walked
			if err := v.WalkChanges(ctx, q, func(c state.ChangeRecord) error {
				if c.Length != 3 || !reflect.DeepEqual(c.Hashes, hashes()) || c.Type != "text/plain" || c.RunID != run || c.Source != q.Source {
					t.Errorf("walked change %s lost its fields: %+v", c.URI, c)
				}
				out = append(out, walked{c.URI, c.Superseded, c.Recorded})
				return nil
			}); err != nil {
				t.Errorf("WalkChanges(%+v): %v", q, err)
			}
			for i := 1; i < len(out); i++ {
				if !out[i].recorded.After(out[i-1].recorded) {
					t.Errorf("WalkChanges(%+v): %v then %v, not in stamp order", q, out[i-1].recorded, out[i].recorded)
				}
			}
			return out
		}
		uris := func(ws []walked) string {
			var out []string
			for _, w := range ws {
				out = append(out, fmt.Sprintf("%s%s", w.uri, map[bool]string{true: "(superseded)"}[w.superseded]))
			}
			return strings.Join(out, " ")
		}
		all := walk(state.ChangeQuery{Source: "http://c.example/", Superseded: true})
		if got, want := uris(all), "c0(superseded) c1 c0(superseded) c0"; got != want {
			t.Errorf("WalkChanges(c, superseded) = %s, want %s", got, want)
		}
		if got, want := uris(walk(state.ChangeQuery{Source: "http://c.example/"})), "c0 c1 c0 c0"; got != want {
			t.Errorf("WalkChanges(c) = %s, want %s (Superseded only when asked)", got, want)
		}
		if len(all) == 4 {
			for _, tc := range []struct {
				after time.Time
				want  string
			}{
				{all[1].recorded, "c0 c0"},
				{all[1].recorded.Add(-time.Nanosecond), "c1 c0 c0"},
				{all[1].recorded.Add(time.Nanosecond), "c0 c0"},
				{all[3].recorded, ""},
			} {
				if got := uris(walk(state.ChangeQuery{Source: "http://c.example/", After: tc.after})); got != tc.want {
					t.Errorf("WalkChanges(after %v) = %s, want %s", tc.after, got, tc.want)
				}
			}
			last, err := v.LastRecorded(ctx)
			if err != nil || !last.Equal(all[3].recorded) {
				t.Errorf("LastRecorded = %v, %v; want the newest stamp %v", last, err, all[3].recorded)
			}
		}
		if got := uris(walk(state.ChangeQuery{Source: srcA})); got != "c0 c1 c2" {
			t.Errorf("WalkChanges(a) = %s, want c0 c1 c2", got)
		}
		if got := walk(state.ChangeQuery{Source: srcB}); len(got) != 0 {
			t.Errorf("WalkChanges(b) = %v, want none", got)
		}
		calls := 0
		if err := v.WalkChanges(ctx, state.ChangeQuery{Source: srcA}, func(state.ChangeRecord) error { calls++; return mine }); err != mine || calls != 1 {
			t.Errorf("WalkChanges with a failing fn = %v after %d calls; want fn's error unchanged after 1", err, calls)
		}
		calls = 0
		if err := v.WalkResources(ctx, state.ResourceQuery{}, func(state.Resource) error { calls++; return mine }); err != mine || calls != 1 {
			t.Errorf("Snapshot.WalkResources with a failing fn = %v after %d calls; want fn's error unchanged after 1", err, calls)
		}
		if err := v.WalkChanges(ctx, state.ChangeQuery{Source: srcA, After: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, func(state.ChangeRecord) error { return nil }); err == nil {
			t.Error("WalkChanges(after year 10000): no error")
		}
		return nil
	}))
}

// picture is what a snapshot shows of a store.
type picture struct {
	Last      time.Time
	Sources   []string
	All, Held int64
	Resources []state.Resource
	Changes   []state.ChangeRecord
}

func takePicture[S Snapshot](t *testing.T, v S) (picture, error) {
	ctx := t.Context()
	var p picture
	var err error
	if p.Last, err = v.LastRecorded(ctx); err != nil {
		return p, err
	}
	if p.Sources, err = v.Sources(ctx); err != nil {
		return p, err
	}
	if p.All, err = v.CountResources(ctx, state.ResourceQuery{}); err != nil {
		return p, err
	}
	if p.Held, err = v.CountResources(ctx, state.ResourceQuery{Held: true}); err != nil {
		return p, err
	}
	if err := v.WalkResources(ctx, state.ResourceQuery{}, func(r state.Resource) error {
		p.Resources = append(p.Resources, r)
		return nil
	}); err != nil {
		return p, err
	}
	for _, src := range p.Sources {
		if err := v.WalkChanges(ctx, state.ChangeQuery{Source: src, Superseded: true}, func(c state.ChangeRecord) error {
			p.Changes = append(p.Changes, c)
			return nil
		}); err != nil {
			return p, err
		}
	}
	return p, nil
}

// testViewStandsStill: while one goroutine holds a snapshot, another
// commits (without waiting for the snapshot to end), overwrites,
// deletes, forgets, adds a source; the snapshot shows the same before
// and after, and a new one shows the change.
func testViewStandsStill[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	must(t, commitWork(ctx, st, 0, 0, 3))
	var before picture
	must(t, st.View(ctx, func(v S) error {
		var err error
		if before, err = takePicture(t, v); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() {
			err := commitWork(ctx, st, 1, 0, 2)
			if err == nil {
				gone := state.Resource{URI: "hot/0", Source: workSource, Length: -1, Outcome: state.OutcomeDeleted, Deleted: true}
				err = st.Commit(ctx, state.Batch{
					Resources: []state.Resource{gone},
					Changes:   []state.ChangeRecord{{URI: "hot/0", Change: state.ChangeDeleted, Source: workSource, Length: -1}},
				})
			}
			if err == nil {
				err = st.ForgetResources(ctx, workSource, []string{"own/0/0"}, nil)
			}
			if err == nil {
				err = st.PutResources(ctx, []state.Resource{{URI: "n", Source: srcB, Length: 1, Outcome: state.OutcomeWritten}})
			}
			done <- err
		}()
		if err := <-done; err != nil {
			return err
		}
		after, err := takePicture(t, v)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(before, after) {
			t.Errorf("a snapshot changed while others committed:\nbefore %+v\nafter  %+v", before, after)
		}
		return nil
	}))
	must(t, st.View(ctx, func(v S) error {
		now, err := takePicture(t, v)
		if err != nil {
			return err
		}
		if want := before.All + 2 - 1 + 1; now.All != want || now.Held != before.Held+2-1-1+1 ||
			len(now.Changes) != len(before.Changes)+2*perBatch+1 || !now.Last.After(before.Last) || len(now.Sources) != 2 {
			t.Errorf("a new snapshot does not show the commits: before %d resources (%d held), %d changes, %v; now %d (%d held), %d, %v",
				before.All, before.Held, len(before.Changes), before.Sources, now.All, now.Held, len(now.Changes), now.Sources)
		}
		return nil
	}))
}
