package fetch

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

func TestOpenStatus(t *testing.T) {
	ok := func(w http.ResponseWriter) { full(w, []byte("ok"), "") }
	sequence := func(codes ...int) handlerFunc {
		return func(n int, w http.ResponseWriter, r *http.Request) {
			if n < len(codes) {
				status(w, codes[n], "")
				return
			}
			ok(w)
		}
	}
	tests := []struct {
		name     string
		opts     func(*Options)
		handler  handlerFunc
		class    errclass.Class // Unclassified: success
		status   int            // StatusError code expected, 0 none
		requests int
		// firstWait checks the wait before the first retry: at least min,
		// at most max (0 = no upper check).
		minWait, maxWait time.Duration
		path             string
	}{
		{
			name: "429 with Retry-After seconds",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					status(w, http.StatusTooManyRequests, "7")
					return
				}
				ok(w)
			},
			requests: 2, minWait: 7 * time.Second, maxWait: 7 * time.Second,
		},
		{
			name: "503 with Retry-After HTTP-date, capped by MaxRetryAfter",
			opts: func(o *Options) { o.MaxRetryAfter = 3 * time.Second },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					status(w, http.StatusServiceUnavailable, time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
					return
				}
				ok(w)
			},
			requests: 2, minWait: 3 * time.Second, maxWait: 3 * time.Second,
		},
		{
			name: "503 with a Retry-After too long ends the request",
			opts: func(o *Options) { o.MaxRetryAfter, o.EndOnLongRetryAfter = 3*time.Second, true },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				status(w, http.StatusServiceUnavailable, "3600")
			},
			class: errclass.Retryable, status: 503, requests: 1,
		},
		{
			name: "503 with a Retry-After within the cap is waited for",
			opts: func(o *Options) { o.MaxRetryAfter, o.EndOnLongRetryAfter = 3*time.Second, true },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					status(w, http.StatusServiceUnavailable, "2")
					return
				}
				ok(w)
			},
			requests: 2, minWait: 2 * time.Second, maxWait: 2 * time.Second,
		},
		{
			name: "422 with Retry-After is temporary",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					status(w, http.StatusUnprocessableEntity, "2")
					return
				}
				ok(w)
			},
			requests: 2, minWait: 2 * time.Second, maxWait: 2 * time.Second,
		},
		{
			name:     "422 without Retry-After is permanent",
			handler:  sequence(422),
			class:    errclass.Permanent,
			status:   422,
			requests: 1,
		},
		{
			name: "503 with Retry-After in the past: backoff only",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					status(w, http.StatusServiceUnavailable, "Mon, 02 Jan 2006 15:04:05 GMT")
					return
				}
				ok(w)
			},
			requests: 2, minWait: time.Microsecond, maxWait: 10 * time.Millisecond,
		},
		{
			name:     "retryable statuses then success",
			opts:     func(o *Options) { o.Retries = 10 },
			handler:  sequence(408, 425, 500, 502, 504, 507),
			requests: 7,
		},
		{
			name:     "5xx storm beyond Retries",
			handler:  sequence(500, 500, 500, 500, 500, 500, 500),
			class:    errclass.Retryable,
			status:   500,
			requests: 4,
		},
		{
			name:     "no retries",
			opts:     func(o *Options) { o.Retries = -1 },
			handler:  sequence(503),
			class:    errclass.Retryable,
			status:   503,
			requests: 1,
		},
		{
			name:     "404 is permanent, not retried",
			handler:  sequence(404),
			class:    errclass.Permanent,
			status:   404,
			requests: 1,
		},
		{
			name:     "403 is permanent",
			handler:  sequence(403),
			class:    errclass.Permanent,
			status:   403,
			requests: 1,
		},
		{
			name:     "300 is permanent",
			handler:  sequence(300),
			class:    errclass.Permanent,
			status:   300,
			requests: 1,
		},
		{
			name: "redirect loop",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/loop", http.StatusFound)
			},
			class:    errclass.Permanent,
			requests: 1 + MaxRedirects,
		},
		{
			name: "redirect chain",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n < 3 {
					http.Redirect(w, r, "/hop"+string(rune('a'+n)), http.StatusMovedPermanently)
					return
				}
				ok(w)
			},
			requests: 4, path: "/hopc",
		},
		{
			name: "no response headers within Timeout",
			opts: func(o *Options) { o.Timeout, o.Retries = 100*time.Millisecond, 1 },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			class:    errclass.Retryable,
			requests: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.handler)
			o := testOptions()
			if tt.opts != nil {
				tt.opts(&o)
			}
			c, sl := newTestClient(t, o)
			b, got, err := readAll(t.Context(), c, srv.URL+"/start")
			if n := len(srv.requests()); n != tt.requests {
				t.Errorf("server saw %d requests, want %d", n, tt.requests)
			}
			if s := c.Stats(); s.Requests != int64(tt.requests) {
				t.Errorf("Stats().Requests = %d, want %d", s.Requests, tt.requests)
			}
			if tt.class == errclass.Unclassified {
				if err != nil || string(got) != "ok" {
					t.Fatalf("got %q, %v", got, err)
				}
				if tt.path != "" && b.URL != srv.URL+tt.path {
					t.Errorf("Body.URL = %q, want %q", b.URL, srv.URL+tt.path)
				}
			} else {
				if errclass.Of(err) != tt.class {
					t.Fatalf("err = %v (class %v), want class %v", err, errclass.Of(err), tt.class)
				}
				if !strings.Contains(err.Error(), srv.URL) {
					t.Errorf("error %q does not name the URL", err)
				}
				var se *StatusError
				if tt.status != 0 && (!errors.As(err, &se) || se.StatusCode != tt.status) {
					t.Errorf("err = %v, want a StatusError %d", err, tt.status)
				}
			}
			waits := sl.get()
			if tt.minWait > 0 {
				if len(waits) == 0 {
					t.Fatal("no wait before the retry")
				}
				if waits[0] < tt.minWait || (tt.maxWait > 0 && waits[0] > tt.maxWait) {
					t.Errorf("first wait %v, want within [%v, %v]", waits[0], tt.minWait, tt.maxWait)
				}
			}
		})
	}
}

func TestOpenTransportErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/x"
	ln.Close()

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(tlsSrv.Close)

	tests := []struct {
		name     string
		url      string
		class    errclass.Class
		requests int64
	}{
		// Refused: the host cannot be reached, which no retry mends
		// (ErrUnreachable; a name the DNS does not know is too, untested
		// here: the tests ask no DNS server).
		{"connection refused", refused, errclass.Permanent, 1},
		{"untrusted certificate", tlsSrv.URL, errclass.Permanent, 1},
		{"not http", "ftp://127.0.0.1/x", errclass.Permanent, 0},
		{"relative", "/x", errclass.Permanent, 0},
		{"malformed", "http://[::1", errclass.Permanent, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newTestClient(t, testOptions())
			_, err := c.Open(t.Context(), tt.url)
			if errclass.Of(err) != tt.class {
				t.Fatalf("err = %v (class %v), want %v", err, errclass.Of(err), tt.class)
			}
			if got := c.Stats().Requests; got != tt.requests {
				t.Errorf("requests = %d, want %d", got, tt.requests)
			}
			if unreachable := errors.Is(err, ErrUnreachable); unreachable != (tt.url == refused) {
				t.Errorf("err = %v: wraps ErrUnreachable %v", err, unreachable)
			}
		})
	}
}

// TestHeadersOnEveryRequest follows a cross-host redirect and a resume: the
// User-Agent and extra headers reach every request, Authorization only the
// original host.
func TestHeadersOnEveryRequest(t *testing.T) {
	data := testData(100_000, 7)
	const etag = `"h"`
	other := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			w = cut(w, 40_000, false)
		}
		content(w, r, data, etag, time.Time{})
	})
	origin := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/away", http.StatusFound)
		default:
			http.Redirect(w, r, other.URL+"/file", http.StatusTemporaryRedirect)
		}
	})
	o := testOptions()
	o.Header = http.Header{"Authorization": {"Bearer secret"}, "X-Extra": {"1"}}
	c, _ := newTestClient(t, o)
	o.Header.Set("X-Extra", "changed after New") // New copies the map

	b, got, err := readAll(t.Context(), c, origin.URL+"/same")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(data) || b.URL != other.URL+"/file" {
		t.Fatalf("got %d bytes from %s", len(got), b.URL)
	}
	check := func(name string, reqs []http.Header, n int, auth bool) {
		t.Helper()
		if len(reqs) != n {
			t.Errorf("%s saw %d requests, want %d", name, len(reqs), n)
		}
		for i, h := range reqs {
			if h.Get("User-Agent") != "rsharvest/test" || h.Get("X-Extra") != "1" || h.Get("Accept-Encoding") != "identity" {
				t.Errorf("%s request %d: User-Agent %q, X-Extra %q, Accept-Encoding %q",
					name, i, h.Get("User-Agent"), h.Get("X-Extra"), h.Get("Accept-Encoding"))
			}
			if got := h.Get("Authorization") != ""; got != auth {
				t.Errorf("%s request %d: Authorization present = %v, want %v", name, i, got, auth)
			}
		}
	}
	// /same → /away → other, twice (the resume starts over at the original URL).
	check("origin", origin.requests(), 4, true)
	check("other host", other.requests(), 2, false)
	if rg := other.requests()[1].Get("Range"); rg != rangeHeader(40_000) {
		t.Errorf("resume Range = %q", rg)
	}
}

// TestRateLimiterSpacesRequests checks the token bucket: n requests at rate
// r with burst 1 cannot take less than (n-1)/r.
func TestRateLimiterSpacesRequests(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%2 == 0 {
			status(w, http.StatusServiceUnavailable, "")
			return
		}
		full(w, []byte("ok"), "")
	})
	const rps, n = 20.0, 8 // four Opens, each a 503 retried once
	o := testOptions()
	o.Rate, o.Burst = rps, 1
	c := New(o)
	start := time.Now()
	for range n / 2 {
		if _, _, err := readAll(t.Context(), c, srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	if minimum := time.Duration(float64(n-1) / rps * float64(time.Second)); elapsed < minimum-5*time.Millisecond {
		t.Fatalf("%d requests at %v/s took %v, less than %v", n, rps, elapsed, minimum)
	}
	if got := len(srv.requests()); got != n {
		t.Fatalf("server saw %d requests, want %d", got, n)
	}
}
