package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
)

// TestRootCheck: a document is what its type says — its root's namespace,
// its DOCTYPE's public identifier, or the media type it is served as — and
// well-formed XML; otherwise a permanent ErrInvalid naming the line.
func TestRootCheck(t *testing.T) {
	const ns = "https://eml.ecoinformatics.org/eml-2.2.0"
	tests := []struct {
		name, doc, docType, contentType, bad string
	}{
		{"namespace", `<e:eml xmlns:e="` + ns + `"><x/></e:eml>`, ns, "", ""},
		{"default namespace", `<eml xmlns="` + ns + `"/>`, ns, "", ""},
		{"another namespace", `<e:eml xmlns:e="urn:other"/>`, ns, "", "is not in the namespace"},
		{"no namespace", `<eml/>`, ns, "", "is not in the namespace"},
		{"not well-formed", `<e:eml xmlns:e="` + ns + `"><x></e:eml>`, ns, "", "not well-formed"},
		{"not XML", `docid,revision`, ns, "", "no root element"},
		{"public identifier", `<!DOCTYPE eml PUBLIC "-//ecoinformatics.org//eml-dataset-2.0.0beta6//EN" "eml.dtd"><eml/>`, "-//ecoinformatics.org//eml-dataset-2.0.0beta6//EN", "", ""},
		{"another public identifier", `<!DOCTYPE eml PUBLIC "-//other//EN" "x.dtd"><eml/>`, "-//ecoinformatics.org//eml-dataset-2.0.0beta6//EN", "", "public identifier"},
		{"MIME type", `<anything/>`, "text/xml", "text/xml; charset=utf-8", ""},
		{"MIME type, not XML", `a,b`, "text/csv", "text/csv", ""},
		{"served as another type", `<anything/>`, "text/xml", "text/html", "served as"},
		{"MIME type, not well-formed", `<a>`, "application/xml", "application/xml", "not well-formed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rootCheck(strings.NewReader(tt.doc), tt.docType, tt.contentType)
			if tt.bad == "" {
				if err != nil {
					t.Fatalf("rootCheck: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !errclass.IsPermanent(err) || !strings.Contains(err.Error(), tt.bad) || !strings.Contains(err.Error(), "line") {
				t.Fatalf("rootCheck = %v, want a permanent ErrInvalid saying %q and its line", err, tt.bad)
			}
		})
	}
}
