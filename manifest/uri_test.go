package manifest

import (
	"net/url"
	"strings"
	"testing"
)

// TestToURI: IRIs and what producers write as locs become URIs; URIs and
// their escapes are left alone.
func TestToURI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://example.org/a/b.txt?x=1&y=2#f", "http://example.org/a/b.txt?x=1&y=2#f"},
		{"http://127.0.0.1:8080/resources/odd/sub dir/café über.txt", "http://127.0.0.1:8080/resources/odd/sub%20dir/caf%C3%A9%20%C3%BCber.txt"},
		{"http://example.org/already%20encoded/caf%C3%A9", "http://example.org/already%20encoded/caf%C3%A9"},
		{"http://example.org/100%/50%2", "http://example.org/100%25/50%252"},
		{"http://example.org/{a}|<b>\"c\"\\^`", "http://example.org/%7Ba%7D%7C%3Cb%3E%22c%22%5C%5E%60"},
		{"http://example.org/tab\there\x7f", "http://example.org/tab%09here%7F"},
		{"http://example.org/bad\xffutf8", "http://example.org/bad%FFutf8"},
		{"oai:example.org:1", "oai:example.org:1"},
		{"http://例え.jp/パス", "http://%E4%BE%8B%E3%81%88.jp/%E3%83%91%E3%82%B9"},
		{"", ""},
	} {
		got := ToURI(tc.in)
		if got != tc.want {
			t.Errorf("ToURI(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := ToURI(got); again != got {
			t.Errorf("ToURI(%q) = %q: not left alone", got, again)
		}
		if _, err := url.Parse(got); err != nil {
			t.Errorf("ToURI(%q) = %q: %v", tc.in, got, err)
		}
	}
}

// FuzzToURI: whatever the input, the output is left alone by ToURI, holds
// only printable ASCII, and decodes back to the input when the input had no
// escape of its own.
func FuzzToURI(f *testing.F) {
	for _, s := range []string{"http://x/a b", "http://x/caf%C3%A9", "100%", "\x00\xff", "http://例え.jp/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u := ToURI(s)
		if ToURI(u) != u {
			t.Fatalf("ToURI(%q) = %q, changed again", s, u)
		}
		for i := 0; i < len(u); i++ {
			if u[i] <= ' ' || u[i] >= 0x7f {
				t.Fatalf("ToURI(%q) = %q: byte %#x at %d", s, u, u[i], i)
			}
		}
		if !strings.Contains(s, "%") {
			if back, err := url.PathUnescape(u); err != nil || back != s {
				t.Fatalf("ToURI(%q) = %q, which decodes to %q (%v)", s, u, back, err)
			}
		}
	})
}
