package solr

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

const (
	copyBufferSize = 64 << 10
	// maxTermBytes is Lucene's limit on one indexed term: an id or
	// location longer than this would be rejected by Solr.
	maxTermBytes = 32766
	// encodedPrefix starts the id of a URI that cannot be its own id.
	encodedPrefix = "rsharvest:b64:"
	lastmodLayout = "2006-01-02T15:04:05Z"
)

// document is the JSON form of a resource's Solr document.
type document struct {
	ID       string `json:"id"`
	Location string `json:"location,omitempty"`
	Length   int64  `json:"length"`
	MD5      string `json:"md5,omitempty"`
	SHA1     string `json:"sha1,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Mime     string `json:"mime,omitempty"`
	Lastmod  string `json:"lastmod,omitempty"`
	// Links are the resource's links as "rel href".
	Links       []string `json:"links,omitempty"`
	ResourceSet string   `json:"resource_set,omitempty"`
	// Sets and About are what a protocol says of the record (see
	// sink.Resource).
	Sets  []string `json:"sets,omitempty"`
	About []string `json:"about,omitempty"`
	Text  string   `json:"text,omitempty"`
	Body  []byte   `json:"body,omitempty"` // base64, by encoding/json
}

// op is one queued operation: an add (with its document as JSON) or a
// delete.
type op struct {
	del bool
	id  string
	uri string
	doc []byte
}

// size is what an operation adds to a request body, roughly.
func (o op) size() int { return len(o.doc) + len(o.id) + 8 }

// docID returns the Solr id of a URI: the URI itself, or, for one that
// Solr cannot hold exactly or that could be mistaken for an encoded one,
// encodedPrefix and its bytes in base64url.
func docID(uri string) string {
	if uri == "" || !utf8.ValidString(uri) || strings.IndexByte(uri, 0) >= 0 || strings.HasPrefix(uri, encodedPrefix) {
		return encodedPrefix + base64.RawURLEncoding.EncodeToString([]byte(uri))
	}
	return uri
}

// uriOf inverts docID: an id docID does not give for the URI it decodes
// to (a foreign document's, a base64 not in canonical form) was not
// written by this sink.
func uriOf(id string) (string, error) {
	uri := id
	if rest, ok := strings.CutPrefix(id, encodedPrefix); ok {
		b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
		if err != nil {
			return "", fmt.Errorf("id %s: not written by this sink: %w", short(id), err)
		}
		uri = string(b)
	}
	if docID(uri) != id {
		return "", fmt.Errorf("id %s: not written by this sink: not the id of the URI it names", short(id))
	}
	return uri, nil
}

// readDocument reads body to io.EOF and returns the operation adding r.
func (s *Solr) readDocument(ctx context.Context, r *sink.Resource, body io.Reader) (op, error) {
	id := docID(r.URI)
	if len(id) > maxTermBytes {
		return op{}, errclass.Permanentf("solr: put %s: the URI's id is %d bytes, more than Solr's limit of %d", short(r.URI), len(id), maxTermBytes)
	}
	c := &collector{storeBody: s.opts.StoreBody, bodyMax: s.opts.BodyMaxBytes}
	if r.Hashes.MD5 == nil {
		c.md5 = md5.New()
	}
	if r.Hashes.SHA256 == nil {
		c.sha256 = sha256.New()
	}
	if s.opts.TextMaxBytes > 0 && sink.IsText(r.Type) {
		c.textCap = s.opts.TextMaxBytes + utf8.UTFMax
		c.utf8 = &utf8Checker{}
	}
	if c.storeBody && r.Length > 0 {
		c.body = make([]byte, 0, min(r.Length, c.bodyMax))
	}

	src := &sink.ContextReader{Ctx: ctx, R: body}
	bufp := s.bufs.Get().(*[]byte)
	_, err := io.CopyBuffer(c, src, *bufp)
	s.bufs.Put(bufp)
	if berr := src.BodyError(err, "solr: put "+short(r.URI)); berr != nil {
		return op{}, berr
	}
	switch {
	case errors.Is(err, errBodyTooLarge):
		return op{}, errclass.Permanentf("solr: put %s: %w (%d bytes)", short(r.URI), err, s.opts.BodyMaxBytes)
	case err != nil:
		return op{}, fmt.Errorf("solr: put %s: %w", short(r.URI), err)
	}
	if err := ctx.Err(); err != nil {
		return op{}, errclass.Retryablef("solr: put %s: %w", short(r.URI), err)
	}

	// A string field's value is one term, which Solr refuses past
	// maxTermBytes ("immense term"), the whole document with it: such a
	// value is left out, with a warning, and the resource stored.
	term := func(field, v string) string {
		v = strings.ToValidUTF8(v, "\uFFFD")
		if len(v) > maxTermBytes {
			s.log.Warn("a field value too long for Solr, left out", "uri", short(r.URI), "field", field, "bytes", len(v), "limit", maxTermBytes)
			return ""
		}
		return v
	}
	d := document{
		ID:     id,
		Length: c.n,
		MD5:    hexOr(r.Hashes.MD5, c.md5),
		SHA1:   hexOr(r.Hashes.SHA1, nil),
		SHA256: hexOr(r.Hashes.SHA256, c.sha256),
		Mime:   term("mime", r.Type),
		Text:   c.textValue(s.opts.TextMaxBytes),
		Body:   c.body,
		// The resource set and links of the Elasticsearch state model's resource.
		ResourceSet: term("resource_set", r.ResourceSet),
	}
	if loc := strings.ToValidUTF8(r.URI, "\uFFFD"); len(loc) <= maxTermBytes {
		d.Location = loc // longer, only an encoded id names it (quietly)
	}
	for _, l := range r.Links {
		if v := term("links", l.Rel+" "+l.Href); v != "" {
			d.Links = append(d.Links, v)
		}
	}
	for _, v := range r.Sets {
		if v := term("sets", v); v != "" {
			d.Sets = append(d.Sets, v)
		}
	}
	for _, v := range r.About {
		if v := term("about", v); v != "" {
			d.About = append(d.About, v)
		}
	}
	if lm := r.Lastmod.UTC(); !r.Lastmod.IsZero() && lm.Year() >= 1 && lm.Year() <= 9999 {
		d.Lastmod = lm.Format(lastmodLayout)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return op{}, errclass.Permanentf("solr: put %s: encoding the document: %w", short(r.URI), err)
	}
	doc := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if d.Text != "" {
		// An OAI-PMH oai_dc record: its Dublin Core elements as fields.
		if dc := sink.DublinCore(r.Type, []byte(d.Text)); len(dc) > 0 {
			doc = append(sink.AppendDCFields(doc[:len(doc)-1], dc), '}')
		}
	}
	return op{id: id, uri: r.URI, doc: doc}, nil
}

// hexOr returns the published digest in hex, else the computed one, else "".
func hexOr(published []byte, computed hash.Hash) string {
	switch {
	case published != nil:
		return hex.EncodeToString(published)
	case computed != nil:
		return hex.EncodeToString(computed.Sum(nil))
	}
	return ""
}

var errBodyTooLarge = errors.New("body larger than the limit of the stored body")

// collector takes a body as it is read: it counts it, hashes it, keeps the
// head of a text body and checks it is UTF-8, and keeps the whole body when
// it is to be stored.
type collector struct {
	n         int64
	md5       hash.Hash
	sha256    hash.Hash
	textCap   int // bytes of text kept: the cap and room for a whole character
	text      []byte
	utf8      *utf8Checker // nil unless the body's type is a text type
	storeBody bool
	bodyMax   int64
	body      []byte
}

func (c *collector) Write(p []byte) (int, error) {
	if c.storeBody && c.n+int64(len(p)) > c.bodyMax {
		return 0, errBodyTooLarge
	}
	c.n += int64(len(p))
	if c.md5 != nil {
		c.md5.Write(p)
	}
	if c.sha256 != nil {
		c.sha256.Write(p)
	}
	if c.utf8 != nil && !c.utf8.bad {
		c.utf8.write(p)
		if room := c.textCap - len(c.text); room > 0 {
			c.text = append(c.text, p[:min(room, len(p))]...)
		}
	}
	if c.storeBody {
		c.body = append(c.body, p...)
	}
	return len(p), nil
}

// textValue returns the text field: at most limit bytes of a valid UTF-8
// text body, cut before a character that would not fit, without a byte
// order mark; "" for any other body.
func (c *collector) textValue(limit int) string {
	if c.utf8 == nil || !c.utf8.valid() {
		return ""
	}
	b := c.text
	if len(b) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		b = b[:cut]
	}
	return strings.TrimPrefix(string(b), "\uFEFF")
}

// utf8Checker validates UTF-8 written in pieces that may split characters.
type utf8Checker struct {
	carry []byte // the start of a character split by the last write
	bad   bool
}

func (u *utf8Checker) write(p []byte) {
	for len(u.carry) > 0 && len(p) > 0 {
		u.carry = append(u.carry, p[0])
		p = p[1:]
		if utf8.FullRune(u.carry) {
			if r, size := utf8.DecodeRune(u.carry); r == utf8.RuneError && size <= 1 || size != len(u.carry) {
				u.bad = true
				return
			}
			u.carry = u.carry[:0]
		}
	}
	// Hold back an incomplete character at the end.
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				u.carry = append(u.carry, p[i:]...)
				p = p[:i]
			}
			break
		}
	}
	if !utf8.Valid(p) {
		u.bad = true
	}
}

// valid reports whether everything written was valid UTF-8.
func (u *utf8Checker) valid() bool { return !u.bad && len(u.carry) == 0 }
