package sinktest

import "strings"

// OddURIs returns the resource identities every sink must keep apart and
// give back exactly: queries, fragments, escapes, raw spaces and non-ASCII
// text, very long segments and URIs, dot segments, empty segments, case
// and scheme variants, prefixes of one another ("…/a", "…/a/", "…/a/b"),
// strings that are not URLs, invalid UTF-8, control characters and NUL.
// The slice is new on every call; callers may use it as fuzz seeds.
func OddURIs() []string {
	const h = "http://example.com/"
	return []string{
		// Queries and fragments.
		h + "a?a=1&b=2",
		h + "a?b=2&a=1",
		h + "a#frag",
		h + "a?x=1#frag",
		h + "a?",
		h + "a#",
		h + "?only=query",
		h + "q?path=/x/../y",
		h + "q?path=%2Fx",
		// Escapes stay escapes: %2F is not "/", and the case of hex digits matters.
		h + "a%2Fb",
		h + "a%2fb",
		h + "a%20b",
		h + "a b",
		h + "%",
		h + "%%",
		h + "100%",
		h + "%41",
		h + "A",
		// Raw spaces and non-ASCII text, as real producers publish them.
		h + "sub dir/café über.txt",
		h + "sub dir/cafe\u0301 über.txt", // the same name, decomposed
		h + "日本語/ファイル.txt",
		h + " leading and trailing ",
		// Prefixes of one another.
		h + "a",
		h + "a/",
		h + "a/b",
		h + "a/b/",
		h + "a/b/c",
		h + "a//b",
		h + "a/@",
		h + "@a",
		h + "a%",
		// Dot segments are part of the identity; they must not escape or collide.
		h + "x/../y",
		h + "y",
		h + "./y",
		h + "x/./y",
		h + "..",
		h + "../../../../etc/passwd",
		h + "x/..",
		h + ".../y",
		h + ".hidden",
		"http://../x",
		"http://./x",
		"http:///x",
		"http://",
		// Case, host and scheme variants.
		"http://EXAMPLE.com/a",
		"HTTP://example.com/a",
		"http://example.com:8080/a",
		"http://user:pw@example.com/a",
		"https://example.com/a",
		"ftp://example.com/a",
		"http://example.com",
		"http://example.com?x",
		"http://[::1]:80/a",
		// Names special to some filesystems or to the sinks' own bookkeeping.
		h + "back\\slash",
		h + `quote"star*lt<gt>pipe|`,
		h + "CON",
		h + "nul.txt",
		h + "trailing.",
		h + ".rsharvest-tmp/x",
		h + "_other/x",
		".rsharvest-tmp",
		"_other",
		"_other://x",
		// Very long: a 1000-byte segment, a 5000-byte URI in one segment and
		// in many, long multi-byte and escaped segments, a long host.
		h + strings.Repeat("s", 1000) + "/x",
		h + strings.Repeat("L", 5000-len(h)),
		h + strings.Repeat("seg/", (5000-len(h))/4),
		h + strings.Repeat("é", 700),
		h + strings.Repeat("%", 400),
		h + strings.Repeat("a", 254) + "..",
		"http://" + strings.Repeat("h", 300) + "/a",
		strings.Repeat("z", 300) + "://x",
		// Not URLs at all.
		"urn:x:y",
		"urn:isbn:0451450523",
		"mailto:someone@example.com",
		"",
		" ",
		"a",
		"/",
		"/etc/passwd",
		"../../x",
		".",
		"..",
		"C:\\Windows\\win.ini",
		"http:/x",
		"://x",
		// Invalid UTF-8, control characters, NUL.
		"\xff\xfe",
		h + "\xff",
		h + "\xc3",
		h + "\xed\xa0\x80", // an encoded surrogate half
		h + "\x00",
		"nul\x00byte",
		h + "a\x00/b",
		h + "tab\tnewline\ncr\r",
		h + "del\x7f",
		h + "c1\u0085\u009b",
		h + "bidi\u202eetxt.exe",
		"ctl\x01\x1f",
	}
}
