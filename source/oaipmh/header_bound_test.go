package oaipmh

import (
	"strings"
	"testing"
)

// TestHeaderSetSpecsBounded: a hostile page's record header holds a
// million setSpecs: the record is refused as too large (its permanent
// error), and no more of its setSpecs than Options.MaxRecordSize bytes
// are held, whatever the document's size.
func TestHeaderSetSpecsBounded(t *testing.T) {
	full := envelope("ListRecords", "@")
	head, tail, _ := strings.Cut(full, "@")
	r := &endless{
		head: []byte(head + `<record><header><identifier>oai:x:1</identifier><datestamp>2024-01-02T03:04:05Z</datestamp>`),
		body: []byte(`<setSpec>s</setSpec>`), n: 1_000_000,
		tail: []byte(`</header><metadata><oai_dc:dc><dc:title>t</dc:title></oai_dc:dc></metadata></record>` + tail),
	}
	const maxRecord = 1 << 20
	rd, err := NewReader(r, Options{MaxRecordSize: maxRecord})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rd.Next()
	if err != nil {
		return // refused: bounded
	}
	held := 0
	for _, s := range rec.Header.Sets {
		held += len(s) + 16
	}
	if held > maxRecord {
		t.Errorf("one record's header kept %d setSpecs (%d bytes with their headers) from %d bytes read; MaxRecordSize is %d",
			len(rec.Header.Sets), held, r.read, maxRecord)
	}
}
