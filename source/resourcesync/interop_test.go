package resourcesync_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// serveInterop serves a copy of the source written by the resync reference
// library (../shared/interop/resync-2.0.1), its placeholder host:port
// replaced in the documents by the test server's.
func serveInterop(t *testing.T) *httptest.Server {
	t.Helper()
	orig := filepath.Join("..", "..", "..", "shared", "interop", "resync-2.0.1")
	if _, err := os.Stat(orig); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("shared interop sample missing under CI: %v", err)
		}
		t.Skipf("shared interop sample absent: %v", err)
	}
	dir := t.TempDir()
	srv := httptest.NewUnstartedServer(http.FileServer(http.Dir(dir)))
	hostport := srv.Listener.Addr().String()
	err := filepath.WalkDir(orig, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(orig, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".xml") || d.Name() == "resourcesync" {
			s := strings.ReplaceAll(string(b), "127.0.0.1:PORTX", hostport)
			b = []byte(strings.ReplaceAll(s, "PORTX", hostport))
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestInterop(t *testing.T) {
	srv := serveInterop(t)
	base := srv.URL

	src := mustDiscover(t, base+"/", resourcesync.Options{})
	want := `source BASE/ found=well-known
description BASE/.well-known/resourcesync
  capabilitylist BASE/capabilitylist.xml set=capabilitylist
    resourcelist BASE/resourcelist.xml at=2026-11-22T14:03:54.570503Z
    resourcedump BASE/resourcedump.xml at=2026-01-01T00:00:00Z
`
	var b strings.Builder
	if err := src.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if got := strings.ReplaceAll(b.String(), base, "BASE"); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	st, err := src.Set("capabilitylist")
	if err != nil {
		t.Fatal(err)
	}
	rd, ok := st.Find(manifest.ResourceDump)
	if !ok || !rd.At.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("resource dump %+v", rd)
	}

	// The Capability List has no up link: from the Resource Dump, the top
	// reached is the Capability List.
	src = mustDiscover(t, base+"/resourcedump.xml", resourcesync.Options{})
	if src.Found != resourcesync.FoundGiven || src.Description != "" || len(src.Sets) != 1 ||
		src.Sets[0].CapabilityList != base+"/capabilitylist.xml" || len(src.Sets[0].Capabilities) != 2 || len(src.Warnings) != 0 {
		t.Errorf("from the resource dump: %+v", src)
	}
}
