package oaipmh

import (
	"slices"
	"strings"
	"testing"
)

// TestPageScan: the tolerant scan finds the identifiers of a page's
// record headers (not those inside metadata or about), its token, and
// whether the response ended, however broken the XML around them.
func TestPageScan(t *testing.T) {
	broken := envelope("ListRecords", dcRecord("oai:x:1", "a")+
		`<record><header status="deleted"><identifier>oai:x:2</identifier></header></record>`+
		`<record><header><identifier> oai:x:3&amp;y </identifier></header><metadata><oai_dc:dc><dc:identifier>not:me</dc:identifier><dc:title>broken</dc:titel></oai_dc:dc></metadata>`+
		`<about><provenance><identifier>nor:me</identifier></provenance></about></record>`+
		`<oai:resumptionToken xmlns:oai="`+Namespace+`" cursor="0">tok+a/b c</oai:resumptionToken>`)
	tests := []struct {
		name, page string
		ids        []string
		token      string
		complete   bool
	}{
		{"broken", broken, []string{"oai:x:1", "oai:x:2", "oai:x:3&y"}, "tok+a/b c", true},
		{"cut short", broken[:strings.Index(broken, "<about>")], []string{"oai:x:1", "oai:x:2", "oai:x:3&y"}, "", false},
		{"no token", envelope("ListRecords", dcRecord("oai:x:9", "\x00")), []string{"oai:x:9"}, "", true},
		{"empty token", envelope("ListRecords", dcRecord("oai:x:9", "x")+`<resumptionToken/>`), []string{"oai:x:9"}, "", true},
		{"nothing", "garbage < > <<", nil, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s pageScan
			if err := s.scan(strings.NewReader(tc.page)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.ids, tc.ids) || s.token != tc.token || s.complete != tc.complete {
				t.Errorf("scan = %q, token %q, complete %v; want %q, %q, %v", s.ids, s.token, s.complete, tc.ids, tc.token, tc.complete)
			}
		})
	}
}

// FuzzPageScan: the tolerant scan of any bytes ends, without error from
// an in-memory reader, finding no more identifiers than the page has
// bytes.
func FuzzPageScan(f *testing.F) {
	f.Add(envelope("ListRecords", dcRecord("oai:x:1", "a")+`<resumptionToken>t</resumptionToken>`))
	f.Add(`<header><identifier>` + strings.Repeat("x", 70000) + `</identifier></header>`)
	f.Add(`<header><identifier>a<`)
	for _, p := range forbiddenPages() {
		f.Add(p.page)
	}
	f.Fuzz(func(t *testing.T, page string) {
		var s pageScan
		if err := s.scan(strings.NewReader(page)); err != nil {
			t.Fatal(err)
		}
		if len(s.ids) > len(page) {
			t.Fatalf("%d identifiers from %d bytes", len(s.ids), len(page))
		}
	})
}
