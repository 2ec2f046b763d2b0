package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// TestBodyHeader checks that Body.Header is the first response's header,
// after redirects, and a copy of it.
func TestBodyHeader(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusFound)
			return
		}
		w.Header().Add("Link", `</cl.xml>; rel="resourcesync"`)
		w.Header().Add("Link", `</next>; rel="next"`)
		full(w, []byte("hello"), "")
	})
	b, err := New(Options{}).Open(context.Background(), s.URL+"/old")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Header.Values("Link"); len(got) != 2 || got[0] != `</cl.xml>; rel="resourcesync"` {
		t.Errorf("Header Link = %q", got)
	}
	if b.URL != s.URL+"/new" {
		t.Errorf("URL = %q", b.URL)
	}
}

func TestOpenIfChanged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		if r.Header.Get("If-None-Match") == `"v1"` || r.Header.Get("If-Modified-Since") == "Mon, 02 Jan 2006 15:04:05 GMT" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		io.WriteString(w, "body")
	}))
	defer srv.Close()
	c := New(Options{Retries: 1, BackoffInitial: time.Millisecond})
	tests := []struct {
		name, etag, lastmod string
		notModified         bool
	}{
		{"etag matches", `"v1"`, "", true},
		{"date matches", "", "Mon, 02 Jan 2006 15:04:05 GMT", true},
		{"stale etag", `"v0"`, "", false},
		{"no validators", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := c.OpenIfChanged(context.Background(), srv.URL, tt.etag, tt.lastmod)
			if tt.notModified {
				if !errors.Is(err, ErrNotModified) || !errclass.IsPermanent(err) {
					t.Fatalf("err = %v, want a permanent ErrNotModified", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got, _ := io.ReadAll(b)
			if string(got) != "body" || b.ETag != `"v1"` {
				t.Fatalf("body %q etag %q", got, b.ETag)
			}
		})
	}
}
