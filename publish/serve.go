package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
)

// Copies gives back held bodies by URI; a sink.Inventory does.
type Copies interface {
	// Get opens the held body of uri; an error satisfying
	// errors.Is(err, fs.ErrNotExist) when there is none.
	Get(ctx context.Context, uri string) (io.ReadCloser, error)
}

// SetCopies are Copies that also give back a body by the resource set it
// is published in (its directory, "sets/NAME"), which tells two sources'
// copies of one URI apart.
type SetCopies interface {
	Copies
	GetIn(ctx context.Context, setDir, uri string) (io.ReadCloser, error)
}

var _ Copies = sink.Inventory(nil)

// Server serves a published Source over HTTP: the documents of the
// published generation (Out/current), with ETag, Last-Modified, conditional
// requests and Range; the Source Description at /.well-known/resourcesync;
// and, when Copies is set, the held copy of each resource at
// BaseURL/sets/NAME/files/… (see CopyPath; BaseURL/files/… too, as
// earlier versions linked them), read from the sink that holds it.
type Server struct {
	// Out is the publication's output directory.
	Out string
	// BaseURL is the URL the documents are published at: its path is
	// the prefix the server answers under.
	BaseURL string
	// Copies gives back the bodies (an fs or s3 sink, or each site's own
	// sinks: publisher.SiteCopies), or nil.
	Copies Copies
	// Log receives one line per failed request (nil: discarded).
	Log *slog.Logger
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() (http.Handler, error) {
	base, err := CheckBaseURL(s.BaseURL)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(base)
	prefix := strings.TrimRight(u.Path, "/")
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		if p == "/"+WellKnown {
			s.serveDoc(w, r, WellKnown, log)
			return
		}
		rel, ok := strings.CutPrefix(p, prefix+"/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		if c, ok := strings.CutPrefix(rel, FilesPath+"/"); ok && s.Copies != nil {
			s.serveCopy(w, r, "", c, log)
			return
		}
		if set, c, ok := setCopy(rel); ok && s.Copies != nil {
			s.serveCopy(w, r, set, c, log)
			return
		}
		s.serveDoc(w, r, rel, log)
	}), nil
}

// serveDoc serves a document of the published generation, else of the one
// before it (a page named in an index that a consumer read before the
// last publication). Kept documents keep their file (a hard link), so
// their validators do not change.
func (s *Server) serveDoc(w http.ResponseWriter, r *http.Request, rel string, log *slog.Logger) {
	target, err := os.Readlink(filepath.Join(s.Out, Current))
	if err != nil {
		log.Warn("publish serve: nothing published", "out", s.Out, "error", err)
		http.Error(w, "nothing is published yet", http.StatusServiceUnavailable)
		return
	}
	clean := path.Clean("/" + rel)[1:]
	current := filepath.Base(target)
	f, err := s.open(current, clean)
	if errors.Is(err, errNoGeneration) {
		http.Error(w, "nothing is published yet", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		// Looked for in the generation before only when the current one
		// lacks it.
		if prev := s.previous(current); prev != "" {
			f, err = s.open(prev, clean)
		}
	}
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	typ := mime.TypeByExtension(path.Ext(clean))
	if clean == WellKnown || path.Ext(clean) == ".xml" {
		typ = "application/xml"
	}
	if typ != "" {
		w.Header().Set("Content-Type", typ)
	}
	w.Header().Set("ETag", etag(st.Size(), st.ModTime()))
	http.ServeContent(w, r, clean, st.ModTime(), f)
}

// errNoGeneration: the generation to serve from cannot be opened.
var errNoGeneration = errors.New("no such generation")

// open opens the document at rel (cleaned) of generation gen, within it.
func (s *Server) open(gen, rel string) (*os.File, error) {
	root, err := os.OpenRoot(filepath.Join(s.Out, genDir, gen))
	if err != nil {
		return nil, errNoGeneration
	}
	defer root.Close()
	return root.Open(filepath.FromSlash(rel))
}

// previous names the generation published before gen (the highest one
// below it that is whole), or "" when there is none.
func (s *Server) previous(gen string) string {
	n, ok := genNumber(gen)
	if !ok {
		return ""
	}
	ents, err := os.ReadDir(filepath.Join(s.Out, genDir))
	if err != nil {
		return ""
	}
	best, name := 0, ""
	for _, e := range ents {
		if k, ok := genNumber(e.Name()); ok && k < n && k > best {
			best, name = k, e.Name()
		}
	}
	return name
}

func etag(size int64, mod time.Time) string { return fmt.Sprintf(`"%x-%x"`, size, mod.UnixNano()) }

// setCopy splits the path of a copy under a set's directory,
// "sets/NAME/files/PATH", into the set's directory and PATH.
func setCopy(rel string) (set, path string, ok bool) {
	rest, ok := strings.CutPrefix(rel, "sets/")
	if !ok {
		return "", "", false
	}
	name, path, ok := strings.Cut(rest, "/"+FilesPath+"/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return "sets/" + name, path, true
}

// serveCopy serves the held copy of the resource whose path is rel, of
// the set whose directory is set ("": any).
func (s *Server) serveCopy(w http.ResponseWriter, r *http.Request, set, rel string, log *slog.Logger) {
	uri, err := fs.Decode(rel)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Minute)
	defer cancel()
	var body io.ReadCloser
	if sc, ok := s.Copies.(SetCopies); ok && set != "" {
		body, err = sc.GetIn(ctx, set, uri)
	} else {
		body, err = s.Copies.Get(ctx, uri)
	}
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			http.NotFound(w, r)
			return
		}
		log.Warn("publish serve: copy", "uri", uri, "error", err)
		http.Error(w, "the copy cannot be read", http.StatusBadGateway)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	var mod time.Time
	if st, ok := body.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil {
			mod = fi.ModTime()
			w.Header().Set("ETag", etag(fi.Size(), mod))
		}
	}
	if rs, ok := body.(io.ReadSeeker); ok {
		http.ServeContent(w, r, "", mod, rs)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, body); err != nil {
		log.Warn("publish serve: copy", "uri", uri, "error", err)
	}
}
