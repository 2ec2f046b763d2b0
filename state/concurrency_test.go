package state

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentLookupsDuringCommits runs 8 goroutines looking resources up
// and one walking them while another goroutine commits batches. No reader
// may see an error (SQLITE_BUSY in particular), a torn row, or part of a
// batch.
func TestConcurrentLookupsDuringCommits(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	const (
		batches   = 12
		batchSize = 250
		hot       = 100 // URIs overwritten by every batch
	)

	var done atomic.Bool
	var found atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}

	for g := range 8 {
		wg.Go(func() {
			for i := 0; !done.Load(); i++ {
				// Paced: under -race, unpaced readers on two cores starve
				// the writer (commits slow down a hundredfold). At this
				// pace hundreds of lookups still overlap every commit.
				time.Sleep(3 * time.Millisecond)
				uri := fmt.Sprintf("hot/%d", (i*7+g)%hot)
				r, ok, err := s.Resource(ctx, "", uri)
				if err != nil {
					report(fmt.Errorf("lookup %s: %w", uri, err))
					return
				}
				if !ok {
					continue
				}
				found.Add(1)
				// Every field written by one batch comes from that batch.
				if r.Type != strconv.FormatInt(r.Length, 10) || r.Package != "p"+r.Type {
					report(fmt.Errorf("torn row %+v", r))
					return
				}
			}
		})
	}
	wg.Go(func() {
		for !done.Load() {
			var fresh int
			err := s.WalkResources(ctx, "", func(r Resource) error {
				if strings.HasPrefix(r.URI, "new/") {
					fresh++
				}
				return nil
			})
			if err != nil {
				report(fmt.Errorf("walk: %w", err))
				return
			}
			if fresh%(batchSize-hot) != 0 {
				report(fmt.Errorf("walk saw %d new resources: part of a batch", fresh))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	for k := range batches {
		b := Batch{Checkpoint: &Checkpoint{Source: "http://x/", Next: time.Unix(int64(k), 0), RunID: run}}
		for i := range batchSize {
			uri := fmt.Sprintf("new/%d/%d", k, i)
			if i < hot {
				uri = fmt.Sprintf("hot/%d", i)
			}
			b.Resources = append(b.Resources, Resource{
				URI: uri, Length: int64(k), Type: strconv.Itoa(k), Package: "p" + strconv.Itoa(k),
				Outcome: OutcomeWritten, RunID: run,
			})
		}
		if err := s.Commit(ctx, b); err != nil {
			done.Store(true)
			wg.Wait()
			t.Fatalf("commit %d: %v", k, err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if found.Load() == 0 {
		t.Error("the readers never found a resource")
	}
	n, err := s.CountResources(ctx, "", true)
	if want := int64(hot + batches*(batchSize-hot)); err != nil || n != want {
		t.Errorf("CountResources = %d, %v; want %d", n, err, want)
	}
}

const crashEnv = "RSHARVEST_STATE_CRASH_DB"

const crashBatch = 300

// TestCrashDuringCommit kills (SIGKILL) a process that commits batches in a
// tight loop, several times over, and checks after each kill that the file
// is intact and holds whole batches only: batch k writes crashBatch
// resources and sets the checkpoint to k, so the count must match it.
func TestCrashDuringCommit(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringCommit$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let it commit a few batches, then kill it wherever it is.
		sc := bufio.NewScanner(out)
		commits := 0
		for commits < 3+round && sc.Scan() {
			if strings.HasPrefix(sc.Text(), "committed ") {
				commits++
			}
		}
		time.Sleep(time.Duration(round*7) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if commits == 0 {
			t.Fatalf("round %d: the child committed nothing", round)
		}

		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		var check string
		if err := s.r.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
			t.Errorf("round %d: integrity_check = %q, %v", round, check, err)
		}
		var fkViolations int
		if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM pragma_foreign_key_check").Scan(&fkViolations); err != nil || fkViolations != 0 {
			t.Errorf("round %d: foreign_key_check = %d, %v", round, fkViolations, err)
		}
		cp, ok, err := s.Checkpoint(ctx, "http://crash/", "")
		if err != nil || !ok {
			t.Fatalf("round %d: checkpoint %v, %v", round, ok, err)
		}
		n, err := s.CountResources(ctx, "", true)
		if err != nil {
			t.Fatal(err)
		}
		if want := (cp.Next.Unix() + 1) * crashBatch; n != want {
			t.Errorf("round %d: %d resources with checkpoint %d, want %d", round, n, cp.Next.Unix(), want)
		}
		t.Logf("round %d: %d batches survived", round, cp.Next.Unix()+1)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// crashChild commits batches to the store at path until it is killed (or
// for at most 20 s), continuing after the last checkpoint.
func crashChild(path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	run, err := s.BeginRun(ctx, Run{Mode: "crash", Source: "http://crash/"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	k := int64(0)
	if cp, ok, err := s.Checkpoint(ctx, "http://crash/", ""); err == nil && ok {
		k = cp.Next.Unix() + 1
	}
	for ; ctx.Err() == nil; k++ {
		b := Batch{
			Checkpoint: &Checkpoint{Source: "http://crash/", Next: time.Unix(k, 0), RunID: run},
			Failures:   []Failure{{RunID: run, URI: fmt.Sprintf("b/%d", k), Error: "synthetic"}},
			Changes:    []ChangeRecord{{URI: fmt.Sprintf("b/%d/0", k), Change: ChangeCreated, RunID: run}},
		}
		for i := range crashBatch {
			b.Resources = append(b.Resources, Resource{
				URI: fmt.Sprintf("b/%d/%d", k, i), Length: int64(i), Outcome: OutcomeWritten, RunID: run,
				Type: strings.Repeat("x", 100),
			})
		}
		if err := s.Commit(ctx, b); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("committed %d\n", k)
	}
	os.Exit(0)
}
