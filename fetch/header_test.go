package fetch

import (
	"context"
	"net/http"
	"testing"
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
