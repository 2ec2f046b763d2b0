package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

func TestOpenSurvivesInterruptions(t *testing.T) {
	data := testData(200_000, 1)
	const etag = `"v1"`
	lm := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

	tests := []struct {
		name     string
		opts     func(*Options)
		handler  handlerFunc
		requests int
		resumes  int
		restarts int
		retries  int64
		// ranges are the expected Range and If-Range headers of each
		// request ("" = absent); nil skips the check.
		ranges  [][2]string
		chunked bool
	}{
		{
			name: "reset mid-body, strong ETag",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w = cut(w, 70_000, true)
				}
				content(w, r, data, etag, time.Time{})
			},
			requests: 2, resumes: 1,
		},
		{
			name: "short body under Content-Length, strong ETag",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w = cut(w, 70_000, false)
				}
				content(w, r, data, etag, time.Time{})
			},
			requests: 2, resumes: 1,
			ranges: [][2]string{{"", ""}, {rangeHeader(70_000), etag}},
		},
		{
			name: "Last-Modified as validator",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w = cut(w, 70_000, false)
				}
				content(w, r, data, "", lm)
			},
			requests: 2, resumes: 1,
			ranges: [][2]string{{"", ""}, {rangeHeader(70_000), lm.Format(http.TimeFormat)}},
		},
		{
			name: "weak ETag: Range without If-Range (Accept-Ranges)",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w = cut(w, 70_000, false)
				}
				content(w, r, data, `W/"w1"`, time.Time{})
			},
			requests: 2, resumes: 1,
			ranges: [][2]string{{"", ""}, {rangeHeader(70_000), ""}},
		},
		{
			name: "no validator, no Accept-Ranges: whole body again, prefix discarded",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w = cut(w, 70_000, false)
				}
				full(w, data, "")
			},
			requests: 2, restarts: 1,
			ranges: [][2]string{{"", ""}, {"", ""}},
		},
		{
			name: "server ignores Range: clean restart",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w = cut(w, 70_000, false)
				}
				full(w, data, etag)
			},
			requests: 2, resumes: 1, restarts: 1,
			ranges: [][2]string{{"", ""}, {rangeHeader(70_000), etag}},
		},
		{
			name: "stall: watchdog fires, transfer resumes",
			opts: func(o *Options) { o.StallTimeout = 100 * time.Millisecond },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					stall(w, r, data, 70_000, etag)
					return
				}
				content(w, r, data, etag, time.Time{})
			},
			requests: 2, resumes: 1,
			ranges: [][2]string{{"", ""}, {rangeHeader(70_000), etag}},
		},
		{
			name: "missing Content-Length (chunked), complete",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				chunked(w, data)
			},
			requests: 1, chunked: true,
		},
		{
			name: "missing Content-Length (chunked), cut",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w.Header().Set("ETag", etag)
					chunked(cut(w, 70_000, false), data)
					return
				}
				content(w, r, data, etag, time.Time{})
			},
			requests: 2, resumes: 1, chunked: true,
			ranges: [][2]string{{"", ""}, {rangeHeader(70_000), etag}},
		},
		{
			name: "two interruptions",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n < 2 {
					w = cut(w, 50_000, false)
				}
				content(w, r, data, etag, time.Time{})
			},
			requests: 3, resumes: 2,
			ranges: [][2]string{{"", ""}, {rangeHeader(50_000), etag}, {rangeHeader(100_000), etag}},
		},
		{
			name: "503 on the resume request, then 206",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				switch n {
				case 0:
					content(cut(w, 70_000, false), r, data, etag, time.Time{})
				case 1:
					status(w, http.StatusServiceUnavailable, "")
				default:
					content(w, r, data, etag, time.Time{})
				}
			},
			requests: 3, resumes: 1, retries: 1,
			ranges: [][2]string{{"", ""}, {rangeHeader(70_000), etag}, {rangeHeader(70_000), etag}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.handler)
			o := testOptions()
			if tt.opts != nil {
				tt.opts(&o)
			}
			c, _ := newTestClient(t, o)
			b, got, err := readAll(t.Context(), c, srv.URL+"/x")
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("got %d bytes, want the %d bytes served", len(got), len(data))
			}
			reqs := srv.requests()
			if len(reqs) != tt.requests {
				t.Errorf("server saw %d requests, want %d", len(reqs), tt.requests)
			}
			if b.attempts != tt.requests || b.resumes != tt.resumes || b.restarts != tt.restarts {
				t.Errorf("attempts/resumes/restarts = %d/%d/%d, want %d/%d/%d",
					b.attempts, b.resumes, b.restarts, tt.requests, tt.resumes, tt.restarts)
			}
			if s := c.Stats(); s.Requests != int64(tt.requests) || s.Resumes != int64(tt.resumes) ||
				s.Restarts != int64(tt.restarts) || s.Retries != tt.retries || s.BytesDownloaded < int64(len(data)) {
				t.Errorf("stats = %+v", s)
			}
			if want := int64(len(data)); tt.chunked {
				want = -1
				if b.ContentLength != want {
					t.Errorf("ContentLength = %d, want %d", b.ContentLength, want)
				}
			} else if b.ContentLength != want {
				t.Errorf("ContentLength = %d, want %d", b.ContentLength, want)
			}
			for i, want := range tt.ranges {
				if i >= len(reqs) {
					break
				}
				got := [2]string{reqs[i].Get("Range"), reqs[i].Get("If-Range")}
				if got != want {
					t.Errorf("request %d: Range, If-Range = %q, want %q", i, got, want)
				}
			}
			if tt.ranges == nil && len(reqs) == 2 {
				// A reset may lose bytes in flight: any Range up to the cut is right.
				if rg := reqs[1].Get("Range"); rg != "" {
					off, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
					if err != nil || off <= 0 || off > 70_000 || reqs[1].Get("If-Range") != etag {
						t.Errorf("resume request: Range %q, If-Range %q", rg, reqs[1].Get("If-Range"))
					}
				}
			}
		})
	}
}

func TestOpenReadErrors(t *testing.T) {
	data := testData(100_000, 3)
	other := testData(100_000, 4)
	const etag = `"v1"`
	cutFirst := func(next handlerFunc) handlerFunc {
		return func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				content(cut(w, 30_000, false), r, data, etag, time.Time{})
				return
			}
			next(n, w, r)
		}
	}
	tests := []struct {
		name     string
		opts     func(*Options)
		handler  handlerFunc
		class    errclass.Class
		is       error
		requests int
	}{
		{
			name: "ETag changed between attempts",
			handler: cutFirst(func(n int, w http.ResponseWriter, r *http.Request) {
				content(w, r, other, `"v2"`, time.Time{})
			}),
			class: errclass.Retryable, is: ErrChanged, requests: 2,
		},
		{
			name: "206 with a wrong Content-Range start",
			handler: cutFirst(func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", etag)
				w.Header().Set("Content-Range", "bytes 0-99999/100000")
				w.WriteHeader(http.StatusPartialContent)
				w.Write(data)
			}),
			class: errclass.Retryable, is: ErrChanged, requests: 2,
		},
		{
			name: "206 with a different complete length",
			handler: cutFirst(func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Range", "bytes 30000-99999/200000")
				w.WriteHeader(http.StatusPartialContent)
				w.Write(data[30_000:])
			}),
			class: errclass.Retryable, is: ErrChanged, requests: 2,
		},
		{
			name: "206 with a malformed Content-Range",
			handler: cutFirst(func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Range", "bytes 30000-/*")
				w.WriteHeader(http.StatusPartialContent)
				w.Write(data[30_000:])
			}),
			class: errclass.Retryable, is: ErrChanged, requests: 2,
		},
		{
			name: "416 on resume",
			handler: cutFirst(func(n int, w http.ResponseWriter, r *http.Request) {
				status(w, http.StatusRequestedRangeNotSatisfiable, "")
			}),
			class: errclass.Retryable, is: ErrChanged, requests: 2,
		},
		{
			name: "no progress after the first cut, beyond Retries",
			handler: cutFirst(func(n int, w http.ResponseWriter, r *http.Request) {
				content(cut(w, 0, false), r, data, etag, time.Time{})
			}),
			class: errclass.Retryable, is: errInterrupted, requests: 1 + 4,
		},
		{
			name: "MaxResumes exhausted",
			opts: func(o *Options) { o.MaxResumes = 2 },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(cut(w, 10_000, false), r, data, etag, time.Time{})
			},
			class: errclass.Retryable, is: errInterrupted, requests: 3,
		},
		{
			name: "resuming disabled",
			opts: func(o *Options) { o.MaxResumes = -1 },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(cut(w, 10_000, false), r, data, etag, time.Time{})
			},
			class: errclass.Retryable, is: errInterrupted, requests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.handler)
			o := testOptions()
			if tt.opts != nil {
				tt.opts(&o)
			}
			c, _ := newTestClient(t, o)
			_, got, err := readAll(t.Context(), c, srv.URL+"/x")
			if err == nil {
				t.Fatalf("read %d bytes without error", len(got))
			}
			if errclass.Of(err) != tt.class || !errors.Is(err, tt.is) {
				t.Fatalf("err = %v (class %v), want class %v wrapping %v", err, errclass.Of(err), tt.class, tt.is)
			}
			if !strings.Contains(err.Error(), srv.URL) {
				t.Errorf("error %q does not name the URL", err)
			}
			if !bytes.Equal(got, data[:len(got)]) {
				t.Errorf("bytes returned before the error are not a prefix of the representation")
			}
			if n := len(srv.requests()); n != tt.requests {
				t.Errorf("server saw %d requests, want %d", n, tt.requests)
			}
		})
	}
}

func TestBodyLongerThanContentLength(t *testing.T) {
	o := testOptions()
	o.Transport = fakeTransport(func(r *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode:    http.StatusOK,
			Header:        http.Header{"Etag": {`"x"`}},
			ContentLength: 10,
			Body:          io.NopCloser(bytes.NewReader(make([]byte, 20))),
			Request:       r,
		}, nil
	})
	c, _ := newTestClient(t, o)
	_, _, err := readAll(t.Context(), c, "http://fake.invalid/x")
	if !errclass.IsPermanent(err) || !strings.Contains(err.Error(), "longer") {
		t.Fatalf("err = %v, want a permanent 'longer than Content-Length' error", err)
	}
}

func TestBodyClose(t *testing.T) {
	data := testData(50_000, 5)
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		content(w, r, data, `"c"`, time.Time{})
	})
	c, _ := newTestClient(t, testOptions())
	b, err := c.Open(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := b.Read(make([]byte, 10)); !errors.Is(err, errClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 0-9/10", 0, 10, true},
		{"bytes 5-9/*", 5, -1, true},
		{"BYTES 5-9/100", 5, 100, true},
		{"bytes 5-4/100", 0, 0, false},
		{"bytes 5-9/9", 0, 0, false},
		{"bytes */100", 0, 0, false},
		{"items 0-9/10", 0, 0, false},
		{"bytes -1-9/10", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		start, total, err := parseContentRange(tt.in)
		if (err == nil) != tt.ok || (tt.ok && (start != tt.start || total != tt.total)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v", tt.in, start, total, err)
		}
	}
}

// TestCancelStopsPromptly cancels the context while the client waits in each
// of its waiting places; a wait that ignored ctx would take a minute.
func TestCancelStopsPromptly(t *testing.T) {
	data := testData(100_000, 6)
	tests := []struct {
		name    string
		opts    func(*Options)
		handler handlerFunc
		// warm is called (and may consume the rate limit) before the
		// cancelled call.
		warm bool
		read bool
	}{
		{
			name: "Retry-After sleep",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				status(w, http.StatusServiceUnavailable, "60")
			},
		},
		{
			name: "backoff sleep",
			opts: func(o *Options) { o.BackoffInitial, o.BackoffMax = time.Minute, time.Minute },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				status(w, http.StatusBadGateway, "")
			},
		},
		{
			name: "rate limiter wait",
			opts: func(o *Options) { o.Rate = 1.0 / 60 },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(w, r, data, "", time.Time{})
			},
			warm: true,
		},
		{
			name: "stalled body",
			opts: func(o *Options) { o.StallTimeout = time.Minute },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				stall(w, r, data, 1000, `"s"`)
			},
			read: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.handler)
			o := testOptions()
			if tt.opts != nil {
				tt.opts(&o)
			}
			c := New(o) // real sleeps
			if tt.warm {
				if _, _, err := readAll(t.Context(), c, srv.URL); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			time.AfterFunc(100*time.Millisecond, cancel)
			start := time.Now()
			var err error
			if tt.read {
				var b *Body
				if b, err = c.Open(ctx, srv.URL); err == nil {
					_, err = io.ReadAll(b)
					b.Close()
				}
			} else {
				_, err = c.Open(ctx, srv.URL)
			}
			if err != context.Canceled {
				t.Fatalf("err = %v, want context.Canceled itself", err)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("returned %v after the cancellation", d)
			}
		})
	}
}

func TestRateLimitWaitBeyondDeadline(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) { full(w, []byte("x"), "") })
	o := testOptions()
	o.Rate = 1.0 / 60
	c, _ := newTestClient(t, o)
	if _, _, err := readAll(t.Context(), c, srv.URL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := c.Open(ctx, srv.URL)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one wrapping context.DeadlineExceeded", err)
	}
}

// TestOpenForm: OpenForm POSTs its form, retries as Open does, and reads
// a body that breaks again from the start (a POST is never ranged),
// skipping what was read.
func TestOpenForm(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 1000)
	var calls int
	o := testOptions()
	o.Transport = fakeTransport(func(r *http.Request) (*http.Response, error) {
		calls++
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || string(b) != "resumptionToken=a%2Bb%2Fc+d&verb=ListRecords" || r.Header.Get("Range") != "" {
			t.Errorf("request %d: %s %q %q, Range %q", calls, r.Method, r.Header.Get("Content-Type"), b, r.Header.Get("Range"))
		}
		switch calls {
		case 1:
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("busy")), Request: r}, nil
		case 2:
			// Breaks after half the body.
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Accept-Ranges": {"bytes"}}, ContentLength: int64(len(payload)),
				Body: io.NopCloser(io.MultiReader(bytes.NewReader(payload[:len(payload)/2]), iotest.ErrReader(io.ErrUnexpectedEOF))), Request: r}, nil
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, ContentLength: int64(len(payload)), Body: io.NopCloser(bytes.NewReader(payload)), Request: r}, nil
	})
	c, _ := newTestClient(t, o)
	b, err := c.OpenForm(t.Context(), "http://fake.invalid/oai", url.Values{"verb": {"ListRecords"}, "resumptionToken": {"a+b/c d"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := io.ReadAll(b)
	if err != nil || !bytes.Equal(got, payload) || calls != 3 {
		t.Errorf("read %d bytes (%v) in %d requests, want %d in 3", len(got), err, calls, len(payload))
	}
}
