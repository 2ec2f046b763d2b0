package publish_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/publish/holdingstest"
	"github.com/rsharvest/rsharvest/state"
)

// TestStateHoldings: the state store's Holdings pass the conformance suite,
// with tombstones, updates and deletions among them, and when empty.
func TestStateHoldings(t *testing.T) {
	ctx := context.Background()
	open := func() *state.Store {
		st, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st := open()
	run, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "x"})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(src string, from, n int, change string) {
		var b state.Batch
		for i := from; i < from+n; i++ {
			u := fmt.Sprintf("%s/r/%d", src, i)
			r := state.Resource{URI: u, Source: src, Length: 3, Hashes: fixity.Hashes{SHA256: make([]byte, 32)}, Outcome: state.OutcomeWritten, RunID: run}
			c := state.ChangeRecord{URI: u, Source: src, Change: change, Length: 3, Hashes: r.Hashes, RunID: run}
			if change == state.ChangeDeleted {
				r = state.Resource{URI: u, Source: src, Length: -1, Outcome: state.OutcomeDeleted, Deleted: true, RunID: run}
				c = state.ChangeRecord{URI: u, Source: src, Change: change, Length: -1, RunID: run}
			}
			b.Resources, b.Changes = append(b.Resources, r), append(b.Changes, c)
		}
		if err := st.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	commit("http://a.example/rs", 0, 8, state.ChangeCreated)
	commit("http://oai.example/oai", 0, 3, state.ChangeCreated)
	commit("http://a.example/rs", 2, 3, state.ChangeUpdated)
	commit("http://a.example/rs", 7, 1, state.ChangeDeleted)
	holdingstest.Run(t, publish.FromState(st), holdingstest.Want{Resources: 10, Changes: 15})
	holdingstest.Run(t, publish.FromState(open()), holdingstest.Want{})
}
