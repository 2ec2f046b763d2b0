package fs

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/sink"
)

// TestCommitFailureIsReported: when the rename of a commit keeps failing
// with ENOENT (its temporary file is gone: removed by another process
// whose lock did not hold, an evicted directory handle every attempt, …)
// while creating the directory succeeds, commit reports the rename's
// failure, and nothing is at the path.
func TestCommitFailureIsReported(t *testing.T) {
	tests := []struct {
		name      string
		dirExists bool
	}{
		{"directory exists", true},
		{"directory missing", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFS(t, t.TempDir(), Options{})
			defer s.Close(t.Context())
			if tt.dirExists {
				put(t, s, "http://example.com/d/sibling", "x")
			}
			rel := Encode("http://example.com/d/a")
			err := s.commit(s.tmpRel+"/no-such-temporary-file", rel)
			if err == nil {
				t.Errorf("commit of a missing temporary file = nil, want an error")
			}
			if _, statErr := s.root.Stat(rel); statErr == nil {
				t.Errorf("the path exists although nothing was renamed there")
			}
		})
	}
}

// vanishingBody returns body and, at its end, removes every file of the
// sink's temporary directory (what another process, or a lost lock on a
// shared file system, does to an in-flight Put).
type vanishingBody struct {
	r   *strings.Reader
	dir string // the sink's temporary directory, absolute
	t   *testing.T
}

func (v *vanishingBody) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	if err != nil {
		entries, rerr := os.ReadDir(v.dir)
		if rerr != nil {
			v.t.Errorf("reading the temporary directory: %v", rerr)
		}
		for _, e := range entries {
			_ = os.Remove(filepath.Join(v.dir, e.Name()))
		}
	}
	return n, err
}

// TestPutWhoseTempVanishedFails: a Put whose temporary file is gone before
// its rename fails, rather than report a body stored that is not.
func TestPutWhoseTempVanishedFails(t *testing.T) {
	dir := t.TempDir()
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	const uri = "http://example.com/v/a"
	body := &vanishingBody{r: strings.NewReader("body"), dir: filepath.Join(dir, filepath.FromSlash(s.tmpRel)), t: t}
	err := s.Put(t.Context(), &sink.Resource{URI: uri, Length: 4}, body)
	rc, getErr := s.Get(t.Context(), uri)
	if getErr == nil {
		rc.Close()
	}
	if err == nil && errors.Is(getErr, iofs.ErrNotExist) {
		t.Errorf("Put = nil, but Get = %v: a Put reported as done left nothing", getErr)
	}
}
