package state

import (
	"net"
	"net/url"
	"strings"
)

// SourceKey is the name of the source at raw in the state — and in the
// logs, the reports and everything published: its URL normalised as RFC
// 3986 (sections 6.2.2 and 6.2.3) does, and without its password, so that
// every spelling of one source is one identity. The scheme and the host
// are lowercased, the scheme's default port is dropped, an empty path is
// "/", dot segments are removed, percent-encodings are uppercased and those
// of unreserved characters decoded: HTTP://Host:80/a/./b/%7euser and
// http://host/a/b/~user are one source. A URL with credentials,
// https://user:secret@host/, is https://user@host/. What is not an
// absolute URL with a host is returned as it is, but for the password of
// whatever looks like its user info (a password that needs escaping, such
// as "100%sure", makes a URL that does not parse).
func SourceKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.Host == "" {
		if r := withoutPassword(raw); r != raw {
			return SourceKey(r)
		}
		return raw
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.User(u.User.Username())
		}
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == defaultPort(u.Scheme) {
		port = ""
	}
	switch {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u.Host = "[" + host + "]"
	default:
		u.Host = host
	}
	p := removeDotSegments(normalPercent(u.EscapedPath()))
	if p == "" {
		p = "/"
	}
	if unescaped, err := url.PathUnescape(p); err == nil {
		u.Path, u.RawPath = unescaped, p
	}
	u.RawQuery = normalPercent(u.RawQuery)
	key := u.String()
	if k, err := url.Parse(key); err != nil || k.Host == "" {
		// Normalised away to no host ("a://:/:@" is "a:///:@"): the key
		// is what such a URL's is, so that the key of a key is itself.
		return SourceKey(key)
	}
	return key
}

// SameSource reports whether a and b name one source with the same
// credentials: one SourceKey, one password (a spelling of the URL that
// differs, HTTP://Host:80/ for http://host/, is the same source).
func SameSource(a, b string) bool {
	if a == b {
		return true
	}
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil || SourceKey(a) != SourceKey(b) {
		return false
	}
	pa, _ := ua.User.Password()
	pb, _ := ub.User.Password()
	return pa == pb
}

// withoutPassword returns raw, a URL that may not parse, without the
// password of its user info: what comes before the last '@' ahead of any
// query or fragment (a password may hold '/' or '@'), from its first ':'
// on. When no '@' comes before a '?' or '#' but a ':' does, the '?' or
// '#' is taken for part of a password ("user:se#cret@host/"), and the
// user info ends at the last '@': a URL that does not parse may lose more
// than its password, never show it.
func withoutPassword(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if ok {
		scheme += "://"
	} else {
		scheme, rest = "", raw // "user:secret@host/x": no scheme given
	}
	end := strings.IndexAny(rest, "?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 && strings.Contains(rest[:end], ":") {
		at = strings.LastIndex(rest, "@")
	}
	if at < 0 {
		return raw
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + user + rest[at:]
}

// defaultPort is the port a URL of scheme names when it names none ("" for
// any port when a scheme has none rsharvest knows; ":" alone is dropped too).
func defaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	case "ftp":
		return "21"
	}
	return ""
}

// normalPercent returns s with its percent-encodings in upper case and
// those of unreserved characters (RFC 3986 section 2.3) decoded. A '%'
// that begins no percent-encoding is itself encoded (%25), so that a
// character decoded after it cannot make a new one ("%0%61" is "%250a",
// not "%0a"): normalising twice gives what normalising once does.
func normalPercent(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			b.WriteString("%25")
			continue
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		if isUnreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteString(strings.ToUpper(s[i : i+3]))
		}
		i += 2
	}
	return b.String()
}

// removeDotSegments is RFC 3986's remove_dot_segments (section 5.2.4).
func removeDotSegments(in string) string {
	var out []string
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"), in == "/..":
			in = "/" + in[min(len(in), 4):]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			seg := in
			if j := strings.IndexByte(in[1:], '/'); j >= 0 {
				seg = in[:j+1]
			}
			out = append(out, seg)
			in = in[len(seg):]
		}
	}
	return strings.Join(out, "")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}
