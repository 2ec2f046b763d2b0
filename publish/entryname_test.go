package publish

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/sink/fs"
)

// TestEntryName: dump entry names hold nothing Linux, macOS or Windows
// refuses, and distinct URIs get distinct names.
func TestEntryName(t *testing.T) {
	long := "http://h.example/" + strings.Repeat("é:", 120) + ".txt"
	uris := []string{
		"http://127.0.0.1:56805/resources/a.txt",
		"http://h.example/q?x=1&y=2",
		"http://h.example/con/aux.txt",
		"http://h.example/CON",
		"http://h.example/dir./file ",
		"http://h.example/sub dir/café über.txt",
		"http://h.example/lpt1.log/com9",
		"http://h.example/com10/nul.tar.gz",
		long,
		long + "x",
	}
	seen := map[string]string{}
	for _, u := range uris {
		name := EntryName(u)
		if prev, ok := seen[name]; ok {
			t.Errorf("%q and %q both named %q", prev, u, name)
		}
		seen[name] = u
		for _, e := range strings.Split(name, "/") {
			switch {
			case e == "" || e == "." || e == "..":
				t.Errorf("%q: element %q", name, e)
			case len(e) > maxEntryElem:
				t.Errorf("%q: element of %d bytes", name, len(e))
			case strings.ContainsAny(e, `:?*"<>|\`):
				t.Errorf("%q: element %q holds a character Windows refuses", name, e)
			case strings.HasSuffix(e, ".") || strings.HasSuffix(e, " "):
				t.Errorf("%q: element %q ends in a dot or a space", name, e)
			case reservedDevice(e):
				t.Errorf("%q: element %q is a device name", name, e)
			}
			for _, c := range []byte(e) {
				if c < 0x20 || c == 0x7f {
					t.Errorf("%q: control character in %q", name, e)
				}
			}
		}
	}
	if got := EntryName("http://127.0.0.1:56805/resources/a.txt"); got != "http/127.0.0.1%3A56805/resources/@a.txt" {
		t.Errorf("EntryName = %q", got)
	}
	if got := EntryName("http://h.example/con/aux.txt"); got != "http/h.example/%63on/@aux.txt" {
		t.Errorf("EntryName = %q", got)
	}
}

// TestCopyPathPortable: a copy's URI path is an RFC 3986 path of
// unreserved characters, sub-delimiters, "@", "/" and escapes — no ":",
// so that a Destination naming files after it gets names every file
// system holds — the same from one publication to the next, and the
// server finds the copy from it (fs.Decode of the path, unescaped).
func TestCopyPathPortable(t *testing.T) {
	allowed := regexp.MustCompile(`^[A-Za-z0-9\-._~!$&'()*+,;=@/%]*$`)
	for _, uri := range []string{
		"http://127.0.0.1:8080/a/b.txt", "https://h.example/odd/sub dir/café über.txt", "http://h/q?a=1&b=2",
		"http://h/100%", "oai:example.org:1", "http://h/CON", "http://h/a/" + strings.Repeat("ü", 120),
	} {
		p := CopyPath(uri)
		if !allowed.MatchString(p) || strings.Contains(p, ":") || p != CopyPath(uri) {
			t.Errorf("CopyPath(%q) = %q", uri, p)
		}
		rel, err := url.PathUnescape(strings.TrimPrefix(p, FilesPath+"/"))
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if got, err := fs.Decode(rel); err != nil || got != uri {
			t.Errorf("the copy of %q at %q is found as %q (%v)", uri, p, got, err)
		}
	}
}
