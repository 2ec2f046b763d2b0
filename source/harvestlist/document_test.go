package harvestlist

import (
	"encoding/xml"
	"strings"
	"testing"
)

// FuzzReadDocument: readDocument reads a document element as
// encoding/xml's DecodeElement reads it into rawDocument — the same
// fields, or an error for both.
func FuzzReadDocument(f *testing.F) {
	for _, s := range []string{
		`<document><docid><scope>knb</scope><identifier>1</identifier><revision>2</revision></docid><documentType>t</documentType><documentURL>http://h/1</documentURL></document>`,
		`<document><docid><scope>a<b>x</b>c</scope></docid><docid><revision>3</revision></docid><other><scope>no</scope></other></document>`,
		`<document><documentURL><![CDATA[http://h/]]>2</documentURL><documentURL>http://h/3</documentURL><!-- c --><?pi x?></document>`,
		`<document xmlns:x="urn:x"><x:docid><x:scope> s </x:scope></x:docid><scope>top</scope></document>`,
		`<document><docid><scope>unclosed</docid></document>`,
		`<document><docid>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		start := func(dec *xml.Decoder) (*xml.StartElement, bool) {
			for {
				tok, err := dec.Token()
				if err != nil {
					return nil, false
				}
				if se, ok := tok.(xml.StartElement); ok {
					return &se, true
				}
			}
		}
		want := rawDocument{}
		dec := xml.NewDecoder(strings.NewReader(doc))
		dec.Strict = true
		se, ok := start(dec)
		if !ok {
			return
		}
		wantErr := dec.DecodeElement(&want, se)
		dec = xml.NewDecoder(strings.NewReader(doc))
		dec.Strict = true
		start(dec)
		got, gotErr := readDocument(dec)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("readDocument: %+v, %v; DecodeElement: %+v, %v", got, gotErr, want, wantErr)
		}
		if gotErr == nil && got != want {
			t.Errorf("readDocument: %+v; DecodeElement: %+v", got, want)
		}
	})
}
