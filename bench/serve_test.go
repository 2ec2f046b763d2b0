package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// serveSmall generates a small Source and serves it.
func serveSmall(t *testing.T, opts ServeOptions) (string, *Server) {
	t.Helper()
	dir := t.TempDir()
	if _, err := Generate(t.Context(), GenOptions{Dir: dir, Resources: 12, Packages: 2, MeanSize: 2000, WriteResources: true}); err != nil {
		t.Fatal(err)
	}
	opts.CacheDir = t.TempDir()
	s, err := Serve(t.Context(), dir, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return dir, s
}

func get(t *testing.T, u string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestServeRewrites(t *testing.T) {
	dir, s := serveSmall(t, ServeOptions{})
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || !strings.HasSuffix(s.URL, "/") {
		t.Fatalf("URL %q", s.URL)
	}
	bins, err := filepath.Glob(filepath.Join(dir, "resources", "*.bin"))
	if err != nil || len(bins) == 0 {
		t.Fatalf("no random body written (%v)", err)
	}
	tests := []struct {
		path, ctype string
		rewritten   bool
	}{
		{".well-known/resourcesync", "application/xml", true},
		{"capabilitylist.xml", "application/xml", true},
		{"resourcedump.xml", "application/xml", true},
		{"packages/part-00001.manifest.xml", "application/xml", false},
		{"packages/part-00001.zip", "application/zip", false},
		{"resources/" + filepath.Base(bins[0]), "application/octet-stream", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			onDisk, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(tt.path)))
			if err != nil {
				t.Fatal(err)
			}
			resp, body := get(t, s.URL+tt.path, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.ctype {
				t.Errorf("Content-Type %q, want %q", got, tt.ctype)
			}
			for _, h := range []string{"ETag", "Last-Modified", "Accept-Ranges"} {
				if resp.Header.Get(h) == "" {
					t.Errorf("no %s", h)
				}
			}
			if etag := resp.Header.Get("ETag"); strings.HasPrefix(etag, "W/") || !strings.HasPrefix(etag, `"`) {
				t.Errorf("ETag %s is not a quoted strong ETag", etag)
			}
			want := onDisk
			if tt.rewritten {
				want = bytes.ReplaceAll(onDisk, []byte(Placeholder), []byte(s.URL))
				if bytes.Contains(body, []byte("PORTX")) || !bytes.Contains(body, []byte(s.URL)) {
					t.Errorf("placeholder not rewritten:\n%s", body)
				}
			}
			if !bytes.Equal(body, want) {
				t.Errorf("body differs from the expected %d bytes (got %d)", len(want), len(body))
			}
		})
	}
	// The package's manifest.xml is stored: the placeholder is in the ZIP's
	// bytes, and must have stayed there.
	_, zipBody := get(t, s.URL+"packages/part-00001.zip", nil)
	if !bytes.Contains(zipBody, []byte(Placeholder)) {
		t.Error("the ZIP was rewritten")
	}
}

func TestServeRangeAndETag(t *testing.T) {
	dir, s := serveSmall(t, ServeOptions{})
	zipData, err := os.ReadFile(filepath.Join(dir, "packages", "part-00002.zip"))
	if err != nil {
		t.Fatal(err)
	}
	docResp, doc := get(t, s.URL+"resourcedump.xml", nil)
	zipResp, _ := get(t, s.URL+"packages/part-00002.zip", nil)
	zipTag, docTag := zipResp.Header.Get("ETag"), docResp.Header.Get("ETag")

	tests := []struct {
		name       string
		path       string
		hdr        map[string]string
		wantStatus int
		want       []byte
	}{
		{"zip range", "packages/part-00002.zip", map[string]string{"Range": "bytes=10-99"}, http.StatusPartialContent, zipData[10:100]},
		{"zip suffix range", "packages/part-00002.zip", map[string]string{"Range": "bytes=-20"}, http.StatusPartialContent, zipData[len(zipData)-20:]},
		{"zip if-range current", "packages/part-00002.zip", map[string]string{"Range": "bytes=100-", "If-Range": zipTag}, http.StatusPartialContent, zipData[100:]},
		{"zip if-range stale", "packages/part-00002.zip", map[string]string{"Range": "bytes=100-", "If-Range": `"stale"`}, http.StatusOK, zipData},
		{"document range", "resourcedump.xml", map[string]string{"Range": "bytes=5-50"}, http.StatusPartialContent, doc[5:51]},
		{"document if-range current", "resourcedump.xml", map[string]string{"Range": "bytes=7-", "If-Range": docTag}, http.StatusPartialContent, doc[7:]},
		{"document if-range stale", "resourcedump.xml", map[string]string{"Range": "bytes=7-", "If-Range": zipTag}, http.StatusOK, doc},
		{"not modified", "packages/part-00002.zip", map[string]string{"If-None-Match": zipTag}, http.StatusNotModified, []byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, s.URL+tt.path, tt.hdr)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if !bytes.Equal(body, tt.want) {
				t.Errorf("body: %d bytes, want %d", len(body), len(tt.want))
			}
			if tag := resp.Header.Get("ETag"); tag != zipTag && tag != docTag {
				t.Errorf("ETag changed to %s", tag)
			}
		})
	}
	if zipTag == docTag {
		t.Error("two files share an ETag")
	}
}

func TestServeCounts(t *testing.T) {
	_, s := serveSmall(t, ServeOptions{})
	var total int64
	for range 3 {
		_, body := get(t, s.URL+"resourcedump.xml", nil)
		total += int64(len(body))
	}
	_, body := get(t, s.URL+"packages/part-00001.zip", nil)
	total += int64(len(body))
	get(t, s.URL+"missing.xml", nil)
	if got := s.Handler.Requests("/resourcedump.xml"); got != 3 {
		t.Errorf("Requests(/resourcedump.xml) = %d, want 3", got)
	}
	st := s.Handler.Stats()
	if st.Requests != 5 || st.ByPath["/packages/part-00001.zip"] != 1 || st.ByPath["/missing.xml"] != 1 {
		t.Errorf("stats %+v", st)
	}
	if st.BytesSent < total {
		t.Errorf("BytesSent %d, bodies were %d", st.BytesSent, total)
	}
}

func TestServeConcurrentDocument(t *testing.T) {
	_, s := serveSmall(t, ServeOptions{})
	_, want := get(t, s.URL+"resourcelist.xml", nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, p := range []string{"resourcelist.xml", "capabilitylist.xml", "resourcelist.xml"} {
				resp, body := get(t, s.URL+p, nil)
				if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte("PORTX")) {
					t.Errorf("%s: status %d", p, resp.StatusCode)
				}
				if p == "resourcelist.xml" && !bytes.Equal(body, want) {
					t.Errorf("%s differs between requests", p)
				}
			}
		})
	}
	wg.Wait()
}

func TestServeDocumentChanges(t *testing.T) {
	dir, s := serveSmall(t, ServeOptions{})
	_, before := get(t, s.URL+"capabilitylist.xml", nil)
	path := filepath.Join(dir, "capabilitylist.xml")
	changed := []byte(`<?xml version="1.0" encoding="UTF-8"?><urlset><url><loc>` + Placeholder + `changed.xml</loc></url></urlset>`)
	if err := os.WriteFile(path, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	_, after := get(t, s.URL+"capabilitylist.xml", nil)
	if bytes.Equal(before, after) || !bytes.Contains(after, []byte(s.URL+"changed.xml")) {
		t.Errorf("changed document not served:\n%s", after)
	}
}

func TestHandlerRefuses(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "served")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"served/ok.xml": "<x/>", "secret.txt": "secret"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "secret.txt"), filepath.Join(dir, "out.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ok.xml", filepath.Join(dir, "in.xml")); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(dir, ServeOptions{CacheDir: t.TempDir()})
	t.Cleanup(func() { h.Close() })
	tests := []struct {
		method, target string
		want           int
	}{
		{"GET", "/ok.xml", http.StatusOK},
		{"HEAD", "/ok.xml", http.StatusOK},
		{"GET", "/in.xml", http.StatusOK},
		{"GET", "/../secret.txt", http.StatusBadRequest},
		{"GET", "/sub/../../secret.txt", http.StatusBadRequest},
		{"GET", "/%2e%2e/secret.txt", http.StatusBadRequest},
		{"GET", "/sub/..", http.StatusBadRequest},
		{"GET", "/out.txt", http.StatusForbidden},
		{"GET", "/sub", http.StatusNotFound},
		{"GET", "/sub/", http.StatusNotFound},
		{"GET", "/", http.StatusNotFound},
		{"GET", "/missing", http.StatusNotFound},
		{"GET", "/ok.xml/below", http.StatusNotFound},
		{"POST", "/ok.xml", http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, "http://127.0.0.1:1"+tt.target, nil))
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d", rec.Code, tt.want)
			}
			if strings.Contains(rec.Body.String(), "secret") {
				t.Error("served a file outside the directory")
			}
		})
	}
}

// TestServeRawDotDot sends ".." on the wire, which clients normally clean.
func TestServeRawDotDot(t *testing.T) {
	_, s := serveSmall(t, ServeOptions{})
	u, _ := url.Parse(s.URL)
	var d net.Dialer
	conn, err := d.DialContext(t.Context(), "tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /packages/../../../etc/passwd HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", u.Host)
	reply, _ := io.ReadAll(conn)
	if !bytes.HasPrefix(reply, []byte("HTTP/1.1 400")) {
		t.Errorf("reply: %.80q", reply)
	}
}

func TestServeWrap(t *testing.T) {
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, ".zip") {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			if _, ok := w.(http.Flusher); !ok {
				t.Error("wrapped writer is not a Flusher")
			}
			next.ServeHTTP(w, r)
		})
	}
	_, s := serveSmall(t, ServeOptions{Wrap: wrap})
	if resp, _ := get(t, s.URL+"packages/part-00001.zip", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503 from the wrapper", resp.StatusCode)
	}
	if resp, _ := get(t, s.URL+"resourcedump.xml", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	if n := s.Handler.Requests("/packages/part-00001.zip"); n != 1 {
		t.Errorf("wrapped request counted %d times", n)
	}
}

func TestServeLoopbackOnly(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:0", true},
		{"", true},
		{"0.0.0.0:0", false},
		{":0", false},
		{"192.0.2.1:0", false},
		{"example.com:0", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			s, err := Serve(t.Context(), t.TempDir(), tt.addr, ServeOptions{})
			if s != nil {
				s.Close()
			}
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, err := Serve(ctx, t.TempDir(), "", ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var d net.Dialer
		c, err := d.DialContext(t.Context(), "tcp", strings.TrimSuffix(strings.TrimPrefix(s.URL, "http://"), "/"))
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("server still listening after its context ended")
}

// TestServeInterop serves a copy of the resync reference library's sample
// Source.
func TestServeInterop(t *testing.T) {
	src := filepath.Join("..", "..", "shared", "interop", "resync-2.0.1")
	if _, err := os.Stat(src); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("interop sample missing in CI: %v", err)
		}
		t.Skip("interop sample not available (../shared is not beside the checkout)")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	s, err := Serve(t.Context(), dir, "", ServeOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	resp, body := get(t, s.URL+".well-known/resourcesync", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/xml" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if bytes.Contains(body, []byte("PORTX")) || !bytes.Contains(body, []byte("<loc>"+s.URL+"capabilitylist.xml</loc>")) {
		t.Errorf("source description not rewritten:\n%s", body)
	}
	if _, body := get(t, s.URL+"capabilitylist.xml", nil); !bytes.Contains(body, []byte(s.URL+"resourcedump.xml")) {
		t.Errorf("capability list not rewritten:\n%s", body)
	}
	for _, rel := range []string{"dump00000.zip", "resources/sub dir/café über.txt"} {
		want, err := fs.ReadFile(os.DirFS(dir), rel)
		if err != nil {
			t.Fatal(err)
		}
		u := s.URL + (&url.URL{Path: rel}).EscapedPath()
		resp, got := get(t, u, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("%s: status %d, %d bytes, want %d unchanged", rel, resp.StatusCode, len(got), len(want))
		}
	}
}

func TestReplaceStream(t *testing.T) {
	const old, repl = "http://127.0.0.1:PORTX/", "http://127.0.0.1:4321/"
	long := strings.Repeat("x", 70<<10)
	tests := []string{
		"",
		"no placeholder here",
		old,
		old + old,
		"<loc>" + old + "a</loc><loc>" + old + "b</loc>",
		"ends with a prefix http://127.0.0.1:POR",
		"http://127.0.0.1:PORT" + old,
		long + old + long + old,
		long[:64<<10-5] + old + "tail",
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
		{"data and EOF", iotest.DataErrReader},
	}
	for i, in := range tests {
		want := strings.ReplaceAll(in, old, repl)
		for _, rd := range readers {
			var out bytes.Buffer
			if err := replaceStream(&out, rd.wrap(strings.NewReader(in)), []byte(old), []byte(repl)); err != nil {
				t.Fatal(err)
			}
			if out.String() != want {
				t.Errorf("case %d, %s reader: got %d bytes, want %d", i, rd.name, out.Len(), len(want))
			}
		}
	}
}
