package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
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

// TestHeadersStayWithTheirOrigin: the extra headers (credentials, such as
// X-Api-Key) go only to the origins named — not to another host a source
// lists, nor across a redirect to another origin — and to any origin the
// operator adds.
func TestHeadersStayWithTheirOrigin(t *testing.T) {
	other := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/back" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
			return
		}
		io.WriteString(w, "other")
	})
	origin := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, other.URL+"/file", http.StatusFound)
			return
		}
		io.WriteString(w, "origin")
	})
	tests := []struct {
		name    string
		origins []string
		url     string
		// want: the X-Api-Key each server saw, in order of requests.
		wantOrigin, wantOther []bool
	}{
		{"the origin", []string{origin.URL}, origin.URL + "/x", []bool{true}, nil},
		{"the origin, named with its path and case", []string{strings.ToUpper(origin.URL[:4]) + origin.URL[4:] + "/a/b"}, origin.URL + "/x", []bool{true}, nil},
		{"another host listed", []string{origin.URL}, other.URL + "/file", nil, []bool{false}},
		{"a redirect to another origin", []string{origin.URL}, origin.URL + "/away", []bool{true}, []bool{false}},
		{"a redirect back to the origin", []string{origin.URL}, other.URL + "/back?to=" + url.QueryEscape(origin.URL+"/x"), []bool{true}, []bool{false}},
		{"another origin the operator named", []string{origin.URL, other.URL}, origin.URL + "/away", []bool{true}, []bool{true}},
		{"every origin, when none is named", nil, origin.URL + "/away", []bool{true}, []bool{true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o0, n0 := len(origin.requests()), len(other.requests())
			o := testOptions()
			o.Header = http.Header{"X-Api-Key": {"secret"}}
			o.HeaderOrigins = tc.origins
			c, _ := newTestClient(t, o)
			if _, _, err := readAll(t.Context(), c, tc.url); err != nil {
				t.Fatal(err)
			}
			saw := func(reqs []http.Header) []bool {
				var out []bool
				for _, h := range reqs {
					out = append(out, h.Get("X-Api-Key") == "secret")
					if h.Get("User-Agent") != "rsharvest/test" {
						t.Errorf("User-Agent %q", h.Get("User-Agent"))
					}
				}
				return out
			}
			if got := saw(origin.requests()[o0:]); !slices.Equal(got, tc.wantOrigin) {
				t.Errorf("the origin saw the key: %v, want %v", got, tc.wantOrigin)
			}
			if got := saw(other.requests()[n0:]); !slices.Equal(got, tc.wantOther) {
				t.Errorf("the other host saw the key: %v, want %v", got, tc.wantOther)
			}
		})
	}
}

func TestOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://Example.org/a":      "http://example.org:80",
		"HTTPS://example.org":       "https://example.org:443",
		"http://example.org:8080/x": "http://example.org:8080",
		"http://[::1]:80/":          "http://[::1]:80",
		"socks5://127.0.0.1":        "socks5://127.0.0.1:1080",
		"SOCKS5H://proxy.example":   "socks5h://proxy.example:1080",
	} {
		u, _ := url.Parse(in)
		if got := Origin(u); got != want {
			t.Errorf("Origin(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestNoReferer: a redirect does not tell where it came from: the URL
// redirected (a source's, whose query may hold a token) is not sent as
// the Referer, to another origin or to the same.
func TestNoReferer(t *testing.T) {
	other := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "other")
	})
	origin := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/file", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/file", http.StatusFound)
		default:
			io.WriteString(w, "origin")
		}
	})
	for _, path := range []string{"/away", "/here"} {
		c, _ := newTestClient(t, testOptions())
		if _, _, err := readAll(t.Context(), c, origin.URL+path+"?token=s3cret"); err != nil {
			t.Fatal(err)
		}
	}
	for name, srv := range map[string]*server{"other": other, "origin": origin} {
		for _, h := range srv.requests() {
			if ref := h.Get("Referer"); ref != "" {
				t.Errorf("the %s server was sent Referer %q", name, ref)
			}
		}
	}
}
