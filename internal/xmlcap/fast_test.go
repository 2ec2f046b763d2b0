package xmlcap_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/internal/xmlcap"
	"github.com/rsharvest/rsharvest/internal/xmlcap/xmlcaptest"
)

// agreeSeeds are documents where the fast tokenizer must hand over to
// encoding/xml, or where the two could part: each is read by both.
var agreeSeeds = []string{
	``,
	`<a/>`,
	`<?xml version="1.0" encoding="UTF-8"?>` + "\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n  <rs:md capability=\"resourcedump-manifest\"/>\n  <url><loc>http://x/a?b=1&amp;c=2</loc><rs:md hash=\"md5:1B2M2Y8AsgTpgAmY7PhCfg==\" length=\"0\" path=\"/a\"/></url>\n</urlset>\n",
	`<a><b x='1' y="2"z="3"/></a>`,
	`<a xmlns:p="u"><p:b p:c="1" d="2"/><p:e></p:e></a>`,
	`<a xmlns="u"><b xmlns=""><c/></b><d/></a>`,
	`<a xmlns:p="u"><b xmlns:p="v"><p:c/></b><p:d/></a>`,
	`<a><b></c></a>`,
	`<a><p:b></q:b></a>`,
	`</a>`,
	`<a>`,
	`<a><b`,
	`<a b="1`,
	`<a>text`,
	`<a>x]]>y</a>`,
	`<a>x]]&gt;y</a>`,
	`<a b="x]]>y"/>`,
	`<a>&lt;&gt;&amp;&quot;&apos;</a>`,
	`<a>&#65;&#x42;&#X43;</a>`,
	`<a>&nbsp;</a>`,
	`<a>&amp</a>`,
	`<a b="&amp"/>`,
	`<a b="x<y"/>`,
	"<a>\r\n\r\rx\r</a>",
	"<a b=\"\r\n\t x\"/>",
	"<a>\r&amp;\n</a>",
	"<a>\x00</a>",
	"<a>\x0b</a>",
	"<a>\xff</a>",
	"<a>\xef\xbf\xbe</a>",
	"<a>caf\xc3\xa9 \xf0\x9f\x98\x80</a>",
	"<\xc3\xa9l\xc3\xa9ment/>",
	"<a\xc3\xa9/>",
	"<a b\xc3\xa9='1'/>",
	`<a:b:c/>`,
	`<:a/>`,
	`<a:/>`,
	`<a :b="1"/>`,
	`<a b:="1"/>`,
	`<a b c="1"/>`,
	`<a b=c/>`,
	`<a b = "1" / >`,
	`<a b="1"/ >`,
	`<a / >`,
	`< a/>`,
	`<1a/>`,
	`<a.b-c_d/>`,
	`<>`,
	`</>`,
	`</a b>`,
	`<a></a  >`,
	"<a></a\n>",
	`<a><!-- c --><!----><!-- a-b --></a>`,
	`<a><!-- a -- b --></a>`,
	`<a><!-- a ---></a>`,
	`<a><!-->x--></a>`,
	`<a><!--->x--></a>`,
	`<a><!-x--></a>`,
	`<a><![CDATA[x<y]]>z</a>`,
	`<a><![CDATA[x</a>`,
	`<a><![CDAT[x]]></a>`,
	`<a><?pi x?><?xml version="1.0"?></a>`,
	`<a><??></a>`,
	`<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>`,
	`<a><!ENTITY e "x"></a>`,
	`<a><!x></a>`,
	`<?xml version="1.1"?><a/>`,
	`<?xml version="1.0" encoding="ISO-8859-1"?><a>caf` + "\xe9" + `</a>`,
	`<?xml version="1.0" encoding="x-unknown"?><a/>`,
	`<a><?xml version="1.0" encoding="ISO-8859-1"?>caf` + "\xe9" + `</a>`,
	"\xef\xbb\xbf<a/>",
	`<a/><b/>text`,
	`<a xml:lang="en" xmlns:xml="http://www.w3.org/XML/1998/namespace"/>`,
	`<xmlns/>`,
	`<a xmlns:p=""><p:b/></a>`,
	`<p:a xmlns:p="u"></p:a>`,
	"<a>\n<b\n c='1'\n>\n</b\n>\n</a>",
}

func FuzzAgree(f *testing.F) {
	for _, s := range agreeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		xmlcaptest.Agree(t, data)
	})
}

// TestAgreeSplit reads each seed from a reader that hands over one byte at
// a time, so that gosax meets every token cut across its reads.
func TestAgreeSplit(t *testing.T) {
	for _, s := range agreeSeeds {
		ref := xml.NewDecoder(strings.NewReader(s))
		ref.CharsetReader = xmlcap.CharsetReader
		got := xmlcap.NewDecoder(io.LimitReader(oneByte{strings.NewReader(s)}, 1<<20), 0, 0)
		for {
			rt, rerr := ref.Token()
			gt, gerr := got.Token()
			if (rerr == nil) != (gerr == nil) || rerr != nil && rerr.Error() != gerr.Error() {
				t.Fatalf("%q: encoding/xml %v, xmlcap %v", s, rerr, gerr)
			}
			if rerr != nil {
				break
			}
			if r, g := xml.CopyToken(rt), xml.CopyToken(gt); !equalTokens(r, g) {
				t.Fatalf("%q: encoding/xml %#v, xmlcap %#v", s, r, g)
			}
		}
	}
}

type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func equalTokens(a, b xml.Token) bool {
	switch a := a.(type) {
	case xml.CharData:
		b, ok := b.(xml.CharData)
		return ok && bytes.Equal(a, b)
	case xml.Comment:
		b, ok := b.(xml.Comment)
		return ok && bytes.Equal(a, b)
	case xml.StartElement:
		b, ok := b.(xml.StartElement)
		if !ok || a.Name != b.Name || len(a.Attr) != len(b.Attr) {
			return false
		}
		for i := range a.Attr {
			if a.Attr[i] != b.Attr[i] {
				return false
			}
		}
		return true
	case xml.EndElement:
		return a == b
	case xml.ProcInst:
		b, ok := b.(xml.ProcInst)
		return ok && a.Target == b.Target && bytes.Equal(a.Inst, b.Inst)
	case xml.Directive:
		b, ok := b.(xml.Directive)
		return ok && bytes.Equal(a, b)
	}
	return false
}

// TestFastLimits: the limits hold while gosax reads: a token past the
// limit fails, and a tag that never ends is not read past it and its
// slack.
func TestFastLimits(t *testing.T) {
	doc := "<a><b>" + strings.Repeat("x", 5000) + "</b></a>"
	d := xmlcap.NewDecoder(strings.NewReader(doc), 1000, 0)
	var err error
	for err == nil {
		_, err = d.Token()
	}
	if !errors.Is(err, xmlcap.ErrTokenTooLarge) {
		t.Fatalf("text past the limit: %v", err)
	}
	endless := &counting{r: io.MultiReader(strings.NewReader(`<a><b></b><c x="`), endlessX{})}
	d = xmlcap.NewDecoder(endless, 1000, 0)
	for err = nil; err == nil; {
		_, err = d.Token()
	}
	if !errors.Is(err, xmlcap.ErrTokenTooLarge) || endless.n > 1000+3*64<<10 {
		t.Fatalf("endless attribute: %v after %d bytes", err, endless.n)
	}
	d = xmlcap.NewDecoder(strings.NewReader(strings.Repeat("<a>", 40)), 0, 32)
	for err = nil; err == nil; {
		_, err = d.Token()
	}
	if !errors.Is(err, xmlcap.ErrTooDeep) {
		t.Fatalf("nesting: %v", err)
	}
}

type endlessX struct{}

func (endlessX) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

type counting struct {
	r io.Reader
	n int
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
