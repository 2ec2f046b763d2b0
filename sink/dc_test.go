package sink

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDublinCore(t *testing.T) {
	rec := `<?xml version="1.0" encoding="UTF-8"?>
<oai_dc:dc xmlns:oai_dc="` + OAIDCNamespace + `" xmlns:dc="` + DCNamespace + `">
  <dc:title> A <![CDATA[title]]> </dc:title><dc:creator>Ada</dc:creator><dc:creator>Bob &amp; Co</dc:creator>
  <dc:date>2024-01-02</dc:date><dc:identifier/><dc:nonsense>x</dc:nonsense><other>y</other>
</oai_dc:dc>`
	tests := []struct {
		name string
		doc  string
		want map[string][]string
	}{
		{"oai_dc record", rec, map[string][]string{"title": {"A title"}, "creator": {"Ada", "Bob & Co"}, "date": {"2024-01-02"}}},
		{"another format", `<record xmlns="http://www.loc.gov/MARC21/slim"><x>` + OAIDCNamespace + `</x></record>`, nil},
		{"not well-formed", rec[:len(rec)-5], nil},
		{"not XML", "plain text", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DublinCore("application/xml", []byte(tc.doc)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DublinCore = %v, want %v", got, tc.want)
			}
		})
	}
	if got := DublinCore("text/plain", []byte(rec)); got != nil {
		t.Errorf("a text/plain body was read as a record: %v", got)
	}
	obj := AppendDCFields([]byte(`{"id":"x"`), DublinCore("application/xml", []byte(rec)))
	obj = append(obj, '}')
	var got map[string]any
	if err := json.Unmarshal(obj, &got); err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	if want := `{"id":"x","dc_title":["A title"],"dc_creator":["Ada","Bob \u0026 Co"],"dc_date":["2024-01-02"]}`; string(obj) != want {
		t.Errorf("AppendDCFields: %s, want %s", obj, want)
	}
}

// FuzzDublinCore: whatever the document, DublinCore ends, and the fields
// it finds make a valid JSON object.
func FuzzDublinCore(f *testing.F) {
	f.Add(`<oai_dc:dc xmlns:oai_dc="` + OAIDCNamespace + `" xmlns:dc="` + DCNamespace + `"><dc:title>t</dc:title></oai_dc:dc>`)
	f.Add(`<x/>`)
	f.Fuzz(func(t *testing.T, doc string) {
		obj := append(AppendDCFields([]byte(`{"id":"x"`), DublinCore("application/xml", []byte(doc))), '}')
		if !json.Valid(obj) {
			t.Fatalf("invalid JSON %s", obj)
		}
	})
}
