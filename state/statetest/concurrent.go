package statetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

// The concurrent writers' workload: batch i of writer w records, for each
// of hotURIs URIs every writer touches and one URI of its own, a resource
// and a change, all tagged "w/i".
const (
	workSource = "http://work.example/"
	hotURIs    = 4
	perBatch   = hotURIs + 1
)

func workURIs(w, i int) []string {
	var out []string
	for j := range hotURIs {
		out = append(out, fmt.Sprintf("hot/%d", j))
	}
	return append(out, fmt.Sprintf("own/%d/%d", w, i))
}

func workTag(w, i int) string { return fmt.Sprintf("%d/%d", w, i) }

func workBatch(w, i int) state.Batch {
	var b state.Batch
	tag, n := workTag(w, i), int64(w*1000+i)
	for _, u := range workURIs(w, i) {
		b.Resources = append(b.Resources, state.Resource{URI: u, Source: workSource, Length: n, Type: tag, Package: tag, Outcome: state.OutcomeWritten})
		b.Changes = append(b.Changes, state.ChangeRecord{URI: u, Change: state.ChangeUpdated, Source: workSource, Length: n, Type: tag, Package: tag})
	}
	return b
}

// commitWork commits batches from..to-1 of writer w.
func commitWork[S Snapshot](ctx context.Context, st Store[S], w, from, to int) error {
	for i := from; i < to; i++ {
		if err := st.Commit(ctx, workBatch(w, i)); err != nil {
			return fmt.Errorf("writer %d, batch %d: %w", w, i, err)
		}
	}
	return nil
}

// checkWork checks that st holds every batch of writers 0..writers-1,
// batches 0..batches-1, whole, with change stamps unique and strictly
// increasing in commit order: each batch's changes one after the other
// in its order, each writer's batches in the order it committed them,
// and each hot resource as the batch with its newest change left it.
func checkWork[S Snapshot](t *testing.T, st Store[S], writers, batches int) {
	t.Helper()
	ctx := t.Context()
	err := st.View(ctx, func(v S) error {
		var cs []state.ChangeRecord
		if err := v.WalkChanges(ctx, state.ChangeQuery{Source: workSource, Superseded: true}, func(c state.ChangeRecord) error {
			cs = append(cs, c)
			return nil
		}); err != nil {
			return err
		}
		if want := writers * batches * perBatch; len(cs) != want {
			t.Errorf("%d changes, want %d (%d writers, %d batches of %d)", len(cs), want, writers, batches, perBatch)
		}
		last, err := v.LastRecorded(ctx)
		if err != nil {
			return err
		}
		if len(cs) > 0 && !last.Equal(cs[len(cs)-1].Recorded) {
			t.Errorf("LastRecorded = %v, want the newest change's stamp %v", last, cs[len(cs)-1].Recorded)
		}
		next := make([]int, writers) // each writer's next batch
		newest := map[string]int{}   // URI: index of its newest change
		for i := 0; i < len(cs); i++ {
			c := cs[i]
			if i > 0 && !c.Recorded.After(cs[i-1].Recorded) {
				t.Errorf("change %d (%s of %s) recorded %v, not after the one before (%v)", i, c.URI, c.Package, c.Recorded, cs[i-1].Recorded)
			}
			newest[c.URI] = i
			if i%perBatch != 0 {
				continue
			}
			// A batch begins: its changes follow, whole and in order.
			var w, b int
			if _, err := fmt.Sscanf(c.Package, "%d/%d", &w, &b); err != nil || w < 0 || w >= writers {
				t.Errorf("change %d: tag %q", i, c.Package)
				continue
			}
			if b != next[w] {
				t.Errorf("change %d: batch %d of writer %d recorded after batch %d (want batch %d next)", i, b, w, next[w]-1, next[w])
			}
			next[w] = b + 1
			for j, u := range workURIs(w, b) {
				if i+j >= len(cs) || cs[i+j].URI != u || cs[i+j].Package != c.Package {
					t.Errorf("batch %s is not whole and in order at change %d", c.Package, i+j)
					break
				}
			}
		}
		for i, c := range cs {
			if c.Superseded != (newest[c.URI] != i) {
				t.Errorf("change %d (%s of %s): Superseded = %v", i, c.URI, c.Package, c.Superseded)
			}
		}
		var n int64
		if err := v.WalkResources(ctx, state.ResourceQuery{Source: workSource}, func(r state.Resource) error {
			n++
			i, ok := newest[r.URI]
			if !ok || r.Package != cs[i].Package || r.Type != r.Package || r.Length != cs[i].Length {
				t.Errorf("resource %s is %s (type %s, length %d); its newest change is of another batch", r.URI, r.Package, r.Type, r.Length)
			}
			return nil
		}); err != nil {
			return err
		}
		if want := int64(hotURIs + writers*batches); n != want {
			t.Errorf("%d resources, want %d", n, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A commit that follows every other one of the source is stamped
	// after them.
	lastBefore := lastRecorded(t, st)
	b := state.Batch{Changes: []state.ChangeRecord{{URI: "after", Change: state.ChangeCreated, Source: workSource, Length: -1}}}
	must(t, st.Commit(ctx, b))
	if got := lastRecorded(t, st); !got.After(lastBefore) {
		t.Errorf("a later commit's stamp %v is not after %v", got, lastBefore)
	}
}

func lastRecorded[S Snapshot](t *testing.T, st Store[S]) time.Time {
	t.Helper()
	var last time.Time
	err := st.View(t.Context(), func(v S) error {
		var err error
		last, err = v.LastRecorded(t.Context())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// seen is what one snapshot held of the workload's change log.
type seen struct {
	last    time.Time
	changes int
}

// watch takes up to limit snapshots, one after the other, until stop is
// closed, checking that each holds whole batches only, stamped up to its
// LastRecorded, and that its counts do not change within it.
func watch[S Snapshot](ctx context.Context, st Store[S], stop <-chan struct{}, limit int) ([]seen, error) {
	var out []seen
	for range limit {
		select {
		case <-stop:
			return out, nil
		default:
		}
		err := st.View(ctx, func(v S) error {
			last, err := v.LastRecorded(ctx)
			if err != nil {
				return err
			}
			n1, err := v.CountResources(ctx, state.ResourceQuery{Source: workSource})
			if err != nil {
				return err
			}
			tags := map[string]int{}
			var n int
			if err := v.WalkChanges(ctx, state.ChangeQuery{Source: workSource}, func(c state.ChangeRecord) error {
				if c.Recorded.After(last) {
					return fmt.Errorf("change %s of %s recorded %v, after the snapshot's LastRecorded %v", c.URI, c.Package, c.Recorded, last)
				}
				tags[c.Package]++
				n++
				return nil
			}); err != nil {
				return err
			}
			for tag, k := range tags {
				if k != perBatch {
					return fmt.Errorf("a snapshot holds %d changes of batch %s, want %d", k, tag, perBatch)
				}
			}
			n2, err := v.CountResources(ctx, state.ResourceQuery{Source: workSource})
			if err != nil {
				return err
			}
			if n1 != n2 {
				return fmt.Errorf("a snapshot counted %d resources, then %d", n1, n2)
			}
			out = append(out, seen{last, n})
			return nil
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// checkSeen checks that every snapshot held exactly the changes of the
// final log stamped up to its LastRecorded: a change a snapshot lacked is
// stamped after every change it held.
func checkSeen[S Snapshot](t *testing.T, st Store[S], views []seen) {
	t.Helper()
	ctx := t.Context()
	var stamps []time.Time
	err := st.View(ctx, func(v S) error {
		return v.WalkChanges(ctx, state.ChangeQuery{Source: workSource}, func(c state.ChangeRecord) error {
			stamps = append(stamps, c.Recorded)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range views {
		n := 0
		for _, r := range stamps {
			if !r.After(s.last) {
				n++
			}
		}
		if n != s.changes {
			t.Errorf("snapshot %d held %d changes; %d are stamped up to its LastRecorded %v", i, s.changes, n, s.last)
		}
	}
}

// testGoroutines: several goroutines commit batches touching the same
// resources while another takes snapshots.
func testGoroutines[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	const writers, batches = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() { errs <- commitWork(ctx, st, w, 0, batches) })
	}
	stop := make(chan struct{})
	type result struct {
		views []seen
		err   error
	}
	watched := make(chan result, 1)
	go func() {
		views, err := watch(ctx, st, stop, 200)
		watched <- result{views, err}
	}()
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	r := <-watched
	if r.err != nil {
		t.Error(r.err)
	}
	checkWork(t, st, writers, batches)
	checkSeen(t, st, r.views)
}

// readyLine is what a child process prints once its store is open.
const readyLine = "statetest: ready"

// child is a child process's part, as ChildEnv gives it (JSON).
type child struct {
	Path    string `json:"path"`
	Writer  int    `json:"writer"`
	Batches int    `json:"batches"`
}

func childSpec(t *testing.T) (child, bool) {
	env := os.Getenv(ChildEnv)
	if env == "" {
		return child{}, false
	}
	var c child
	if err := json.Unmarshal([]byte(env), &c); err != nil {
		t.Fatalf("%s: %v", ChildEnv, err)
	}
	return c, true
}

// runChild opens the store, says it is ready, waits for "go" on its
// standard input, and commits its batches.
func runChild[S Snapshot](t *testing.T, h Harness[S], c child) {
	ctx := t.Context()
	st, err := h.Open(ctx, c.Path)
	if err != nil {
		t.Fatalf("child %d: open: %v", c.Writer, err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Errorf("child %d: close: %v", c.Writer, err)
		}
	}()
	fmt.Println(readyLine)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if line != "go\n" {
		t.Fatalf("child %d: read %q (%v), want go", c.Writer, line, err)
	}
	if err := commitWork(ctx, st, c.Writer, 0, c.Batches); err != nil {
		t.Errorf("child %d: %v", c.Writer, err)
	}
}

// runPattern is a -test.run pattern selecting exactly the test named
// name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// testProcesses: three processes open one new file at once and commit
// batches touching the same resources at once, while this one takes
// snapshots.
func testProcesses[S Snapshot](t *testing.T, h Harness[S], root string) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	const writers, batches = 3, 10
	type proc struct {
		cmd     *exec.Cmd
		stdin   io.WriteCloser
		stderr  bytes.Buffer
		out     []string // stdout, but for the ready line
		ready   chan bool
		drained chan struct{}
	}
	procs := make([]*proc, writers)
	for w := range writers {
		spec, err := json.Marshal(child{Path: path, Writer: w, Batches: batches})
		must(t, err)
		p := &proc{ready: make(chan bool, 1), drained: make(chan struct{})}
		p.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run="+runPattern(root), "-test.count=1")
		p.cmd.Env = append(os.Environ(), ChildEnv+"="+string(spec))
		p.cmd.Stderr = &p.stderr
		stdin, err := p.cmd.StdinPipe()
		must(t, err)
		p.stdin = stdin
		stdout, err := p.cmd.StdoutPipe()
		must(t, err)
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start child %d: %v", w, err)
		}
		go func() {
			defer close(p.drained)
			sc := bufio.NewScanner(stdout)
			ready := false
			for sc.Scan() {
				if !ready && sc.Text() == readyLine {
					ready = true
					p.ready <- true
					continue
				}
				p.out = append(p.out, sc.Text())
			}
			if !ready {
				p.ready <- false
			}
		}()
		procs[w] = p
	}
	// wait ends a child and reports how it went.
	wait := func(w int) error {
		p := procs[w]
		<-p.drained
		if err := p.cmd.Wait(); err != nil {
			return fmt.Errorf("child %d: %w\nstdout:\n%s\nstderr:\n%s", w, err, strings.Join(p.out, "\n"), p.stderr.String())
		}
		return nil
	}
	for w, p := range procs {
		if !<-p.ready {
			for _, p := range procs {
				_ = p.stdin.Close() // the others read EOF and fail
			}
			t.Fatalf("child %d was not ready: %v", w, wait(w))
		}
	}
	for _, p := range procs {
		_, err := p.stdin.Write([]byte("go\n"))
		if err == nil {
			err = p.stdin.Close()
		}
		if err != nil {
			t.Errorf("start a child's commits: %v", err)
		}
	}
	st := openAt(t, h, path)
	stop := make(chan struct{})
	watched := make(chan error, 1)
	var views []seen
	go func() {
		var err error
		views, err = watch(ctx, st, stop, 200)
		watched <- err
	}()
	for w := range procs {
		if err := wait(w); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	if err := <-watched; err != nil {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	checkWork(t, st, writers, batches)
	checkSeen(t, st, views)
}

// testClockSetBack: a store whose newest stamp is ahead of the clock (the
// clock was set back) stamps its next commits after it, still increasing.
func testClockSetBack[S Snapshot](t *testing.T, h Harness[S]) {
	if h.Ahead == nil {
		t.Skip("Harness.Ahead is nil")
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := h.Open(ctx, path)
	must(t, err)
	err = commitWork(ctx, st, 0, 0, 1)
	if err == nil {
		err = st.Close()
	}
	must(t, err)
	const ahead = time.Hour
	must(t, h.Ahead(ctx, path, ahead))

	st = openAt(t, h, path)
	future := lastRecorded(t, st)
	if now := time.Now(); !future.After(now.Add(ahead / 2)) {
		t.Fatalf("after Ahead(%v), the newest stamp is %v (now is %v)", ahead, future, now)
	}
	must(t, commitWork(ctx, st, 0, 1, 6))
	var after []time.Time
	err = st.View(ctx, func(v S) error {
		return v.WalkChanges(ctx, state.ChangeQuery{Source: workSource, After: future}, func(c state.ChangeRecord) error {
			after = append(after, c.Recorded)
			return nil
		})
	})
	must(t, err)
	if want := 5 * perBatch; len(after) != want {
		t.Errorf("%d changes stamped after the stamp ahead (%v), want %d", len(after), future, want)
	}
	checkWork(t, st, 1, 6)
}
