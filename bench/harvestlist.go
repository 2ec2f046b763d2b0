package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// HarvestListOptions configure GenerateHarvestList: a site publishing a
// harvest list (seed 004; source/harvestlist) and its EML documents.
type HarvestListOptions struct {
	// Dir receives harvestlist.xml and docs/.
	Dir string
	// Base is the URL prefix of the list's documentURLs (default
	// Placeholder, which the server rewrites to its own URL).
	Base string
	// Documents is how many documents the list names (default 20).
	Documents int
	// Round is how far the site has moved on: at round 0 every document
	// is at revision 1; each later round raises the revision of every
	// third document (HarvestListDoc says which).
	Round int
	// Seed makes the bodies.
	Seed uint64
	// Drop leaves the last Drop documents out of the list (their files
	// stay): a site that no longer lists them.
	Drop int
	// Odd adds what real lists hold: the first document listed twice (a
	// lower revision first), one document not well-formed, one whose root
	// is in another namespace than its documentType, one without the
	// title HarvestListSchema requires, one whose URL answers 404, one
	// document element without a revision, and from round 1 one document
	// listed at a lower revision than round 0's.
	Odd bool
}

// The documents Odd makes, by index.
const (
	HarvestListMalformed   = 4 // its body is not well-formed XML
	HarvestListWrongRoot   = 5 // its root is not in its documentType's namespace
	HarvestListUnreachable = 6 // its URL answers 404
	HarvestListLower       = 7 // from round 1 listed at revision 0
	HarvestListNoTitle     = 8 // well-formed, in its namespace, but without the title HarvestListSchema requires
)

// HarvestListSchema is an XSD the generated documents are valid against,
// but HarvestListNoTitle's.
const HarvestListSchema = `<?xml version="1.0"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" targetNamespace="https://eml.ecoinformatics.org/eml-2.2.0" elementFormDefault="unqualified">
  <xs:element name="eml">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="dataset">
          <xs:complexType>
            <xs:sequence>
              <xs:element name="title" type="xs:string"/>
              <xs:element name="abstract">
                <xs:complexType><xs:sequence><xs:element name="para" type="xs:string"/></xs:sequence></xs:complexType>
              </xs:element>
            </xs:sequence>
          </xs:complexType>
        </xs:element>
      </xs:sequence>
      <xs:attribute name="packageId" type="xs:string" use="required"/>
      <xs:attribute name="system" type="xs:string" use="required"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
`

// EMLNamespace is the documentType of the generated documents.
const EMLNamespace = "https://eml.ecoinformatics.org/eml-2.2.0"

// HarvestListScope is the scope of every generated docid.
const HarvestListScope = "rsharvest-test"

// HarvestListRevision is document i's revision at round.
func HarvestListRevision(i, round int) int {
	if i%3 == 0 {
		return 1 + round
	}
	return 1
}

// HarvestListDocID is document i's docid.
func HarvestListDocID(i int) string { return fmt.Sprintf("%s.%d", HarvestListScope, 100+i) }

// GenerateHarvestList writes the list of round o.Round and every
// document it names (every revision up to that round, so that older
// revisions stay fetchable, as a site keeps them).
func GenerateHarvestList(_ context.Context, o HarvestListOptions) error {
	o.Documents = cmp.Or(o.Documents, 20)
	base := strings.TrimSuffix(cmp.Or(o.Base, Placeholder), "/") + "/"
	rng := rand.New(rand.NewPCG(o.Seed, 31))
	if err := os.MkdirAll(filepath.Join(o.Dir, "docs"), 0o755); err != nil {
		return err
	}
	var list strings.Builder
	list.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<hrv:harvestList xmlns:hrv="eml://ecoinformatics.org/harvestList">` + "\n")
	entry := func(i, rev int, url string) {
		fmt.Fprintf(&list, "  <document>\n    <docid>\n      <scope>%s</scope>\n      <identifier>%d</identifier>\n      <revision>%d</revision>\n    </docid>\n"+
			"    <documentType>%s</documentType>\n    <documentURL>%s</documentURL>\n  </document>\n", HarvestListScope, 100+i, rev, EMLNamespace, url)
	}
	docURL := func(i, rev int) string { return fmt.Sprintf("%sdocs/%d.%d.xml", base, 100+i, rev) }
	for i := range o.Documents {
		rev := HarvestListRevision(i, o.Round)
		for r := 0; r <= rev; r++ {
			if o.Odd && i == HarvestListUnreachable {
				continue
			}
			body := emlDocument(HarvestListDocID(i), r, rng)
			switch {
			case o.Odd && i == HarvestListMalformed:
				body = strings.Replace(body, "</eml:eml>", "", 1)
			case o.Odd && i == HarvestListWrongRoot:
				body = strings.ReplaceAll(body, EMLNamespace, "eml://ecoinformatics.org/eml-2.0.1")
			case o.Odd && i == HarvestListNoTitle:
				body = regexp.MustCompile(`\s*<title>[^<]*</title>`).ReplaceAllString(body, "")
			}
			if err := os.WriteFile(filepath.Join(o.Dir, "docs", fmt.Sprintf("%d.%d.xml", 100+i, r)), []byte(body), 0o644); err != nil {
				return err
			}
		}
		if o.Odd && i == 0 {
			entry(i, rev-1, docURL(i, rev-1)) // listed twice: a lower revision first
		}
		if o.Odd && i == HarvestListLower && o.Round > 0 {
			rev = 0
		}
		if i >= o.Documents-o.Drop {
			continue // no longer listed
		}
		entry(i, rev, docURL(i, rev))
	}
	if o.Odd {
		list.WriteString("  <document>\n    <docid><scope>" + HarvestListScope + "</scope><identifier>999</identifier></docid>\n" +
			"    <documentType>" + EMLNamespace + "</documentType>\n    <documentURL>" + base + "docs/999.xml</documentURL>\n  </document>\n")
	}
	list.WriteString("</hrv:harvestList>\n")
	return os.WriteFile(filepath.Join(o.Dir, "harvestlist.xml"), []byte(list.String()), 0o644)
}

// emlDocument is a small EML document of docid at revision rev.
func emlDocument(docid string, rev int, rng *rand.Rand) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<eml:eml xmlns:eml="%s" packageId="%s.%d" system="rsharvest">
  <dataset>
    <title>Dataset %s, revision %d</title>
    <abstract><para>%s</para></abstract>
  </dataset>
</eml:eml>
`, EMLNamespace, docid, rev, docid, rev, loremWords(rng, 40))
}

// loremWords returns n words of filler.
func loremWords(rng *rand.Rand, n int) string {
	words := []string{"site", "plot", "soil", "carbon", "forest", "stream", "survey", "sample", "annual", "nitrogen", "biomass", "climate"}
	out := make([]string, n)
	for i := range out {
		out[i] = words[rng.IntN(len(words))]
	}
	return strings.Join(out, " ")
}
