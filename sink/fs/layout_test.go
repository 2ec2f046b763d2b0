package fs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

// docExamples returns the "URI → path" lines of the package documentation.
func docExamples(t testing.TB) [][2]string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for line := range strings.Lines(string(src)) {
		line, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "//\t")
		if !ok {
			continue
		}
		if uri, rel, ok := strings.Cut(line, " → "); ok {
			out = append(out, [2]string{uri, rel})
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d examples in doc.go, want the whole list", len(out))
	}
	return out
}

func TestDocExamples(t *testing.T) {
	for _, ex := range docExamples(t) {
		uri, want := ex[0], ex[1]
		t.Run(uri, func(t *testing.T) {
			if got := Encode(uri); got != want {
				t.Errorf("Encode(%q) = %q, want %q as documented", uri, got, want)
			}
			if got, err := Decode(want); err != nil || got != uri {
				t.Errorf("Decode(%q) = %q, %v; want %q", want, got, err, uri)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	const h = "http://example.com/"
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	tests := []struct {
		name, uri, want string
	}{
		{"plain", h + "a/b.txt", "http/example.com/a/@b.txt"},
		{"uppercase kept", "HTTP://Example.COM/A", "HTTP/Example.COM/@A"},
		{"port and user", "http://u:p@h:81/x", "http/u:p@h:81/@x"},
		{"empty authority and path", "http://", "http/@"},
		{"dot authority", "http://../x", "http/%2E%2E/@x"},
		{"dot file names need no escape", h + "a/..", "http/example.com/a/@.."},
		{"dot-dot in a longer name", h + "..a/b..", "http/example.com/..a/@b.."},
		{"NUL and controls", h + "a\x00b/\t\x7f", "http/example.com/a%00b/@%09%7F"},
		{"C1 control", h + "\u0085", "http/example.com/@%C2%85"},
		{"invalid UTF-8", h + "\xff/a\xc3", "http/example.com/%FF/@a%C3"},
		{"surrogate half", h + "\xed\xa0\x80", "http/example.com/@%ED%A0%80"},
		{"reserved ASCII", h + `\"*<>|%`, `http/example.com/@%5C%22%2A%3C%3E%7C%25`},
		{"inner @ kept", h + "a@b/c@d", "http/example.com/a@b/@c@d"},
		{"fragment before query", h + "a#x?y/z", "http/example.com/@a#x?y%2Fz"},
		{"query on authority", "http://h?q=/", "http/@h?q=%2F"},
		{"not a URL: single slash", "http:/x", "_other/@http:%2Fx"},
		{"not a URL: digit first", "1http://x", "_other/@1http:%2F%2Fx"},
		{"not a URL: empty", "", "_other/@"},
		{"not a URL: leading @", "@x", "_other/@%40x"},
		{"255-byte name not cut", h + long("a", 254), "http/example.com/@" + long("a", 254)},
		{"256-byte name cut", h + long("a", 255),
			"http/example.com/@" + long("a", 252) + "%/" + "aaa"},
		{"1000-byte directory", h + long("s", 1000) + "/x",
			"http/example.com/" + long("s", 254) + "%/" + long("s", 254) + "%/" + long("s", 254) + "%/" + long("s", 238) + "/@x"},
		{"cut before a short last piece", h + long("a", 253) + "..",
			"http/example.com/@" + long("a", 252) + "%/" + "a.."},
		{"cut never splits an escape", h + long("a", 252) + "%%",
			"http/example.com/@" + long("a", 252) + "%/%25%25"},
		{"cut never splits a character", h + long("é", 200),
			"http/example.com/@" + long("é", 126) + "%/" + long("é", 74)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Encode(tt.uri)
			if got != tt.want {
				t.Errorf("Encode(%q)\n got %q\nwant %q", tt.uri, got, tt.want)
			}
			checkRel(t, tt.uri, got)
		})
	}
}

// checkRel checks the layout's invariants for one URI and its path.
func checkRel(t *testing.T, uri, rel string) {
	t.Helper()
	if !filepath.IsLocal(rel) || strings.HasPrefix(rel, "/") {
		t.Errorf("Encode(%q) = %q is not local", uri, rel)
	}
	elems := strings.Split(rel, "/")
	if len(elems) < 2 {
		t.Errorf("Encode(%q) = %q has fewer than two levels", uri, rel)
	}
	if elems[0] == tmpDir {
		t.Errorf("Encode(%q) = %q is in the temporary directory", uri, rel)
	}
	for _, e := range elems {
		switch {
		case e == "" || e == "." || e == "..":
			t.Errorf("Encode(%q) has element %q", uri, e)
		case len(e) > maxName:
			t.Errorf("Encode(%q) has a %d-byte element", uri, len(e))
		case !utf8.ValidString(e):
			t.Errorf("Encode(%q) has invalid UTF-8 element %q", uri, e)
		}
		for _, r := range e {
			if r < 0x20 || (0x7f <= r && r <= 0x9f) || r == '\\' {
				t.Errorf("Encode(%q) has element %q with %U", uri, e, r)
			}
		}
	}
	got, err := Decode(rel)
	if err != nil {
		t.Errorf("Decode(Encode(%q)): %v", uri, err)
	} else if got != uri {
		t.Errorf("Decode(Encode(%q)) = %q", uri, got)
	}
}

func TestOddURIsLayout(t *testing.T) {
	seen := map[string]string{}
	for _, uri := range sinktest.OddURIs() {
		rel := Encode(uri)
		checkRel(t, uri, rel)
		if other, dup := seen[rel]; dup {
			t.Errorf("%q and %q both map to %q", uri, other, rel)
		}
		seen[rel] = uri
	}
	for rel, uri := range seen {
		for p := rel; ; {
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
			if other, ok := seen[p]; ok {
				t.Errorf("the file of %q is a directory of %q's path", other, uri)
			}
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []string{
		"",
		"http",
		"http/",
		"/http/h/@a",
		"http/h/a",                 // no file mark
		"http/@h/@a",               // directory with a file mark
		"http//@a",                 // empty element
		"http/h/./@a",              // dot element
		"http/h/../@a",             // dot-dot element
		"http/h/@a%2",              // truncated escape
		"http/h/@a%zz",             // bad escape
		"http/h/@a%2f",             // lower-case hex
		"http/h/@%61",              // needless escape
		"http/h/@a%",               // ends in a cut name
		"http/h/a%/@b",             // a piece that need not be cut
		"http/h/%/%/@",             // fine, checked below as valid
		"ht%74p/h/@a",              // escaped scheme
		"1http/h/@a",               // not a scheme
		"_other/h/@a",              // _other has one level
		"_other/@a/@b",             // two files
		"_other/@http:%2F%2Fh%2Fa", // a URL under _other
		".rsharvest-tmp/@a",        // not a scheme
	}
	for _, rel := range tests {
		t.Run(rel, func(t *testing.T) {
			uri, err := Decode(rel)
			if rel == "http/h/%/%/@" {
				if err != nil || uri != "http://h///" {
					t.Fatalf("Decode(%q) = %q, %v; want http://h///", rel, uri, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode(%q) = %q, want an error", rel, uri)
			}
			if !errors.Is(err, ErrInvalidPath) || !errclass.IsPermanent(err) {
				t.Errorf("Decode(%q) error %v: want permanent, wrapping ErrInvalidPath", rel, err)
			}
		})
	}
}

func FuzzLayout(f *testing.F) {
	for _, uri := range sinktest.OddURIs() {
		f.Add(uri)
	}
	for _, ex := range docExamples(f) {
		f.Add(ex[0])
	}
	dir := f.TempDir()
	s := &FS{dir: dir}
	f.Fuzz(func(t *testing.T, uri string) {
		rel := Encode(uri)
		checkRel(t, uri, rel)
		p := s.Path(uri)
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Errorf("Path(%q) = %q is outside %q", uri, p, dir)
		}
	})
}

func FuzzLayoutPair(f *testing.F) {
	odd := sinktest.OddURIs()
	for i := range odd {
		f.Add(odd[i], odd[(i+1)%len(odd)])
	}
	f.Add("http://h/a", "http://h/a/b")
	f.Add("http://h/a", "http://h/a/")
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == b {
			return
		}
		ra, rb := Encode(a), Encode(b)
		if ra == rb {
			t.Fatalf("%q and %q both map to %q", a, b, ra)
		}
		if strings.HasPrefix(rb, ra+"/") || strings.HasPrefix(ra, rb+"/") {
			t.Fatalf("one of %q (%q) and %q (%q) is a directory of the other", a, ra, b, rb)
		}
	})
}

func FuzzDecode(f *testing.F) {
	for _, uri := range sinktest.OddURIs() {
		f.Add(Encode(uri))
	}
	f.Add("http/h/%/@a%")
	f.Add("_other/@%")
	f.Fuzz(func(t *testing.T, rel string) {
		uri, err := Decode(rel)
		if err == nil && Encode(uri) != rel {
			t.Fatalf("Decode(%q) = %q, but Encode gives %q", rel, uri, Encode(uri))
		}
	})
}

// TestSchemeNamedLikeThePackedDatabase: a URI whose scheme begins as the
// packed layout's database name does ("records.sqlite://…", in any case) is
// a valid URL. Its directory has the scheme's first letter escaped, so the
// mirror that holds it opens again in the file layout (New takes a
// top-level records.sqlite for a packed mirror), and it decodes back.
func TestSchemeNamedLikeThePackedDatabase(t *testing.T) {
	tests := []struct {
		uri string
	}{
		{"records.sqlite://example.com/a"},
		{"records.sqlite://x"},
		{"Records.SQLite-wal://x/y"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			dir := t.TempDir()
			s := newFS(t, dir, Options{})
			put(t, s, tt.uri, "x")
			put(t, s, "http://example.com/ordinary", "y")
			if top := strings.Split(Encode(tt.uri), "/")[0]; strings.HasPrefix(strings.ToLower(top), PackedFile) {
				t.Errorf("Encode(%q) is in the top-level directory %q", tt.uri, top)
			}
			if got, err := Decode(Encode(tt.uri)); err != nil || got != tt.uri {
				t.Errorf("Decode(Encode(%q)) = %q, %v", tt.uri, got, err)
			}
			if err := s.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			again, err := New(dir, Options{})
			if err != nil {
				t.Errorf("reopening a file-layout mirror that holds %q: %v", tt.uri, err)
			} else {
				again.Close(t.Context())
			}
		})
	}
}
