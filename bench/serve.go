package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ServeOptions configures a Handler and a Server. The zero value serves a
// directory on a loopback port, rewriting Placeholder to the server's URL.
type ServeOptions struct {
	// BaseURL replaces the placeholder in documents. Empty means the
	// Server's own URL (Serve), or "http://" + the request's Host + "/"
	// (a bare Handler). When it has a path (a source generated for its
	// base, see NewBase), the directory is served under that path, and
	// its /.well-known/ at the server's root.
	BaseURL string
	// Placeholder is the base URL written in the documents on disk; empty
	// means the package's Placeholder ("http://127.0.0.1:PORTX/").
	Placeholder string
	// Wrap, when set, wraps the file server, for fault injection. Requests
	// and bytes are counted outside the wrapper, so what it does is
	// counted too; the ResponseWriter it gets supports http.Flusher and
	// http.ResponseController (Unwrap).
	Wrap func(http.Handler) http.Handler
	// AllowNonLoopback lets Serve listen on an address that is not a
	// loopback address. Off, Serve refuses such addresses.
	AllowNonLoopback bool
	// CacheDir is where the directory of rewritten documents is created;
	// empty means os.TempDir(). The Handler removes its directory on Close.
	CacheDir string
	// Logger receives one debug record per refused or failed request; nil
	// discards.
	Logger *slog.Logger
	// Static serves like the plain static web servers many sources are:
	// Last-Modified (and If-Modified-Since) only — no ETag, no Range.
	Static bool
	// Publish is the initial publication step of a generated Change Dump
	// (see Handler.Publish); 0 (or any negative value) publishes every
	// package.
	Publish int
}

// ServeStats is a snapshot of what a Handler has served.
type ServeStats struct {
	// Requests is the number of requests received, refused ones included.
	Requests int64
	// BytesSent is the number of response body bytes written.
	BytesSent int64
	// ByPath counts requests per URL path (decoded, as in
	// http.Request.URL.Path, e.g. "/resourcedump.xml").
	ByPath map[string]int
}

// Handler serves the files of a directory for tests and benchmarks:
// regular files only (no directory listings), never anything outside the
// directory (no ".." segments, no symbolic links that lead out), with
// strong ETags, Last-Modified, Range and If-Range (http.ServeContent).
//
// Documents — "*.xml", ".well-known/resourcesync", "robots.txt" and
// "*.html" — are served with the placeholder base URL replaced by the base
// URL (see ServeOptions.BaseURL), except package manifest copies
// ("*.manifest.xml"), which must stay identical to the manifests inside the
// packages. The rewritten copy is made once per file
// version (path, size, modification time and base URL) into a cache file,
// so that big documents are streamed in constant memory and Range requests
// work on them too. Other files (ZIP packages, bodies) are served
// unchanged.
//
// A Source generated with Change Dump packages can be published in steps
// (Publish): the Change Dump then lists only the first packages, and the
// later ones answer 404.
//
// A Handler is safe for concurrent use. Close removes its cache.
type Handler struct {
	dir         string
	opts        ServeOptions
	placeholder string
	// prefix is the path the directory is served under ("": the root).
	prefix string
	log    *slog.Logger
	next   http.Handler // the file server, wrapped by opts.Wrap

	requests atomic.Int64
	bytes    atomic.Int64
	publish  atomic.Int64 // publication step; -1 publishes everything
	stepped  atomic.Bool  // Publish has been used

	mu       sync.Mutex
	byPath   map[string]int
	cache    map[string]*cachedDoc
	cacheDir string
	closed   bool
	steps    *cachedSteps
}

// cachedSteps is the parsed stepsFile of the served directory.
type cachedSteps struct {
	size  int64
	mtime time.Time
	idx   *stepsIndex
	docs  map[string]bool
}

// cachedDoc is one rewritten document in the cache.
type cachedDoc struct {
	size  int64
	mtime time.Time
	path  string // cache file
	done  chan struct{}
	err   error // valid once done is closed
}

// NewHandler returns a Handler serving the files under dir. dir is resolved
// to an absolute path now; it is opened on every request, so a missing
// directory gives 404s rather than an error here.
func NewHandler(dir string, opts ServeOptions) *Handler {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	h := &Handler{
		dir:         dir,
		opts:        opts,
		placeholder: opts.Placeholder,
		log:         opts.Logger,
		byPath:      make(map[string]int),
		cache:       make(map[string]*cachedDoc),
	}
	if h.placeholder == "" {
		h.placeholder = Placeholder
	}
	if u, err := url.Parse(opts.BaseURL); err == nil && strings.Trim(u.Path, "/") != "" {
		h.prefix = "/" + strings.Trim(u.Path, "/")
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.publish.Store(-1)
	if opts.Publish > 0 {
		h.Publish(opts.Publish)
	}
	h.next = http.HandlerFunc(h.serveFile)
	if opts.Wrap != nil {
		h.next = opts.Wrap(h.next)
	}
	return h
}

// Publish sets the publication step of a Change Dump generated with
// GenOptions.ChangePackages: from now on the Change Dump (and its index)
// lists only packages 1 to k, and later packages, their manifest copies and
// the Change Dump documents that list none of packages 1 to k answer 404.
// Package k is listed as it will finally be (with its until), unless it is
// the last one and open. k = 0 publishes no package; k < 0, or k at least
// the number of packages, publishes everything, as before the first call.
// The documents of each step have ETags of their own, and from the first
// call on the Change Dump documents are served without Last-Modified.
// Directories without a generated Change Dump are not affected.
func (h *Handler) Publish(k int) {
	h.publish.Store(int64(max(k, -1)))
	h.stepped.Store(true)
}

// PublishEvery publishes the next change package every interval, the
// first after step (a negative step counts as 0), until ctx ends; it
// calls published with each step once it is published.
func (h *Handler) PublishEvery(ctx context.Context, step int, every time.Duration, published func(step int)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for step = max(step, 0); ; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			step++
			h.Publish(step)
			published(step)
		}
	}
}

// ServeHTTP counts the request and serves it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.prefix != "" && !strings.HasPrefix(r.URL.Path, "/.well-known/") {
		if r.URL.Path == h.prefix+"/" && h.home(w) {
			return
		}
		if r.URL.Path == h.prefix { // a directory's URL without its slash, as web servers answer it
			http.Redirect(w, r, h.prefix+"/", http.StatusMovedPermanently)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, h.prefix+"/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		r = r.Clone(r.Context())
		r.URL.Path, r.URL.RawPath = "/"+rest, ""
	}
	h.requests.Add(1)
	h.mu.Lock()
	h.byPath[r.URL.Path]++
	h.mu.Unlock()
	h.next.ServeHTTP(&countingWriter{ResponseWriter: w, n: &h.bytes}, r)
}

// home answers a request for the home page of a source served under a
// path with a page that links to its Source Description (rel="resourcesync",
// as sites do), and reports whether it did: a directory without one (a
// harvest list) has no home page.
func (h *Handler) home(w http.ResponseWriter) bool {
	if _, err := os.Stat(filepath.Join(h.dir, ".well-known", "resourcesync")); err != nil {
		return false
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, `<!DOCTYPE html>
<html><head><title>A synthetic ResourceSync source</title><link rel="resourcesync" href="/.well-known/resourcesync"></head>
<body><p>A synthetic ResourceSync source: its <a href="/.well-known/resourcesync">Source Description</a>.</p></body></html>
`)
	return true
}

// Requests returns how many requests were received for the URL path p
// (decoded, with its leading slash: "/resourcedump.xml").
func (h *Handler) Requests(p string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byPath[p]
}

// Stats returns a snapshot of the counters.
func (h *Handler) Stats() ServeStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := ServeStats{Requests: h.requests.Load(), BytesSent: h.bytes.Load(), ByPath: make(map[string]int, len(h.byPath))}
	for p, n := range h.byPath {
		s.ByPath[p] = n
	}
	return s
}

// Close removes the cache of rewritten documents. Documents requested
// afterwards are answered with 503; other files are still served.
func (h *Handler) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.cache = make(map[string]*cachedDoc)
	if h.cacheDir == "" {
		return nil
	}
	if err := os.RemoveAll(h.cacheDir); err != nil {
		return fmt.Errorf("bench: removing document cache: %w", err)
	}
	return nil
}

// serveFile is the file server.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rel, ok := localPath(r.URL.Path)
	if !ok {
		h.log.DebugContext(r.Context(), "bench: refused path", "path", r.URL.Path)
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	if rel == stepsDir || strings.HasPrefix(rel, stepsDir+"/") {
		http.NotFound(w, r)
		return
	}
	f, err := h.open(rel)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !st.Mode().IsRegular() {
		// Directories are not listed; devices and the like are not served.
		http.NotFound(w, r)
		return
	}
	etag := fmt.Sprintf(`"%x-%x`, st.Size(), st.ModTime().UnixNano())
	var content io.ReadSeeker = f
	if docType(rel) != "" && !isManifestCopy(rel) {
		base := h.baseURL(r)
		doc, err := h.rewritten(r.Context(), f.rel, f.File, st, base)
		if err != nil {
			h.log.DebugContext(r.Context(), "bench: rewriting document", "path", rel, "err", err)
			http.Error(w, "document unavailable", http.StatusServiceUnavailable)
			return
		}
		defer doc.Close()
		content = doc
		hb := fnv.New32a()
		hb.Write([]byte(base))
		etag += fmt.Sprintf("-%08x", hb.Sum32())
	}
	etag += f.tag + `"`
	hdr := w.Header()
	hdr.Set("Content-Type", contentType(rel))
	if h.opts.Static {
		// No validator but the date, and no Range: a request's Range,
		// If-Range and If-None-Match are ignored, as such a server does.
		r.Header.Del("Range")
		r.Header.Del("If-Range")
		r.Header.Del("If-None-Match")
	} else {
		hdr.Set("ETag", etag)
		hdr.Set("Accept-Ranges", "bytes")
	}
	modtime := st.ModTime()
	if f.stepped {
		modtime = time.Time{}
	}
	http.ServeContent(w, r, "", modtime, content)
}

// openFile is the file that answers a request.
type openFile struct {
	*os.File
	rel     string // the path opened
	tag     string // added to the ETag: the publication step
	stepped bool   // a Change Dump document once Publish is used: no Last-Modified
}

// open opens the file that answers a request for rel under the current
// publication step: rel itself, or the step's variant of a Change Dump
// document. A file the step does not publish gives fs.ErrNotExist.
//
// Once Publish is used, Change Dump documents are served without
// Last-Modified: their files' times say nothing of when a step was
// published, and If-Modified-Since must not answer 304 for a step that
// lists more packages. Their ETags tell the steps apart.
func (h *Handler) open(rel string) (openFile, error) {
	if h.stepped.Load() {
		cs, err := h.loadSteps()
		if err != nil {
			return openFile{}, err
		}
		if cs != nil && cs.docs[rel] {
			k := int(h.publish.Load())
			if k < 0 || k >= cs.idx.Packages {
				f, err := os.OpenInRoot(h.dir, filepath.FromSlash(rel))
				return openFile{File: f, rel: rel, stepped: true}, err
			}
			if first, ok := cs.idx.Visible[rel]; ok && k < first {
				return openFile{}, fs.ErrNotExist
			}
			variant := path.Join(stepsDir, strconv.Itoa(k), rel)
			of := openFile{rel: variant, tag: fmt.Sprintf("-p%d", k), stepped: true}
			if of.File, err = os.OpenInRoot(h.dir, filepath.FromSlash(variant)); err == nil || !errors.Is(err, fs.ErrNotExist) {
				return of, err
			}
			of.rel = rel
			of.File, err = os.OpenInRoot(h.dir, filepath.FromSlash(rel))
			return of, err
		}
		if k := int(h.publish.Load()); cs != nil && k >= 0 && k < cs.idx.Packages {
			if first, ok := cs.idx.Visible[rel]; ok && k < first {
				return openFile{}, fs.ErrNotExist
			}
		}
	}
	f, err := os.OpenInRoot(h.dir, filepath.FromSlash(rel))
	return openFile{File: f, rel: rel}, err
}

// loadSteps returns the served directory's stepsFile, parsed, or nil when
// there is none. It is read again when it changes.
func (h *Handler) loadSteps() (*cachedSteps, error) {
	f, err := os.OpenInRoot(h.dir, filepath.FromSlash(stepsFile))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.steps; c != nil && c.size == st.Size() && c.mtime.Equal(st.ModTime()) {
		return c, nil
	}
	var idx stepsIndex
	if err := json.NewDecoder(f).Decode(&idx); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", stepsFile, err)
	}
	c := &cachedSteps{size: st.Size(), mtime: st.ModTime(), idx: &idx, docs: make(map[string]bool, len(idx.Documents))}
	for _, d := range idx.Documents {
		c.docs[d] = true
	}
	h.steps = c
	return c, nil
}

// fail answers a request whose file could not be opened.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		http.NotFound(w, r)
	default:
		// Symbolic links out of the directory land here, with permission
		// errors and the like.
		h.log.DebugContext(r.Context(), "bench: refused file", "path", r.URL.Path, "err", err)
		http.Error(w, "forbidden", http.StatusForbidden)
	}
}

// localPath turns a URL path into a slash-separated path relative to the
// served directory. It refuses ".." segments, NUL bytes and backslashes.
func localPath(p string) (string, bool) {
	if strings.ContainsAny(p, "\x00\\") {
		return "", false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "", false
		}
	}
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if rel == "" {
		rel = "."
	}
	return rel, true
}

// docType returns the media type of a document whose placeholder is
// rewritten, or "" when rel is not such a document.
func docType(rel string) string {
	switch {
	case rel == ".well-known/resourcesync", strings.HasSuffix(rel, ".xml"):
		return "application/xml"
	case rel == "robots.txt":
		return "text/plain; charset=utf-8"
	case strings.HasSuffix(rel, ".html"):
		return "text/html; charset=utf-8"
	}
	return ""
}

// isManifestCopy reports whether rel is a copy of a package's manifest
// (linked with rel="contents"). It is served as it is, unrewritten: it must
// stay identical to the manifest.xml inside its package, whose URIs are not
// rewritten either.
func isManifestCopy(rel string) bool { return strings.HasSuffix(rel, ".manifest.xml") }

// contentType returns the media type rel is served with.
func contentType(rel string) string {
	if t := docType(rel); t != "" {
		return t
	}
	ext := path.Ext(rel)
	if ext == ".zip" {
		return "application/zip"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// baseURL returns the URL the placeholder is rewritten to for r.
func (h *Handler) baseURL(r *http.Request) string {
	if h.opts.BaseURL != "" {
		return h.opts.BaseURL
	}
	return "http://" + r.Host + "/"
}

// rewritten returns the document rel (open as src, described by st) with
// the placeholder replaced by base, from the cache, making the cache file
// first if needed. Concurrent requests for the same document wait for one
// rewrite.
func (h *Handler) rewritten(ctx context.Context, rel string, src *os.File, st fs.FileInfo, base string) (*os.File, error) {
	key := rel + "\x00" + base
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("handler closed")
	}
	c := h.cache[key]
	if c == nil || c.size != st.Size() || !c.mtime.Equal(st.ModTime()) {
		if c != nil {
			select {
			case <-c.done:
				os.Remove(c.path)
			default: // still being written; Close removes it
			}
		}
		c = &cachedDoc{size: st.Size(), mtime: st.ModTime(), done: make(chan struct{})}
		h.cache[key] = c
		dir, err := h.ensureCacheDir()
		h.mu.Unlock()
		if err == nil {
			c.path, err = rewriteFile(dir, src, h.placeholder, base)
		}
		c.err = err
		close(c.done)
		if err != nil {
			h.mu.Lock()
			if h.cache[key] == c {
				delete(h.cache, key)
			}
			h.mu.Unlock()
		}
	} else {
		h.mu.Unlock()
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.err != nil {
		return nil, c.err
	}
	return os.Open(c.path)
}

// ensureCacheDir creates the cache directory on first use. h.mu is held.
func (h *Handler) ensureCacheDir() (string, error) {
	if h.cacheDir == "" {
		dir, err := os.MkdirTemp(h.opts.CacheDir, "rsharvest-serve-*")
		if err != nil {
			return "", fmt.Errorf("bench: document cache: %w", err)
		}
		h.cacheDir = dir
	}
	return h.cacheDir, nil
}

// rewriteFile copies src into a new file in dir with every occurrence of
// old replaced by repl, and returns the new file's path.
func rewriteFile(dir string, src io.Reader, old, repl string) (p string, err error) {
	f, err := os.CreateTemp(dir, "doc-*")
	if err != nil {
		return "", fmt.Errorf("bench: document cache: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("bench: document cache: %w", cerr)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err := replaceStream(f, src, []byte(old), []byte(repl)); err != nil {
		return "", fmt.Errorf("bench: document cache: %w", err)
	}
	return f.Name(), nil
}

// replaceStream copies src to dst replacing every occurrence of old
// (non-empty) with repl, in constant memory: it holds back the last
// len(old)-1 bytes of each chunk, which may begin an occurrence that the
// next chunk completes.
func replaceStream(dst io.Writer, src io.Reader, old, repl []byte) error {
	buf := make([]byte, 64<<10+len(old))
	carry := 0
	for {
		n, rerr := src.Read(buf[carry:])
		data := buf[:carry+n]
		eof := errors.Is(rerr, io.EOF)
		if rerr != nil && !eof {
			return rerr
		}
		limit := len(data) // occurrences must start before limit
		if !eof {
			limit -= min(len(old)-1, len(data))
		}
		pos := 0
		for {
			j := bytes.Index(data[pos:], old)
			if j < 0 || pos+j >= limit {
				break
			}
			if _, err := dst.Write(data[pos : pos+j]); err != nil {
				return err
			}
			if _, err := dst.Write(repl); err != nil {
				return err
			}
			pos += j + len(old)
		}
		if pos < limit {
			if _, err := dst.Write(data[pos:limit]); err != nil {
				return err
			}
			pos = limit
		}
		carry = copy(buf, data[pos:])
		if eof {
			return nil
		}
	}
}

// countingWriter counts the body bytes written through it.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

// Write implements http.ResponseWriter.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// ReadFrom keeps the underlying writer's fast path (sendfile) while
// counting.
func (c *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		n, err := rf.ReadFrom(r)
		c.n.Add(n)
		return n, err
	}
	return io.Copy(writerOnly{c}, r)
}

// Flush implements http.Flusher when the underlying writer does.
func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// writerOnly hides every method but Write, so io.Copy does not loop back
// into ReadFrom.
type writerOnly struct{ io.Writer }

// Server is a running loopback HTTP server of a directory.
type Server struct {
	// URL is the server's base URL, "http://127.0.0.1:PORT/".
	URL string
	// Handler serves the directory and counts requests.
	Handler *Handler

	srv    *http.Server
	served chan struct{}
	once   sync.Once
	err    error
}

// Serve starts serving dir on addr ("127.0.0.1:0", a free loopback port,
// when empty) and returns once it listens. Addresses that are not loopback
// are refused unless opts.AllowNonLoopback. When opts.BaseURL is empty the
// documents' placeholder is rewritten to the server's URL. The server
// stops when ctx is done or Close is called.
func Serve(ctx context.Context, dir, addr string, opts ServeOptions) (*Server, error) {
	ln, err := listen(ctx, addr, opts.AllowNonLoopback)
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String() + "/", served: make(chan struct{})}
	if opts.BaseURL == "" {
		opts.BaseURL = s.URL
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.Handler = NewHandler(dir, opts)
	s.srv = &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("bench: server stopped", "url", s.URL, "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.served:
		}
	}()
	log.Debug("bench: serving", "dir", dir, "url", s.URL)
	return s, nil
}

// Close stops the server at once (open connections are closed), waits for
// it to stop and removes the handler's cache. It may be called more than
// once; later calls return the first call's result.
func (s *Server) Close() error {
	s.once.Do(func() {
		err := s.srv.Close()
		<-s.served
		s.err = errors.Join(err, s.Handler.Close())
	})
	return s.err
}

// listen listens on addr ("127.0.0.1:0", a free loopback port, when
// empty), refusing an address that is not loopback unless anyAddr.
func listen(ctx context.Context, addr string, anyAddr bool) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if !anyAddr {
		if err := checkLoopback(addr); err != nil {
			return nil, err
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bench: listen: %w", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !anyAddr && !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("bench: %s is not a loopback address", ln.Addr())
	}
	return ln, nil
}

// checkLoopback refuses addresses whose host is not a loopback address or
// "localhost" (an empty host would listen on every interface).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bench: address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("bench: address %q is not loopback (set AllowNonLoopback to listen there)", addr)
}
