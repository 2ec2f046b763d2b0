//go:build linux

package fs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/sink"
)

// TestOpenConcurrently opens and closes sinks on one directory from many
// goroutines at once. Each sink's lock is held by its own open file, so
// they keep apart as processes do: a sink being opened tidies up while
// another creates its temporary directory, and may take it, not yet
// locked, for an ended process's. Every open must still succeed.
func TestOpenConcurrently(t *testing.T) {
	dir := t.TempDir()
	const goroutines, opens = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for i := range opens {
				s, err := New(dir, Options{})
				if err != nil {
					errs <- fmt.Errorf("open %d: %w", i, err)
					return
				}
				if err := s.Put(t.Context(), &sink.Resource{URI: fmt.Sprintf("http://example.org/%d", i), Length: 100}, io.LimitReader(zeros{}, 100)); err != nil {
					errs <- fmt.Errorf("put %d: %w", i, err)
				}
				if err := s.Close(t.Context()); err != nil {
					errs <- fmt.Errorf("close %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	entries, err := tmpLeft(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("after every sink closed the temporary directory holds %v (%v)", entries, err)
	}
}

// tmpLeft lists what the temporary directory of the sink at dir holds
// beside the sink's mark.
func tmpLeft(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(filepath.Join(dir, tmpDir))
	return slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == sinkMark }), err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// helperDirEnv names the sink directory of TestHelperProcess's child.
const helperDirEnv = "RSHARVEST_FS_HELPER_DIR"

// TestHelperProcess is not a test: run by TestTempOfOtherProcesses as a
// child process, it opens a sink on $RSHARVEST_FS_HELPER_DIR, starts a Put
// whose body stops after its first bytes, prints the temporary directory
// once those bytes are in a temporary file, and waits to be killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("run as a child process by TestTempOfOtherProcesses")
	}
	s, err := New(dir, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	body := &stallingReader{first: []byte("the first bytes of a body"), stalled: make(chan struct{})}
	go func() {
		<-body.stalled
		fmt.Println(filepath.Join(dir, filepath.FromSlash(s.tmpRel)))
	}()
	_ = s.Put(context.Background(), &sink.Resource{URI: "http://example.org/in-flight"}, body)
	os.Exit(1) // not reached: the Put never ends
}

// stallingReader returns first, then blocks for ever, closing stalled when
// it does (the copy has written first by then).
type stallingReader struct {
	first   []byte
	stalled chan struct{}
	done    bool
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if !r.done {
		r.done = true
		return copy(p, r.first), nil
	}
	close(r.stalled)
	select {}
}

// TestTempOfOtherProcesses: a real process writing into a sink (a Put in
// flight) keeps its temporary file while another process opens a sink on
// the same directory; once it is killed with -9, the next sink opened
// there removes what it left.
func TestTempOfOtherProcesses(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child said nothing: %v", err)
	}
	childTmp := line[:len(line)-1]
	if rel, err := filepath.Rel(filepath.Join(dir, tmpDir), childTmp); err != nil || filepath.Dir(rel) != "." {
		t.Fatalf("child's temporary directory %q", line)
	}
	inFlight := func() []os.DirEntry {
		t.Helper()
		es, err := os.ReadDir(childTmp)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return es
	}
	if n := len(inFlight()); n != 1 {
		t.Fatalf("the child's temporary directory holds %d files, want its Put's", n)
	}

	// A second process's sink (here this one's) leaves the live child's
	// temporary file alone.
	other := newFS(t, dir, Options{})
	put(t, other, "http://example.org/other", "written meanwhile")
	if err := other.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(inFlight()); n != 1 {
		t.Fatalf("opening a sink beside a live process left %d of its temporary files, want 1", n)
	}

	// Killed, the child releases its lock with its life: the next sink
	// removes its leftovers.
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	if n := len(inFlight()); n != 1 {
		t.Fatalf("the killed child's temporary file is gone already (%d files)", n)
	}
	next := newFS(t, dir, Options{})
	defer next.Close(t.Context())
	if _, err := os.Stat(childTmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed process's temporary directory is still there: %v", err)
	}
	if got := walk(t, next); len(got) != 1 || got[0] != "http://example.org/other" {
		t.Errorf("mirror holds %q", got)
	}
}
