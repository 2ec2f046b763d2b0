package fs

import (
	"reflect"
	"sync"
	"testing"
)

// TestFsyncSyncsWhatAPowerLossWouldLose: with fsync, a Put syncs the
// file's directory and, when it created directories, the parent of each,
// so that the file is reachable after a power loss; a Put into an
// existing directory syncs only that one; a Delete syncs the directory
// that holds the removal (the file's, or that of the last directory
// pruned).
func TestFsyncSyncsWhatAPowerLossWouldLose(t *testing.T) {
	s := newFS(t, t.TempDir(), Options{Fsync: true})
	defer s.Close(t.Context())
	var (
		mu     sync.Mutex
		synced []string
	)
	s.dirSynced = func(dir string) {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, dir)
	}
	took := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := synced
		synced = nil
		return out
	}
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"a Put creating three directories", func() { put(t, s, "http://example.com/a/b.txt", "1") },
			[]string{"http/example.com/a", "http/example.com", "http", "."}},
		{"a Put into an existing directory", func() { put(t, s, "http://example.com/a/c.txt", "2") },
			[]string{"http/example.com/a"}},
		{"a Put creating one directory", func() { put(t, s, "http://example.com/d/e.txt", "3") },
			[]string{"http/example.com/d", "http/example.com"}},
		{"a Delete leaving its directory", func() { del(t, s, "http://example.com/a/b.txt") },
			[]string{"http/example.com/a"}},
		{"a Delete pruning its directory", func() { del(t, s, "http://example.com/a/c.txt") },
			[]string{"http/example.com"}},
	}
	for _, st := range steps {
		st.do()
		if got := took(); !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s synced %q; want %q", st.name, got, st.want)
		}
	}
}

func del(t testing.TB, s *FS, uri string) {
	t.Helper()
	if err := s.Delete(t.Context(), uri); err != nil {
		t.Fatalf("Delete(%q): %v", uri, err)
	}
}
