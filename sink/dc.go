package sink

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"slices"
	"strings"
)

// The namespaces of an oai_dc record (OAI-PMH's unqualified Dublin Core).
const (
	OAIDCNamespace = "http://www.openarchives.org/OAI/2.0/oai_dc/"
	DCNamespace    = "http://purl.org/dc/elements/1.1/"
)

// DCElements are the fifteen elements of simple Dublin Core, in the order
// search sinks write their fields (dc_title, dc_creator, …).
var DCElements = [...]string{"title", "creator", "subject", "description", "publisher", "contributor", "date",
	"type", "format", "identifier", "source", "language", "relation", "coverage", "rights"}

// DublinCore returns the Dublin Core elements of an oai_dc record — an
// XML document (mediaType names XML) whose root is oai_dc:dc, as an
// OAI-PMH harvest delivers — by element name, each with its values in
// document order (whitespace trimmed, empty ones left out). It returns
// nil for any other document, or one that is not well-formed; other
// bodies are not scanned.
func DublinCore(mediaType string, doc []byte) map[string][]string {
	if !strings.Contains(mediaType, "xml") || !bytes.Contains(doc, []byte(OAIDCNamespace)) {
		return nil // most bodies are not oai_dc records
	}
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var out map[string][]string
	depth := 0
	var field string
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			return nil
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case depth == 1 && (t.Name.Space != OAIDCNamespace || t.Name.Local != "dc"):
				return nil
			case depth == 1:
				out = map[string][]string{}
			case depth == 2 && t.Name.Space == DCNamespace:
				field = t.Name.Local
				text.Reset()
			}
		case xml.CharData:
			if depth >= 2 && field != "" {
				text.Write(t)
			}
		case xml.EndElement:
			if depth == 2 && field != "" {
				if v := strings.TrimSpace(text.String()); v != "" && slices.Contains(DCElements[:], field) {
					out[field] = append(out[field], v)
				}
				field = ""
			}
			depth--
		}
	}
}

// AppendDCFields appends to a JSON object's members (dst ends before the
// object's closing brace) a member "dc_ELEMENT": [values…] for each
// element of dc that has values, in DCElements order.
func AppendDCFields(dst []byte, dc map[string][]string) []byte {
	for _, e := range DCElements {
		vs := dc[e]
		if len(vs) == 0 {
			continue
		}
		b, err := json.Marshal(vs)
		if err != nil {
			continue // []string always encodes
		}
		dst = append(dst, `,"dc_`+e+`":`...)
		dst = append(dst, b...)
	}
	return dst
}
