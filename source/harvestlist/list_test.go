package harvestlist_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/xmlcap/xmlcaptest"
	"github.com/rsharvest/rsharvest/source/harvestlist"
)

const listHead = `<?xml version="1.0"?>` + "\n" + `<hrv:harvestList xmlns:hrv="eml://ecoinformatics.org/harvestList">`

func doc(scope, id, rev, typ, url string) string {
	return "<document><docid><scope>" + scope + "</scope><identifier>" + id + "</identifier><revision>" + rev + "</revision></docid>" +
		"<documentType>" + typ + "</documentType><documentURL>" + url + "</documentURL></document>\n"
}

// TestRead: the documents of a list in order, the elements that cannot be
// used reported and passed over, and what is not a harvest list refused.
func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		docs    []string // docid@revision
		bad     []string // docids of the elements reported
		notList bool
	}{
		{"two documents", listHead + doc("knb", "1", "2", "eml://ecoinformatics.org/eml-2.1.1", "http://h/1") + doc("knb", "7", "1", "text/xml", "https://h/7") + "</hrv:harvestList>",
			[]string{"knb.1@2", "knb.7@1"}, nil, false},
		{"empty list", listHead + "</hrv:harvestList>", nil, nil, false},
		{"bad elements passed over", listHead + doc("knb", "x", "1", "t", "http://h/x") + doc("knb", "2", "", "t", "http://h/2") + doc("knb", "3", "1", "t", "ftp://h/3") +
			doc("", "4", "1", "t", "http://h/4") + doc("knb", "5", "1", "t", "http://h/5") + "</hrv:harvestList>",
			[]string{"knb.5@1"}, []string{"knb.x", "knb.2", "knb.3", ".4"}, false},
		{"unknown elements skipped", listHead + "<note><document>not one</document></note>" + doc("knb", "1", "1", "t", "http://h/1") + "</hrv:harvestList>",
			[]string{"knb.1@1"}, nil, false},
		{"wrong root", `<harvestList xmlns="urn:other">` + doc("knb", "1", "1", "t", "http://h/1") + "</harvestList>", nil, nil, true},
		{"no namespace", `<harvestList>` + doc("knb", "1", "1", "t", "http://h/1") + "</harvestList>", nil, nil, true},
		{"not XML", "docid,revision\nknb.1,1\n", nil, nil, true},
		{"empty", "", nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var docs, bad []string
			err := harvestlist.Read(strings.NewReader(tt.list), func(d harvestlist.Document) error {
				docs = append(docs, d.DocID()+"@"+itoa(d.Revision))
				if d.URL == "" || d.Line == 0 {
					t.Errorf("document %+v", d)
				}
				return nil
			}, func(ee *harvestlist.EntryError) error {
				bad = append(bad, ee.DocID)
				if !errclass.IsPermanent(ee) {
					t.Errorf("%v is not permanent", ee)
				}
				return nil
			})
			if tt.notList {
				if !errors.Is(err, harvestlist.ErrNotHarvestList) || !errclass.IsPermanent(err) {
					t.Fatalf("Read = %v, want a permanent ErrNotHarvestList", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(docs, " ") != strings.Join(tt.docs, " ") || strings.Join(bad, " ") != strings.Join(tt.bad, " ") {
				t.Errorf("docs %q, bad %q; want %q, %q", docs, bad, tt.docs, tt.bad)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// FuzzRead: Read never panics, and every document it gives has a docid,
// a revision and an http(s) URL (its scheme in any case: "hTtp" is http).
func FuzzRead(f *testing.F) {
	f.Add(listHead + doc("knb", "1", "2", "eml://ecoinformatics.org/eml-2.1.1", "http://h/1") + "</hrv:harvestList>")
	f.Add(listHead + doc("knb", "x", "1", "t", "http://h/x") + "</hrv:harvestList>")
	f.Add(`<harvestList xmlns="urn:other"/>`)
	f.Add(listHead + "<document><docid><scope>a</scope>")
	f.Fuzz(func(t *testing.T, list string) {
		xmlcaptest.Agree(t, []byte(list))
		_ = harvestlist.Read(strings.NewReader(list), func(d harvestlist.Document) error {
			u, err := url.Parse(d.URL)
			if d.Scope == "" || d.Revision < 0 || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Errorf("document %+v", d)
			}
			return nil
		}, func(*harvestlist.EntryError) error { return nil })
	})
}
