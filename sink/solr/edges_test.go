package solr

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	iofs "io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/solr/solrtest"
)

// TestURLErrorsHideThePassword opens sinks whose core URL carries a
// password but does not parse (a password with an unescaped "%", a typo in
// the port). The error does not carry the password: user information is
// redacted from errors, and sink.Registry.Open's own redaction cannot help
// once the URL does not parse.
func TestURLErrorsHideThePassword(t *testing.T) {
	const secret = "S3cretPw"
	specs := []struct{ name, url string }{
		{"password with an unescaped %", "http://solr:" + secret + "%zz@127.0.0.1:8983/solr/core"},
		{"bad port", "http://solr:" + secret + "@127.0.0.1:89a/solr/core"},
		{"control character", "http://solr:" + secret + "@127.0.0.1:8983/solr/core\x7f"},
	}
	ctx := context.Background()
	for _, tt := range specs {
		t.Run(tt.name, func(t *testing.T) {
			openers := map[string]func() error{
				"New": func() error {
					_, err := New(ctx, Options{URL: tt.url})
					return err
				},
				"Open": func() error {
					_, err := Open(ctx, tt.url)
					return err
				},
				"Registry.Open": func() error {
					_, err := sink.Registry{"solr": Open}.Open(ctx, "solr:"+tt.url)
					return err
				},
			}
			for name, open := range openers {
				err := open()
				if err == nil {
					t.Errorf("%s succeeded", name)
					continue
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("%s: the error carries the password: %v", name, err)
				}
			}
		})
	}
}

// TestLongFieldValuesAreIndexed puts resources whose URI is short but
// one of whose other string fields is longer than Lucene's term limit: an
// OAI-PMH about container (a rights statement with a licence's full text),
// and a link. Every other sink keeps such a resource, and so does Solr's:
// the value too long is left out, as a location too long is, rather than
// the resource rejected for good.
func TestLongFieldValuesAreIndexed(t *testing.T) {
	long := strings.Repeat("x", luceneMaxTerm+1)
	tests := []struct {
		name string
		r    sink.Resource
	}{
		{"about container over 32766 bytes", sink.Resource{URI: "oai:example.org:1", Type: "application/xml",
			About: []string{"<rights xmlns=\"http://www.openarchives.org/OAI/2.0/rights/\"><rightsDefinition>" + long + "</rightsDefinition></rights>"}}},
		{"link over 32766 bytes", sink.Resource{URI: "http://example.com/r/1",
			Links: []sink.Link{{Rel: "describedby", Href: "http://example.com/meta?q=" + long}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := solrtest.New(t, solrtest.Options{})
			s := newSink(t, srv, Options{})
			put(t, s, &tt.r, "<x/>")
			failed := s.Flush(context.Background())
			for _, f := range failed {
				t.Errorf("Flush: %s failed: %v", f.URI, f.Err)
			}
			mustClose(t, s)
			if _, ok := srv.Visible(tt.r.URI); !ok {
				t.Errorf("%s is not indexed", tt.r.URI)
			}
		})
	}
}

// luceneMaxTerm is Lucene's term limit, as the fake enforces it.
const luceneMaxTerm = solrtest.MaxTermBytes

// TestWalkReportsOnlyHeldURIs indexes, besides the sink's own
// documents, documents whose ids start with the sink's encoded prefix but
// that docID never produces: the canonical encoding of a URI that is its
// own id, and a non-canonical base64 of another (different padding bits).
// "Ids that this sink cannot have written are logged and skipped": Walk
// reports only URIs Get says the sink holds.
func TestWalkReportsOnlyHeldURIs(t *testing.T) {
	srv := solrtest.New(t, solrtest.Options{})
	s := newSink(t, srv, Options{StoreBody: true})
	defer mustClose(t, s)
	ctx := context.Background()
	put(t, s, &sink.Resource{URI: "http://example.com/mine"}, "mine")
	if f := s.Flush(ctx); len(f) > 0 {
		t.Fatalf("Flush: %v", f)
	}

	canonical := encodedPrefix + base64.RawURLEncoding.EncodeToString([]byte("http://example.com/x"))
	// "hi" is "aGk" in base64; "aGl" differs only in the padding bits.
	nonCanonical := encodedPrefix + "aGl"
	body := fmt.Sprintf(`[{"id":%q,"length":0},{"id":%q,"length":0}]`, canonical, nonCanonical)
	req, err := http.NewRequest(http.MethodPost, srv.URL()+"/update?commit=true&wt=json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("adding the foreign documents: HTTP %d", resp.StatusCode)
	}

	var walked []string
	if err := s.Walk(ctx, func(uri string) error {
		walked = append(walked, uri)
		return nil
	}); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	for _, uri := range walked {
		rc, err := s.Get(ctx, uri)
		if errors.Is(err, iofs.ErrNotExist) {
			t.Errorf("Walk reports %q, which Get says the sink does not hold", uri)
			continue
		}
		if err != nil {
			t.Errorf("Get(%q): %v", uri, err)
			continue
		}
		rc.Close()
	}
}
