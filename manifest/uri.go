package manifest

import "strings"

// ToURI maps an IRI, or any string a producer wrote as a loc or href, to
// an RFC 3986 URI as RFC 3987 (section 3.1) maps IRIs: every byte that may
// not stand in a URI — those of non-ASCII characters (their UTF-8 bytes),
// bytes that are not UTF-8, spaces and other controls, and `"<>\^`{|}` —
// is percent-encoded, and a "%" that does not begin an escape becomes
// "%25". What is already a URI is left as it is (ToURI(ToURI(s)) ==
// ToURI(s)), and so is every escape already written: the consumer of a
// republished document reads the same resource the origin named.
func ToURI(s string) string {
	i := 0
	for i < len(s) && !mustEncode(s, i) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if mustEncode(s, i) {
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[s[i]>>4])
			b.WriteByte(hex[s[i]&15])
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mustEncode reports whether byte i of s may not stand as it is in a URI.
func mustEncode(s string, i int) bool {
	c := s[i]
	switch {
	case c <= ' ' || c >= 0x7f:
		return true
	case c == '%':
		return i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])
	}
	return strings.IndexByte(`"<>\^`+"`{|}", c) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
