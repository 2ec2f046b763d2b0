package harvest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLookErrorsHideThePassword: the look commands (discover, oai
// identify, …) take the credentials off a source URL such as
// http://user:password@host/ and send them as an Authorization header; the
// password must not come back in the error of a source that cannot be
// read (docs/safety.md: the source is named without its password).
func TestLookErrorsHideThePassword(t *testing.T) {
	const secret = "hunter2pw"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gone", http.StatusNotFound)
	}))
	defer srv.Close()
	src := strings.Replace(srv.URL, "http://", "http://alice:"+secret+"@", 1) + "/oai"
	for _, tc := range []struct {
		name string
		look func(context.Context, Look) error
	}{
		{"discover", func(ctx context.Context, l Look) error { _, err := l.Discover(ctx, src); return err }},
		{"oai identify", func(ctx context.Context, l Look) error { _, err := l.Identify(ctx, src); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := DefaultLook()
			err := tc.look(t.Context(), l)
			if err == nil {
				t.Fatal("want an error: the server answers 404")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestInvalidSourceHidesThePassword: a --source that is not an http(s)
// URL is named in the error without its user info.
func TestInvalidSourceHidesThePassword(t *testing.T) {
	for _, src := range []string{
		"ftp://alice:hunter2pw@host/x",
		"http://alice:hunter2pw@host:bad-port/x",
		"alice:hunter2pw@host/x",
	} {
		j := DefaultJob()
		j.Source, j.Sinks = src, []string{"fs:" + t.TempDir()}
		err := j.Validate()
		if err == nil {
			t.Errorf("Validate(%q): no error", src)
			continue
		}
		if strings.Contains(err.Error(), "hunter2pw") {
			t.Errorf("Validate(%q): %v shows the password", src, err)
		}
	}
}
