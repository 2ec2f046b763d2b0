package manifest

import (
	"bytes"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
)

func TestWriterRefusesWhatReadersReject(t *testing.T) {
	hdr := Header{Root: URLSet, Metadata: Metadata{Capability: ResourceList, Length: -1}}
	bad := []struct {
		name string
		e    Entry
	}{
		{"no loc", Entry{Metadata: NewMetadata()}},
		{"blank loc", Entry{Loc: " \n", Metadata: NewMetadata()}},
		{"link without rel", Entry{Loc: "http://x/", Metadata: NewMetadata(), Links: []Link{NewLink("", "http://y/")}}},
		{"link without href", Entry{Loc: "http://x/", Metadata: NewMetadata(), Links: []Link{NewLink("up", "")}}},
		{"pri too large", Entry{Loc: "http://x/", Metadata: NewMetadata(), Links: []Link{{Rel: "up", Href: "h", Length: -1, Pri: DefaultPri + 1}}}},
		{"negative pri", Entry{Loc: "http://x/", Metadata: NewMetadata(), Links: []Link{{Rel: "up", Href: "h", Length: -1, Pri: -1}}}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, hdr)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(&tt.e); err == nil || !errclass.IsPermanent(err) {
				t.Fatalf("Write = %v, want a permanent error", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			res := readAll(t, &buf, Options{})
			mustOK(t, res)
			if len(res.entries) != 0 {
				t.Fatalf("refused entry was written: %+v", res.entries)
			}
		})
	}
	for _, h := range []Header{
		{Metadata: Metadata{Capability: ResourceList}},
		{Root: URLSet},
		{Root: URLSet, Metadata: Metadata{Capability: ResourceList}, Links: []Link{NewLink("up", "")}},
	} {
		if _, err := NewWriter(&bytes.Buffer{}, h); err == nil || !errclass.IsPermanent(err) {
			t.Errorf("NewWriter(%+v) = %v, want a permanent error", h, err)
		}
	}
}
