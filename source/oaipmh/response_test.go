package oaipmh

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
)

const (
	dcNS    = "http://purl.org/dc/elements/1.1/"
	oaiDCNS = "http://www.openarchives.org/OAI/2.0/oai_dc/"
	xsiNS   = "http://www.w3.org/2001/XMLSchema-instance"
)

// envelope builds a response: the namespaces of the records declared on
// the root only, as many servers do.
func envelope(verb, body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="` + Namespace + `" xmlns:oai_dc="` + oaiDCNS + `" xmlns:dc="` + dcNS + `" xmlns:xsi="` + xsiNS + `">
<responseDate>2024-05-06T07:08:09Z</responseDate>
<request verb="` + verb + `" metadataPrefix="oai_dc">http://example.org/oai</request>
<` + verb + `>` + body + `</` + verb + `>
</OAI-PMH>`
}

// dcRecord is a record whose metadata uses the envelope's prefixes.
func dcRecord(id, title string) string {
	return `<record><header><identifier>` + id + `</identifier><datestamp>2024-01-02T03:04:05Z</datestamp><setSpec>a</setSpec><setSpec>b:c</setSpec></header>` +
		`<metadata><oai_dc:dc xsi:schemaLocation="` + oaiDCNS + ` x.xsd"><dc:title>` + title + `</dc:title></oai_dc:dc></metadata></record>`
}

// readAll reads every record of a response, each record's error beside it.
func readAll(t *testing.T, page string, opts Options) (*Reader, []*Record, []error) {
	t.Helper()
	rd, err := NewReader(strings.NewReader(page), opts)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var recs []*Record
	var errs []error
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return rd, recs, errs
		}
		if rec == nil {
			t.Fatalf("Next: %v", err)
		}
		recs, errs = append(recs, rec), append(errs, err)
	}
}

// titleOf decodes a record's metadata on its own, as a sink would, and
// returns its dc:title: the namespaces must resolve without the envelope.
func titleOf(t *testing.T, doc []byte) string {
	t.Helper()
	var v struct {
		XMLName xml.Name
		Title   []string `xml:"http://purl.org/dc/elements/1.1/ title"`
	}
	if err := xml.Unmarshal(doc, &v); err != nil {
		t.Fatalf("metadata is not a document: %v\n%s", err, doc)
	}
	if v.XMLName.Space != oaiDCNS || v.XMLName.Local != "dc" {
		t.Errorf("root %v, want oai_dc:dc", v.XMLName)
	}
	return strings.Join(v.Title, "|")
}

func TestRecords(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		titles []string
		ids    []string
	}{
		{"namespaces on the root only", dcRecord("oai:x:1", "One") + dcRecord("oai:x:2", "Two"), []string{"One", "Two"}, []string{"oai:x:1", "oai:x:2"}},
		{"whitespace, comments and CDATA", "\n  <!-- c -->\n  " + strings.ReplaceAll(dcRecord("oai:x:3", "<![CDATA[a < b]]>"), "<metadata>", "<metadata>\n   <!-- m -->\n   ") + "\n",
			[]string{"a < b"}, []string{"oai:x:3"}},
		{"entities kept", dcRecord("oai:x:4", "Caf&#233; &amp; b&#x2603;"), []string{"Café & b☃"}, []string{"oai:x:4"}},
		{"own declarations kept", `<record><header><identifier>oai:x:5</identifier><datestamp>2024-01-02</datestamp></header><metadata>` +
			`<d:dc xmlns:d="` + oaiDCNS + `" xmlns:dc="` + dcNS + `"><dc:title>Five</dc:title></d:dc></metadata></record>`, []string{"Five"}, []string{"oai:x:5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd, recs, errs := readAll(t, envelope("ListRecords", tc.body), Options{})
			if len(recs) != len(tc.ids) {
				t.Fatalf("%d records, want %d", len(recs), len(tc.ids))
			}
			for i, rec := range recs {
				if errs[i] != nil {
					t.Errorf("%s: %v", rec.Header.Identifier, errs[i])
				}
				if rec.Header.Identifier != tc.ids[i] || rec.Header.Time.IsZero() {
					t.Errorf("header %+v", rec.Header)
				}
				if got := titleOf(t, rec.Metadata); got != tc.titles[i] {
					t.Errorf("title %q, want %q", got, tc.titles[i])
				}
			}
			if rd.Verb != "ListRecords" || rd.Args["metadataPrefix"] != "oai_dc" || rd.ResponseDate.Format("2006-01-02T15:04:05Z") != "2024-05-06T07:08:09Z" {
				t.Errorf("envelope: %q %v %v", rd.Verb, rd.Args, rd.ResponseDate)
			}
			if tok := rd.Token(); tok.Value != "" || tok.CompleteListSize != -1 {
				t.Errorf("token %+v", tok)
			}
		})
	}
}

// TestMetadataBytes: the metadata is the element as sent, with the
// envelope's declarations it lacks added to its start tag.
func TestMetadataBytes(t *testing.T) {
	_, recs, _ := readAll(t, envelope("GetRecord", dcRecord("oai:x:1", "One")), Options{})
	want := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<oai_dc:dc xmlns="` + Namespace + `" xmlns:oai_dc="` + oaiDCNS + `" xmlns:dc="` + dcNS + `" xmlns:xsi="` + xsiNS + `"` +
		` xsi:schemaLocation="` + oaiDCNS + ` x.xsd"><dc:title>One</dc:title></oai_dc:dc>`
	if len(recs) != 1 || string(recs[0].Metadata) != want {
		t.Fatalf("metadata:\n%s\nwant:\n%s", recs[0].Metadata, want)
	}
	if h := recs[0].Header; strings.Join(h.Sets, ",") != "a,b:c" || h.Datestamp != "2024-01-02T03:04:05Z" {
		t.Errorf("header %+v", h)
	}
}

func TestDeletedAndIdentifiers(t *testing.T) {
	_, recs, errs := readAll(t, envelope("ListRecords", `<record><header status="deleted"><identifier>oai:x:9</identifier><datestamp>2024-02-03</datestamp></header></record>`), Options{})
	if len(recs) != 1 || !recs[0].Header.Deleted || recs[0].Metadata != nil || errs[0] != nil || recs[0].Header.Time.Day() != 3 {
		t.Errorf("deleted: %+v %v", recs, errs)
	}
	_, recs, errs = readAll(t, envelope("ListIdentifiers", `<header><identifier>a</identifier><datestamp>2024-01-01</datestamp></header><header status="deleted"><identifier>b</identifier><datestamp>2024-01-01</datestamp></header>`), Options{})
	if len(recs) != 2 || recs[0].Header.Identifier != "a" || !recs[1].Header.Deleted || errs[0] != nil || errs[1] != nil {
		t.Errorf("identifiers: %+v %v", recs, errs)
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		name, elem string
		want       Token
	}{
		{"plus, slash and space kept", `<resumptionToken completeListSize="250" cursor="100" expirationDate="2024-05-07T00:00:00Z">a+b/c d==</resumptionToken>`,
			Token{Value: "a+b/c d==", CompleteListSize: 250, Cursor: 100, ExpirationDate: ParseDatestamp("2024-05-07T00:00:00Z")}},
		{"empty element on the last page", `<resumptionToken completeListSize="250" cursor="200"/>`, Token{CompleteListSize: 250, Cursor: 200}},
		{"none", ``, Token{CompleteListSize: -1, Cursor: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd, recs, _ := readAll(t, envelope("ListRecords", dcRecord("oai:x:1", "One")+tc.elem), Options{})
			if len(recs) != 1 || rd.Token() != tc.want {
				t.Errorf("%d records, token %+v, want %+v", len(recs), rd.Token(), tc.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	page := func(errs string) string {
		return `<OAI-PMH xmlns="` + Namespace + `"><responseDate>2024-05-06T07:08:09Z</responseDate><request>http://example.org/oai</request>` + errs + `</OAI-PMH>`
	}
	tests := []struct {
		name, page string
		check      func(error) bool
	}{
		{"noRecordsMatch", page(`<error code="noRecordsMatch">nothing</error>`), IsNoRecordsMatch},
		{"badResumptionToken", page(`<error code="badResumptionToken">expired</error>`), func(err error) bool {
			var es Errors
			return errors.As(err, &es) && es.Has("badResumptionToken") && !IsNoRecordsMatch(err) && strings.Contains(err.Error(), "expired")
		}},
		{"two errors", page(`<error code="badArgument">x</error><error code="badVerb">y</error>`), func(err error) bool {
			var es Errors
			return errors.As(err, &es) && len(es) == 2
		}},
		{"not OAI-PMH", `<html><body>maintenance</body></html>`, func(err error) bool { return errors.Is(err, ErrMalformed) }},
		{"broken", `<OAI-PMH xmlns="` + Namespace + `"><responseDate>`, func(err error) bool { return errors.Is(err, ErrMalformed) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(strings.NewReader(tc.page), Options{})
			if err == nil || !tc.check(err) || !errclass.IsPermanent(err) {
				t.Errorf("error %v", err)
			}
		})
	}
}

// TestControlCharacters: characters XML 1.0 forbids inside a record are
// replaced, counted, and the rest of the page is read.
func TestControlCharacters(t *testing.T) {
	rd, recs, errs := readAll(t, envelope("ListRecords", dcRecord("oai:x:1", "a\x01b\x1fc")+dcRecord("oai:x:2", "Two")), Options{})
	if len(recs) != 2 || errs[0] != nil || titleOf(t, recs[0].Metadata) != "a\uFFFDb\uFFFDc" || titleOf(t, recs[1].Metadata) != "Two" {
		t.Errorf("records %d, errors %v", len(recs), errs)
	}
	if rd.Replaced() != 2 {
		t.Errorf("replaced %d, want 2", rd.Replaced())
	}
}

// TestEncodings: a response is read as UTF-8 whatever it declares or
// sends — transcoded from the encoding it declares, or from UTF-16; read
// as UTF-8 when it declares Latin-1 and sends UTF-8; its bytes that are
// not UTF-8 in a UTF-8 response read as windows-1252 and counted — and
// each record's metadata is a UTF-8 document.
func TestEncodings(t *testing.T) {
	utf8Page := envelope("ListRecords", dcRecord("oai:x:1", "Café – Zürich"))
	latin1 := func(s string) string {
		var b []byte
		for _, r := range s {
			b = append(b, byte(r))
		}
		return string(b)
	}
	utf16le := func(s string) string {
		b := []byte{0xff, 0xfe}
		for _, r := range s {
			b = append(b, byte(r), byte(r>>8))
		}
		return string(b)
	}
	declared := func(enc, page string) string {
		return strings.Replace(page, `encoding="UTF-8"`, `encoding="`+enc+`"`, 1)
	}
	page := envelope("ListRecords", dcRecord("oai:x:1", "Café Zürich"))
	tests := []struct {
		name, page, title string
		replaced          int
		note              string
	}{
		{"UTF-8", utf8Page, "Café – Zürich", 0, ""},
		{"ISO-8859-1, as declared", declared("ISO-8859-1", latin1(page)), "Café Zürich", 0, "transcoded from ISO-8859-1"},
		{"declares ISO-8859-1, sends UTF-8", declared("ISO-8859-1", utf8Page), "Café – Zürich", 0, "declared ISO-8859-1 but UTF-8: read as UTF-8"},
		{"declares UTF-8, sends Latin-1", latin1(page), "Café Zürich", 2, ""},
		{"UTF-16 with a byte order mark", utf16le(declared("UTF-16", page)), "Café Zürich", 0, "transcoded from UTF-16LE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd, recs, errs := readAll(t, tt.page, Options{})
			if len(recs) != 1 || errs[0] != nil {
				t.Fatalf("records %d, errors %v", len(recs), errs)
			}
			if got := titleOf(t, recs[0].Metadata); got != tt.title {
				t.Errorf("title %q, want %q", got, tt.title)
			}
			if rd.Replaced() != tt.replaced || rd.Encoding != tt.note {
				t.Errorf("replaced %d, encoding %q; want %d, %q", rd.Replaced(), rd.Encoding, tt.replaced, tt.note)
			}
		})
	}
	if _, err := NewReader(strings.NewReader(declared("x-no-such-thing", latin1(page))), Options{}); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "x-no-such-thing") {
		t.Errorf("an unknown encoding: %v", err)
	}
}

// TestMaxRecordSize: a record over the cap is that record's error; the
// records after it are read.
func TestMaxRecordSize(t *testing.T) {
	big := strings.Repeat("x", 5000)
	_, recs, errs := readAll(t, envelope("ListRecords", dcRecord("oai:x:1", "One")+dcRecord("oai:x:2", big)+dcRecord("oai:x:3", "Three")+"<resumptionToken>t</resumptionToken>"), Options{MaxRecordSize: 1000})
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	if !errors.Is(errs[1], ErrTooLarge) || !errclass.IsPermanent(errs[1]) || recs[1].Header.Identifier != "oai:x:2" || recs[1].Metadata != nil {
		t.Errorf("big record: %v %+v", errs[1], recs[1].Header)
	}
	if errs[0] != nil || errs[2] != nil || titleOf(t, recs[2].Metadata) != "Three" {
		t.Errorf("others: %v", errs)
	}
}

// FuzzReader: whatever the page, the reader ends, and the metadata of
// every record it returns without error is a well-formed document.
func FuzzReader(f *testing.F) {
	f.Add(envelope("ListRecords", dcRecord("oai:x:1", "One")+`<resumptionToken cursor="0">a+b</resumptionToken>`))
	f.Add(envelope("ListRecords", `<record><header status="deleted"><identifier>d</identifier></header></record>`))
	f.Add(envelope("ListIdentifiers", `<header><identifier>a</identifier></header>`))
	f.Add(strings.Replace(envelope("ListRecords", dcRecord("oai:x:1", "Caf\xe9")), `encoding="UTF-8"`, `encoding="ISO-8859-1"`, 1))
	f.Add(envelope("ListRecords", dcRecord("oai:x:1", "Caf\xe9 \xc3\xa9 \xe2\x80")))
	f.Add(envelope("GetRecord", dcRecord("oai:x:1", "<![CDATA[x]]>\x02")))
	f.Add(`<OAI-PMH xmlns="` + Namespace + `"><error code="noRecordsMatch"/></OAI-PMH>`)
	// Characters XML 1.0 forbids, in every form and place.
	for _, page := range forbiddenPages() {
		f.Add(page.page)
	}
	f.Fuzz(func(t *testing.T, page string) {
		for _, lenient := range []bool{false, true} {
			fuzzRead(t, page, lenient)
		}
	})
}

// fuzzRead reads page: whatever it holds, every record's metadata is a
// well-formed document, and reading ends.
func fuzzRead(t *testing.T, page string, lenient bool) {
	{
		rd, err := NewReader(strings.NewReader(page), Options{MaxRecordSize: 4096, Lenient: lenient})
		if err != nil {
			return
		}
		for i := 0; ; i++ {
			if i > len(page) {
				t.Fatalf("more records than bytes")
			}
			rec, err := rd.Next()
			if rec == nil {
				return
			}
			if err == nil && len(rec.Metadata) > 0 {
				d := xml.NewDecoder(strings.NewReader(string(rec.Metadata)))
				for {
					if _, err := d.Token(); err == io.EOF {
						break
					} else if err != nil {
						t.Fatalf("metadata not well-formed: %v\n%s", err, rec.Metadata)
					}
				}
			}
		}
	}
}

// forbiddenPage is a page holding a character XML 1.0 forbids, and the
// title its record must have once read leniently.
type forbiddenPage struct {
	name, page, title string
}

// forbiddenPages are pages holding forbidden characters in every form —
// raw bytes, decimal and hexadecimal references, U+FFFE and U+FFFF, a
// surrogate, a number past Unicode — in text, attribute values and CDATA.
func forbiddenPages() []forbiddenPage {
	withAttr := func(v string) string {
		return envelope("ListRecords", `<record><header><identifier>oai:x:1</identifier><datestamp>2024-01-02T03:04:05Z</datestamp></header>`+
			`<metadata><oai_dc:dc><dc:title xml:lang="`+v+`">T</dc:title></oai_dc:dc></metadata></record>`)
	}
	return []forbiddenPage{
		{"raw byte in text", envelope("ListRecords", dcRecord("oai:x:1", "a\x1ab")), "a\uFFFDb"},
		{"decimal reference in text", envelope("ListRecords", dcRecord("oai:x:1", "a&#26;b")), "a\uFFFDb"},
		{"hexadecimal reference in text", envelope("ListRecords", dcRecord("oai:x:1", "a&#x1A;b&#X1f;")), "a\uFFFDb\uFFFD"},
		{"NUL by reference", envelope("ListRecords", dcRecord("oai:x:1", "a&#0;b&#x0000;")), "a\uFFFDb\uFFFD"},
		{"U+FFFE by reference", envelope("ListRecords", dcRecord("oai:x:1", "a&#xFFFE;b")), "a\uFFFDb"},
		{"U+FFFF raw", envelope("ListRecords", dcRecord("oai:x:1", "a\xef\xbf\xbfb")), "a\uFFFDb"},
		{"a surrogate by reference", envelope("ListRecords", dcRecord("oai:x:1", "a&#xD800;b")), "a\uFFFDb"},
		{"past Unicode by reference", envelope("ListRecords", dcRecord("oai:x:1", "a&#x110000;b&#99999999999;")), "a\uFFFDb\uFFFD"},
		{"raw byte in CDATA", envelope("ListRecords", dcRecord("oai:x:1", "<![CDATA[a\x02b]]>")), "<![CDATA[a\uFFFDb]]>"},
		{"a reference in CDATA is text", envelope("ListRecords", dcRecord("oai:x:1", "<![CDATA[a&#26;b]]>c&#26;")), "<![CDATA[a&#26;b]]>c\uFFFD"},
		{"raw byte in an attribute", withAttr("e\x01n"), ""},
		{"a reference in an attribute", withAttr("e&#x1;n"), ""},
		{"a reference in the header", strings.Replace(envelope("ListRecords", dcRecord("oai:x:1&#1;", "T")), "", "", 1), "T"},
		{"a reference in the token", envelope("ListRecords", dcRecord("oai:x:1", "T")+`<resumptionToken>a&#x2;b</resumptionToken>`), "T"},
	}
}

// TestLenient: read leniently, a page with a character XML 1.0 forbids,
// in any form and place, gives its record with the character replaced by
// U+FFFD (a reference inside CDATA is text, and stays); read strictly, a
// reference to one is an error of the page.
func TestLenient(t *testing.T) {
	for _, tc := range forbiddenPages() {
		t.Run(tc.name, func(t *testing.T) {
			_, recs, errs := readAll(t, tc.page, Options{Lenient: true})
			if len(recs) != 1 || errs[0] != nil {
				t.Fatalf("lenient: %d records, errors %v", len(recs), errs)
			}
			body := string(recs[0].Metadata)
			if tc.title != "" && !strings.Contains(body, "<dc:title>"+tc.title+"</dc:title>") {
				t.Errorf("title not repaired: %s", body)
			}
			if strings.Contains(tc.name, "attribute") && !strings.Contains(body, "xml:lang=\"e\uFFFDn\"") {
				t.Errorf("attribute not repaired: %s", body)
			}
			d := xml.NewDecoder(strings.NewReader(body))
			for {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("metadata not well-formed: %v\n%s", err, body)
				}
			}
		})
	}
}

func ExampleReader() {
	rd, err := NewReader(strings.NewReader(envelope("ListRecords", dcRecord("oai:x:1", "One")+`<resumptionToken>next</resumptionToken>`)), Options{})
	if err != nil {
		panic(err)
	}
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		fmt.Println(rec.Header.Identifier, len(rec.Metadata) > 0, err)
	}
	fmt.Println("token:", rd.Token().Value)
	// Output:
	// oai:x:1 true <nil>
	// token: next
}

// BenchmarkReader reads a page of 100 records of about 2 KB each.
func BenchmarkReader(b *testing.B) {
	var body strings.Builder
	for i := range 100 {
		body.WriteString(dcRecord(fmt.Sprintf("oai:x:%d", i), strings.Repeat("word ", 400)))
	}
	page := envelope("ListRecords", body.String())
	b.SetBytes(int64(len(page)))
	for b.Loop() {
		rd, err := NewReader(strings.NewReader(page), Options{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := rd.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLargePage reads a page of 100 records of 200 KB each (20 MB),
// made as it is read, and reports the largest heap seen between records
// (peak-heap-MB): a page never sits whole in memory, let alone twice.
func BenchmarkLargePage(b *testing.B) {
	const records, size = 100, 200 << 10
	title := strings.Repeat("word ", size/5)
	head, tail, _ := strings.Cut(envelope("ListRecords", "\x00"), "\x00")
	var peak uint64
	b.SetBytes(int64(records * size))
	for b.Loop() {
		pr, pw := io.Pipe()
		go func() {
			_, _ = io.WriteString(pw, head)
			for i := range records {
				if _, err := io.WriteString(pw, dcRecord(fmt.Sprintf("oai:x:%d", i), title)); err != nil {
					return
				}
			}
			_, _ = io.WriteString(pw, tail)
			pw.Close()
		}()
		rd, err := NewReader(pr, Options{})
		if err != nil {
			b.Fatal(err)
		}
		var ms runtime.MemStats
		for n := 0; ; n++ {
			rec, err := rd.Next()
			if err == io.EOF {
				if n != records {
					b.Fatalf("%d records", n)
				}
				break
			} else if err != nil || len(rec.Metadata) < size {
				b.Fatalf("record %d: %d bytes, %v", n, len(rec.Metadata), err)
			}
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		pr.Close()
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}
