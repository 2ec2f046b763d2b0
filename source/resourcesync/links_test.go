package resourcesync

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestHTMLTargets(t *testing.T) {
	base := "http://h.example/dir/page.html"
	for _, tc := range []struct {
		name, page string
		want       []string
	}{
		{"plain", `<link rel="resourcesync" href="/a.xml">`, []string{"http://h.example/a.xml"}},
		{"upper case, order", `<LINK HREF='/b.xml' REL="ResourceSync">`, []string{"http://h.example/b.xml"}},
		{"unquoted", `<link href=/c.xml rel=resourcesync>`, []string{"http://h.example/c.xml"}},
		{"several rels, relative, self-closing", `<link rel="alternate  resourcesync
			describedby" href="d.xml"/>`, []string{"http://h.example/dir/d.xml"}},
		{"spaces around =", "<link\n rel = \"resourcesync\"\n href\n=\n\"/e.xml\" >", []string{"http://h.example/e.xml"}},
		{"entities", `<link rel="resourcesync" href="/f.xml?a=1&amp;b=2">`, []string{"http://h.example/f.xml?a=1&b=2"}},
		{"> in a quoted value", `<link title="a>b" rel="resourcesync" href="/g.xml">`, []string{"http://h.example/g.xml"}},
		{"lone < and invalid UTF-8", "a < b \xff\xfe <link rel=resourcesync href=/h.xml>", []string{"http://h.example/h.xml"}},
		{"base href", `<base href="http://other.example/x/"><link rel=resourcesync href="cl.xml">`, []string{"http://other.example/x/cl.xml"}},
		{"base after the link still applies", `<link rel=resourcesync href="cl.xml"><base href="/y/">`, []string{"http://h.example/y/cl.xml"}},
		{"duplicates once", `<link rel=resourcesync href=/i.xml><link rel=resourcesync href="http://h.example/i.xml">`, []string{"http://h.example/i.xml"}},
		{"two", `<link rel=resourcesync href=/j.xml><link rel=resourcesync href=/k.xml>`, []string{"http://h.example/j.xml", "http://h.example/k.xml"}},
		{"other rel", `<link rel="stylesheet" href="x.css"><link rel="resourcesyncx" href="y.xml">`, nil},
		{"first rel wins", `<link rel="stylesheet" rel="resourcesync" href="/l.xml">`, nil},
		{"not a link element", `<linkx rel=resourcesync href=/m.xml><a rel=resourcesync href=/n.xml>`, nil},
		{"in a comment", `<!-- <link rel="resourcesync" href="/o.xml"> -->`, nil},
		{"in script", `<script>document.write('<link rel="resourcesync" href="/p.xml">')</SCRIPT >`, nil},
		{"in style", `<style>/* <link rel="resourcesync" href="/q.xml"> */</style>`, nil},
		{"after script", `<script>x</script><link rel=resourcesync href=/r.xml>`, []string{"http://h.example/r.xml"}},
		{"truncated tag", `<link rel="resourcesync" href="/s.xml"`, nil},
		{"unterminated quote", `<link rel="resourcesync href=/t.xml>`, nil},
		{"no href", `<link rel="resourcesync">`, nil},
		{"not http", `<link rel="resourcesync" href="mailto:a@b.example"><link rel="resourcesync" href="javascript:x()">`, nil},
		{"doctype and end tags", `<!DOCTYPE html><html><head></head><link rel=resourcesync href=/u.xml></html>`, []string{"http://h.example/u.xml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := htmlTargets([]byte(tc.page), mustURL(t, base))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLinkHeaderTargets(t *testing.T) {
	base := "http://h.example/page"
	for _, tc := range []struct {
		name   string
		values []string
		want   []string
	}{
		{"spec example", []string{`<http://h.example/dataset1/capabilitylist.xml>; rel="resourcesync"`}, []string{"http://h.example/dataset1/capabilitylist.xml"}},
		{"relative, token", []string{`</cl.xml>;rel=resourcesync`}, []string{"http://h.example/cl.xml"}},
		{"among others", []string{`<http://h.example/n>; rel="next", <http://h.example/cl.xml>; rel="ResourceSync alternate"; type="application/xml"`}, []string{"http://h.example/cl.xml"}},
		{"quoted comma, semicolon and <", []string{`<http://h.example/x>; title="a, b; <c>"; rel="next", <http://h.example/cl.xml>; rel="resourcesync"`}, []string{"http://h.example/cl.xml"}},
		{"escaped quote", []string{`<http://h.example/x>; title="a \", <y>"; rel=resourcesync`}, []string{"http://h.example/x"}},
		{"several values", []string{`<http://h.example/a.xml>; rel=next`, `<http://h.example/b.xml>; rel=resourcesync`}, []string{"http://h.example/b.xml"}},
		{"anchor elsewhere", []string{`<http://h.example/cl.xml>; rel="resourcesync"; anchor="http://h.example/other"`}, nil},
		{"anchor here", []string{`<http://h.example/cl.xml>; rel="resourcesync"; anchor="/page"`}, []string{"http://h.example/cl.xml"}},
		{"first rel wins", []string{`<http://h.example/cl.xml>; rel=next; rel=resourcesync`}, nil},
		{"junk", []string{`garbage, <http://h.example/cl.xml> junk; rel=resourcesync, <http://h.example/ok.xml>; rel=resourcesync`}, []string{"http://h.example/ok.xml"}},
		{"unterminated", []string{`<http://h.example/cl.xml; rel=resourcesync`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := linkHeaderTargets(tc.values, mustURL(t, base))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRobotsSitemaps(t *testing.T) {
	page := "User-agent: *\r\nDisallow: /\r\n# Sitemap: http://h.example/commented.xml\r\n" +
		"Sitemap: http://h.example/a.xml\r\n" +
		"sitemap:/b.xml # trailing comment\n" +
		"  SiteMap  :  http://other.example/c.xml\n" +
		"Sitemap:\n" +
		"Sitemaps: http://h.example/not.xml\n" +
		"Sitemap: http://h.example/a.xml\n" +
		"Sitemap: ftp://h.example/d.xml"
	got := robotsSitemaps(page, mustURL(t, "http://h.example/robots.txt"))
	want := []string{"http://h.example/a.xml", "http://h.example/b.xml", "http://other.example/c.xml"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestNameSets(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lists       []string
		describedby []string
		want        []string
	}{
		{"distinct files", []string{"http://h/set1.xml", "http://h/set2.xml"}, nil, []string{"set1", "set2"}},
		{"same file, folders", []string{"http://h/a/capabilitylist.xml", "http://h/b/capabilitylist.xml"}, nil, []string{"a", "b"}},
		{"describedby first", []string{"http://h/a/capabilitylist.xml", "http://h/b/capabilitylist.xml"},
			[]string{"http://h/info/about-set1.html", "http://h/info/about-set2.html"}, []string{"about-set1", "about-set2"}},
		{"one unique keeps its name", []string{"http://h/a/cl.xml", "http://h/b/cl.xml", "http://h/other.xml"}, nil, []string{"a", "b", "other"}},
		{"paths", []string{"http://h/x/a/cl.xml", "http://h/y/a/cl.xml"}, nil, []string{"x/a/cl", "y/a/cl"}},
		{"suffix", []string{"http://h/cl.xml", "http://h/cl.xml?v=2"}, nil, []string{"cl-2", "cl-3"}},
		{"none", []string{"", "http://h/default.xml"}, nil, []string{"default-2", "default"}},
		{"escaped", []string{"http://h/caf%C3%A9.xml"}, nil, []string{"café"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets := make([]Set, len(tc.lists))
			db := make([]string, len(tc.lists))
			for i, l := range tc.lists {
				sets[i].CapabilityList = l
			}
			copy(db, tc.describedby)
			nameSets(sets, db)
			var got []string
			for _, s := range sets {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzScanTags checks that the tokenizer never panics or loops, whatever
// the page.
func FuzzScanTags(f *testing.F) {
	for _, s := range []string{`<link rel=resourcesync href=/a>`, `<!-- x`, `<script>`, `<a b='`, `<a =x>`, "<\xff>"} {
		f.Add(s)
	}
	base, _ := url.Parse("http://h.example/")
	f.Fuzz(func(t *testing.T, page string) {
		htmlTargets([]byte(page), base)
		linkHeaderTargets(strings.Split(page, "\n"), base)
	})
}
