package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

// staleHolder opens two stores (two machines) on one PostgreSQL database;
// a takes the source's lease, its session is ended by the server (its
// connection cut), and b takes the lease: a is a stale holder that goes on.
func staleHolder(t *testing.T) (a, b *Store, first, second *Lease, ctx context.Context) {
	t.Helper()
	ctx = t.Context()
	server, stop, err := testbin.Postgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	a, err = Open(ctx, server)
	must(t, err)
	t.Cleanup(func() { a.Close() })
	b, err = Open(ctx, server)
	must(t, err)
	t.Cleanup(func() { b.Close() })
	first, err = a.Lease(ctx, SourceLease("s"), "stale", 0)
	must(t, err)
	admin, err := sql.Open("pgx", server)
	must(t, err)
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted"); err != nil {
		t.Fatal(err)
	}
	second, err = b.Lease(ctx, SourceLease("s"), "new holder", 10*time.Second)
	must(t, err)
	t.Cleanup(func() { second.Release() })
	// The fence works for batches: the stale holder's Commit is refused.
	run, err := a.BeginRun(ctx, Run{Mode: "baseline", Source: "s"})
	must(t, err)
	if err := a.Commit(ctx, Batch{Fence: first, Resources: []Resource{{URI: "x", Source: "s", Length: 1, Outcome: OutcomeWritten, RunID: run}}}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale commit: %v, want ErrLeaseLost", err)
	}
	return a, b, first, second, ctx
}

// TestStaleHolderCannotForgetNorInterrupt: a harvest whose source lease
// went to another (its connection cut) cannot commit after it
// (Batch.Fence), nor forget the new holder's records (ForgetResources: a
// sink's late failure, an audit's repair) nor mark its run interrupted
// (MarkInterrupted: a run beginning, a spread harvest dividing), given its
// lease as their fence.
func TestStaleHolderCannotForgetNorInterrupt(t *testing.T) {
	a, b, first, second, ctx := staleHolder(t)
	run, err := b.BeginRun(ctx, Run{Mode: "baseline", Source: "s"})
	must(t, err)
	must(t, b.Commit(ctx, Batch{Fence: second, Resources: []Resource{{URI: "u", Source: "s", Length: 1, Outcome: OutcomeWritten, RunID: run}}}))

	// The stale holder goes on as its run does.
	if err := a.ForgetResources(ctx, "s", []string{"u"}, first); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the stale holder's ForgetResources: %v, want ErrLeaseLost", err)
	}
	if _, err := a.MarkInterrupted(ctx, time.Now(), "s", first); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the stale holder's MarkInterrupted: %v, want ErrLeaseLost", err)
	}

	if _, ok, err := b.Resource(ctx, "s", "u"); err != nil || !ok {
		t.Errorf("the new holder's record of u after the stale holder's ForgetResources: held %v (%v); a holder that lost its lease must not write", ok, err)
	}
	if r, err := b.Run(ctx, run); err != nil || r.Status != StatusRunning {
		t.Errorf("the new holder's run after the stale holder's MarkInterrupted: %q (%v), want still running", r.Status, err)
	}
}

// TestStaleHolderCreatesNoTask: a spread harvest that lost its source
// lease while dividing (which plans a whole source: long) records no task,
// whose units would commit into the source while the new holder harvests
// it.
func TestStaleHolderCreatesNoTask(t *testing.T) {
	a, b, first, _, ctx := staleHolder(t)
	run, err := a.BeginRun(ctx, Run{Mode: "baseline", Source: "s"})
	must(t, err)
	id, err := a.CreateTask(ctx, Task{Source: "s", Mode: "baseline", RunID: run, Fence: first, Checkpoints: []byte("{}")}, []string{"p"}, nil, nil)
	if errors.Is(err, ErrLeaseLost) {
		return // refused
	}
	// A worker (any daemon) executes the unit of the stale task.
	part, err := b.Lease(ctx, PartLease(id, "p"), "unit", 0)
	must(t, err)
	defer part.Release()
	urun, err := b.BeginRun(ctx, Run{Mode: "baseline", Source: "s"})
	must(t, err)
	err = b.Commit(ctx, Batch{Fence: part, Task: id, Resources: []Resource{{URI: "from-stale-task", Source: "s", Length: 1, Outcome: OutcomeWritten, RunID: urun}},
		Part: &PartDone{Task: id, Name: "p", RunID: urun}})
	if err == nil {
		t.Errorf("a task created by a holder whose source lease another harvest holds (task %d) was recorded, and its unit committed into the source while the new holder harvests it", id)
	}
}

// TestServerFullIsTemporary: each lease holds a connection of its own; a
// lease refused because the server takes no more clients (SQLSTATE 53300)
// is a temporary failure, tried again, not the end of the harvest.
func TestServerFullIsTemporary(t *testing.T) {
	ctx := t.Context()
	server, stop, err := testbin.Postgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	s, err := Open(ctx, server)
	must(t, err)
	defer s.Close()
	var max int
	must(t, s.r.QueryRowContext(ctx, "SELECT current_setting('max_connections')::int").Scan(&max))
	var leaseErr error
	for i := range max + 5 {
		l, err := s.Lease(ctx, SiteLease(fmt.Sprint("site", i)), "daemon", 0)
		if err != nil {
			leaseErr = err
			break
		}
		defer l.Release()
	}
	if leaseErr == nil {
		t.Fatalf("%d leases taken with %d connections allowed", max+5, max)
	}
	// Connections all taken is a passing condition (a lease released frees
	// one): a harvest refused so must be tried again, not ended for good.
	if !errclass.IsRetryable(leaseErr) {
		t.Errorf("a lease refused for want of a connection (%d allowed, none bounded by the store): %v, not retryable", max, leaseErr)
	}
}
