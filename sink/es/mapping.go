package es

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/rsharvest/rsharvest/errclass"
)

// The mappings of the two indexes. Long URIs are kept out of the keyword
// index (Elasticsearch refuses terms over 32766 bytes) by ignore_above; they
// stay in _source. "body", "uri_b64" and "about" are stored, not indexed. The dc_*
// fields hold an oai_dc record's Dublin Core elements (sink.DCElements). ZincSearch
// ignores the parameters it does not know (ignore_above, doc_values).
const (
	resourceMapping = `{"properties":{
		"doc_id":{"type":"keyword"},
		"uri":{"type":"keyword","ignore_above":8191},
		"uri_b64":{"type":"keyword","index":false,"doc_values":false},
		"resource_set":{"type":"keyword"},
		"location":{"properties":{"value":{"type":"keyword","ignore_above":8191},"type":{"type":"keyword"}}},
		"length":{"type":"long"},
		"md5":{"type":"keyword"},
		"sha1":{"type":"keyword"},
		"sha256":{"type":"keyword"},
		"mime":{"type":"keyword"},
		"lastmod":{"type":"date"},
		"timestamp":{"type":"date"},
		"rev":{"type":"keyword"},
		"text":{"type":"text"},
		"sets":{"type":"keyword"},
		"about":{"type":"keyword","index":false,"doc_values":false},
		"dc_title":{"type":"text"},"dc_creator":{"type":"text"},"dc_subject":{"type":"text"},"dc_description":{"type":"text"},
		"dc_publisher":{"type":"text"},"dc_contributor":{"type":"text"},"dc_date":{"type":"text"},"dc_type":{"type":"text"},
		"dc_format":{"type":"text"},"dc_identifier":{"type":"text"},"dc_source":{"type":"text"},"dc_language":{"type":"text"},
		"dc_relation":{"type":"text"},"dc_coverage":{"type":"text"},"dc_rights":{"type":"text"},
		"body":{"type":"keyword","index":false,"doc_values":false}}}`
	changeMapping = `{"properties":{
		"uri":{"type":"keyword","ignore_above":8191},
		"uri_b64":{"type":"keyword","index":false,"doc_values":false},
		"resource_set":{"type":"keyword"},
		"location":{"properties":{"value":{"type":"keyword","ignore_above":8191},"type":{"type":"keyword"}}},
		"change":{"type":"keyword"},
		"datetime":{"type":"date"},
		"lastmod":{"type":"date"},
		"timestamp":{"type":"date"},
		"rev":{"type":"keyword"}}}`
)

// detect asks the server's root document what it is. Failing to reach the
// server, or a server that is not Elasticsearch-like, is fatal.
func (s *ES) detect(ctx context.Context) (Flavor, error) {
	resp, err := s.do(ctx, http.MethodGet, "/", nil, "", nil)
	if err != nil {
		return FlavorAuto, errclass.Fatalf("es sink: server unreachable: %w", err)
	}
	if resp.status != http.StatusOK {
		return FlavorAuto, errclass.NewFatal(s.statusError("GET /", resp))
	}
	flavor, version, err := rootFlavor("es sink", s.base, resp.body)
	if err != nil {
		return FlavorAuto, err
	}
	s.log.Debug("server", "flavor", flavor, "version", version)
	return flavor, nil
}

// rootFlavor reads the server's root document (GET /): its flavour and
// version. A body that is not one is fatal; what names the caller.
func rootFlavor(what, base string, body []byte) (Flavor, string, error) {
	var info struct {
		Name    string `json:"name"`
		Version struct {
			Number string `json:"number"`
		} `json:"version"`
	}
	if err := json.Unmarshal(body, &info); err != nil || info.Version.Number == "" {
		return FlavorAuto, "", errclass.Fatalf("%s %s: not an Elasticsearch-compatible server (GET / answered %s)", what, base, clip(string(body)))
	}
	if info.Name == "zinc" {
		return FlavorZinc, info.Version.Number, nil
	}
	return FlavorElasticsearch, info.Version.Number, nil
}

// ensureIndex creates index with mapping unless it exists. Any failure,
// refused credentials included, is fatal.
func (s *ES) ensureIndex(ctx context.Context, index, mapping string) error {
	path := "/" + escapeSegment(index)
	resp, err := s.do(ctx, http.MethodHead, path, nil, "", nil)
	if err != nil {
		return errclass.Fatalf("es sink: server unreachable: %w", err)
	}
	switch resp.status {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
	default:
		return errclass.NewFatal(s.statusError("HEAD /"+index, resp))
	}
	body := []byte(`{"mappings":` + mapping + `}`)
	resp, err = s.do(ctx, http.MethodPut, path, nil, "application/json", body)
	if err != nil {
		return errclass.Fatalf("es sink: server unreachable: %w", err)
	}
	if resp.status == http.StatusOK {
		s.log.Info("created index", "index", index)
		return nil
	}
	// Another process may have created it in between.
	if again, err := s.do(ctx, http.MethodHead, path, nil, "", nil); err == nil && again.status == http.StatusOK {
		return nil
	}
	return errclass.NewFatal(s.statusError("creating index "+index, resp))
}
