package publish

import (
	"strings"
	"testing"
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
