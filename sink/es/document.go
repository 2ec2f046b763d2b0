package es

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

// maxIDBytes is Elasticsearch's limit on the length of an _id.
const maxIDBytes = 512

// hashedID starts the _id of a resource document whose URI is not its
// _id.
const hashedID = "sha256:"

// docID returns the _id of uri's resource document: uri itself when
// Elasticsearch takes it as an _id (valid UTF-8, 1 to 512 bytes) and it
// does not start with hashedID, else hashedID and the hex SHA-256 of its
// bytes. Distinct URIs have distinct _ids: a URI that looks like another's
// hashed _id is hashed too.
func docID(uri string) string {
	if uri != "" && len(uri) <= maxIDBytes && utf8.ValidString(uri) && !strings.HasPrefix(uri, hashedID) {
		return uri
	}
	sum := sha256.Sum256([]byte(uri))
	return hashedID + hex.EncodeToString(sum[:])
}

// uriFields returns the "uri" and "uri_b64" values of uri: uri_b64 is set
// only when uri is not valid UTF-8, which JSON cannot carry.
func uriFields(uri string) (text, b64 string) {
	if utf8.ValidString(uri) {
		return uri, ""
	}
	return strings.ToValidUTF8(uri, "\uFFFD"), base64.StdEncoding.EncodeToString([]byte(uri))
}

// location is the document's location object (the resource's location
// in the Elasticsearch state model).
type location struct {
	Value string `json:"value"`
	Type  string `json:"type"`
}

// resourceDoc is a resource document without its body.
type resourceDoc struct {
	DocID       string   `json:"doc_id"`
	URI         string   `json:"uri"`
	URIB64      string   `json:"uri_b64,omitempty"`
	ResourceSet string   `json:"resource_set,omitempty"`
	Location    location `json:"location"`
	Length      int64    `json:"length"`
	MD5         string   `json:"md5,omitempty"`
	SHA1        string   `json:"sha1,omitempty"`
	SHA256      string   `json:"sha256,omitempty"`
	Mime        string   `json:"mime,omitempty"`
	Lastmod     string   `json:"lastmod,omitempty"`
	Timestamp   string   `json:"timestamp"`
	Rev         string   `json:"rev"`
	Text        *string  `json:"text,omitempty"`
	// Ln are the resource's links (the state model's "ln").
	Ln []link `json:"ln,omitempty"`
	// Sets and About are what a protocol says of the record (see
	// sink.Resource).
	Sets  []string `json:"sets,omitempty"`
	About []string `json:"about,omitempty"`
}

// link is one of a resource's links, as seed 001's "ln" field has them.
type link struct {
	Rel  string   `json:"rel"`
	Href location `json:"href"`
	Mime string   `json:"mime,omitempty"`
}

// changeDoc is a change document.
type changeDoc struct {
	URI         string   `json:"uri"`
	URIB64      string   `json:"uri_b64,omitempty"`
	ResourceSet string   `json:"resource_set,omitempty"`
	Location    location `json:"location"`
	Change      string   `json:"change"`
	Datetime    string   `json:"datetime"`
	Lastmod     string   `json:"lastmod,omitempty"`
	Timestamp   string   `json:"timestamp"`
	Rev         string   `json:"rev"`
}

// body is what Put learnt from reading a body.
type body struct {
	n      int64
	md5    []byte // computed when not published
	sha256 []byte // computed when not published
	text   []byte // nil unless kept for full text
	b64    []byte // nil unless Options.StoreBody
}

var errTooLarge = errors.New("body larger than the sink's MaxBody")

// readBody reads r's body to io.EOF, hashing what was not published,
// keeping text for full-text indexing and, with StoreBody, the base64 body.
func (s *ES) readBody(ctx context.Context, r *sink.Resource, src io.Reader) (*body, error) {
	var (
		b       body
		writers []io.Writer
		md5h    hash.Hash
		sha256h hash.Hash
		stored  bytes.Buffer
		enc     io.WriteCloser
		text    *capWriter
	)
	if r.Hashes.MD5 == nil {
		md5h = md5.New()
		writers = append(writers, md5h)
	}
	if r.Hashes.SHA256 == nil {
		sha256h = sha256.New()
		writers = append(writers, sha256h)
	}
	if s.opts.StoreBody {
		if r.Length > 0 && r.Length <= s.opts.MaxBody {
			stored.Grow(base64.StdEncoding.EncodedLen(int(r.Length)))
		}
		enc = base64.NewEncoder(base64.StdEncoding, &stored)
		writers = append(writers, &limitWriter{w: enc, left: s.opts.MaxBody})
	}
	if s.opts.TextMax > 0 && sink.IsText(r.Type) {
		text = &capWriter{max: s.opts.TextMax}
		writers = append(writers, text)
	}
	cr := &sink.ContextReader{Ctx: ctx, R: src}
	n, err := io.Copy(io.MultiWriter(append(writers, io.Discard)...), cr)
	if berr := cr.BodyError(err, "es: put "+short(r.URI)); berr != nil {
		return nil, berr
	}
	switch {
	case errors.Is(err, errTooLarge):
		return nil, errclass.Permanentf("es: put %s: %w (%d bytes)", short(r.URI), err, s.opts.MaxBody)
	case err != nil:
		return nil, errclass.Retryablef("es: put %s: %w", short(r.URI), err)
	}
	b.n = n
	if md5h != nil {
		b.md5 = md5h.Sum(nil)
	}
	if sha256h != nil {
		b.sha256 = sha256h.Sum(nil)
	}
	if enc != nil {
		_ = enc.Close() // writes to a bytes.Buffer do not fail
		b.b64 = stored.Bytes()
	}
	if text != nil && !text.over && utf8.Valid(text.buf) {
		b.text = text.buf
	}
	return &b, nil
}

// resourceAction builds the index action of r's resource document.
func (s *ES) resourceAction(r *sink.Resource, b *body, rev string, now time.Time) (*action, error) {
	id := docID(r.URI)
	text, b64 := uriFields(r.URI)
	set := s.opts.ResourceSet
	if set == "" {
		set = r.ResourceSet
	}
	doc := resourceDoc{
		DocID:       id,
		URI:         text,
		URIB64:      b64,
		ResourceSet: set,
		Location:    location{Value: text, Type: "url"},
		Length:      b.n,
		MD5:         hexOr(r.Hashes.MD5, b.md5),
		SHA1:        hexOr(r.Hashes.SHA1, nil),
		SHA256:      hexOr(r.Hashes.SHA256, b.sha256),
		Mime:        r.Type,
		Lastmod:     formatTime(r.Lastmod),
		Timestamp:   formatTime(now),
		Rev:         rev,
		Sets:        validUTF8(r.Sets),
		About:       validUTF8(r.About),
	}
	if b.text != nil {
		t := string(b.text)
		doc.Text = &t
	}
	for _, l := range r.Links {
		doc.Ln = append(doc.Ln, link{Rel: l.Rel, Href: location{Value: l.Href, Type: "url"}, Mime: l.Type})
	}
	src, err := json.Marshal(doc)
	if err != nil {
		return nil, errclass.Permanentf("es: put %s: encoding the document: %w", short(r.URI), err)
	}
	if b.text != nil {
		// An OAI-PMH oai_dc record: its Dublin Core elements as fields.
		if dc := sink.DublinCore(r.Type, b.text); len(dc) > 0 {
			src = append(sink.AppendDCFields(src[:len(src)-1], dc), '}')
		}
	}
	if b.b64 != nil || s.opts.StoreBody {
		// Splice the body in without copying it through the JSON encoder:
		// base64 needs no JSON escaping.
		src = src[:len(src)-1]
		src = append(src, `,"body":"`...)
		src = append(src, b.b64...)
		src = append(src, `"}`...)
	}
	return newAction("index", s.opts.Index, id, r.URI, "put", src, rev), nil
}

// changeAction builds the index action of a change document.
func (s *ES) changeAction(uri, change string, lastmod time.Time, rev string, now time.Time) (*action, error) {
	text, b64 := uriFields(uri)
	doc := &changeDoc{
		URI:         text,
		URIB64:      b64,
		ResourceSet: s.opts.ResourceSet,
		Location:    location{Value: text, Type: "url"},
		Change:      change,
		Datetime:    formatTime(now),
		Lastmod:     formatTime(lastmod),
		Timestamp:   formatTime(now),
		Rev:         rev,
	}
	src, err := json.Marshal(doc)
	if err != nil {
		return nil, errclass.Permanentf("es: %s %s: encoding the change document: %w", change, short(uri), err)
	}
	a := newAction("index", s.opts.ChangesIndex, rev, uri, "change", src, "")
	a.change = doc
	return a, nil
}

// deleteAction builds the delete action of uri's resource document.
func deleteAction(index, uri string) *action {
	return newAction("delete", index, docID(uri), uri, "delete", nil, "")
}

func hexOr(published, computed []byte) string {
	switch {
	case published != nil:
		return hex.EncodeToString(published)
	case computed != nil:
		return hex.EncodeToString(computed)
	default:
		return ""
	}
}

// timeLayout is RFC 3339 with at most millisecond precision, which both
// Elasticsearch's default date format and ZincSearch parse.
const timeLayout = "2006-01-02T15:04:05.999Z07:00"

// formatTime renders t in RFC 3339 (UTC), or "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// limitWriter passes at most left bytes on to w, then fails.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, errTooLarge
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

// capWriter keeps up to max bytes and notes whether there were more.
type capWriter struct {
	max  int64
	buf  []byte
	over bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.over {
		return len(p), nil
	}
	if int64(len(c.buf)+len(p)) > c.max {
		c.over, c.buf = true, nil
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// validUTF8 returns ss with invalid UTF-8 replaced by U+FFFD (JSON holds
// only text), or nil when it is empty.
func validUTF8(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToValidUTF8(s, "\uFFFD")
	}
	return out
}
