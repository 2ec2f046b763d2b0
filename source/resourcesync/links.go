package resourcesync

import (
	"html"
	"net/url"
	"strings"
)

// relResourceSync is the link relation of spec §6.3.3.
const relResourceSync = "resourcesync"

// hasRel reports whether a rel value (space-separated relation types)
// includes want, ignoring case.
func hasRel(rel, want string) bool {
	for _, r := range strings.Fields(rel) {
		if strings.EqualFold(r, want) {
			return true
		}
	}
	return false
}

// robotsSitemaps returns the URLs of the Sitemap: lines of a robots.txt,
// resolved against base, in order and without duplicates.
func robotsSitemaps(page string, base *url.URL) []string {
	var out []string
	seen := map[string]bool{}
	for line := range strings.Lines(page) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		k, v, ok := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		if !ok || v == "" || !strings.EqualFold(strings.TrimSpace(k), "sitemap") {
			continue
		}
		if u, ok := resolve(base, v); ok && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// headerLink is one link of an HTTP Link header (RFC 8288).
type headerLink struct {
	target string
	params map[string]string // names in lower case; the first of a repeated name
}

// linkHeaderTargets returns the targets of the rel="resourcesync" links in
// Link header values, resolved against base (the response's URL). Links
// with an anchor naming another resource are about that resource and are
// ignored.
func linkHeaderTargets(values []string, base *url.URL) []string {
	var out []string
	for _, v := range values {
		for _, l := range parseLinkHeader(v) {
			if !hasRel(l.params["rel"], relResourceSync) {
				continue
			}
			if a, ok := l.params["anchor"]; ok && a != "" {
				if au, ok := resolve(base, a); !ok || au != base.String() {
					continue
				}
			}
			if u, ok := resolve(base, l.target); ok {
				out = append(out, u)
			}
		}
	}
	return out
}

// parseLinkHeader parses one Link header value: comma-separated
// "<target>; name=value; name="quoted value"" links. It is lenient: what it
// cannot make sense of is skipped up to the next link.
func parseLinkHeader(v string) []headerLink {
	var links []headerLink
	i := 0
	for {
		j := strings.IndexByte(v[i:], '<')
		if j < 0 {
			return links
		}
		i += j + 1
		k := strings.IndexByte(v[i:], '>')
		if k < 0 {
			return links
		}
		l := headerLink{target: strings.TrimSpace(v[i : i+k]), params: map[string]string{}}
		i += k + 1
		for {
			i = skipSpace(v, i)
			if i >= len(v) || v[i] == ',' {
				break
			}
			if v[i] != ';' {
				i = skipToComma(v, i)
				break
			}
			i = skipSpace(v, i+1)
			st := i
			for i < len(v) && !strings.ContainsRune("=;, \t", rune(v[i])) {
				i++
			}
			name := strings.ToLower(v[st:i])
			i = skipSpace(v, i)
			val := ""
			if i < len(v) && v[i] == '=' {
				i = skipSpace(v, i+1)
				if i < len(v) && v[i] == '"' {
					val, i = quotedString(v, i)
				} else {
					st := i
					for i < len(v) && !strings.ContainsRune(";, \t", rune(v[i])) {
						i++
					}
					val = v[st:i]
				}
			}
			if _, dup := l.params[name]; name != "" && !dup {
				l.params[name] = val
			}
		}
		links = append(links, l)
	}
}

// quotedString reads the quoted-string starting at v[i] == '"' and returns
// its value and the index after it (len(v) when unterminated).
func quotedString(v string, i int) (string, int) {
	var b strings.Builder
	for i++; i < len(v); i++ {
		switch c := v[i]; c {
		case '"':
			return b.String(), i + 1
		case '\\':
			if i+1 < len(v) {
				i++
				b.WriteByte(v[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), i
}

// skipToComma returns the index of the next comma outside a quoted string.
func skipToComma(v string, i int) int {
	for i < len(v) && v[i] != ',' {
		if v[i] == '"' {
			_, i = quotedString(v, i)
			continue
		}
		i++
	}
	return i
}

func skipSpace(v string, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	return i
}

// htmlTargets returns the href of every <link> in an HTML page whose rel
// includes resourcesync, resolved against the page's first <base href>
// or, without one, against base (the page's URL).
func htmlTargets(page []byte, base *url.URL) []string {
	var hrefs []string
	docBase, sawBase := base, false
	scanTags(string(page), func(name string, attrs map[string]string) {
		switch name {
		case "base":
			if h, ok := attrs["href"]; ok && !sawBase {
				sawBase = true
				if u, err := base.Parse(strings.TrimSpace(h)); err == nil {
					docBase = u
				}
			}
		case "link":
			if h := attrs["href"]; h != "" && hasRel(attrs["rel"], relResourceSync) {
				hrefs = append(hrefs, h)
			}
		}
	})
	var out []string
	seen := map[string]bool{}
	for _, h := range hrefs {
		if u, ok := resolve(docBase, h); ok && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// isRawText reports whether an element's content is text, not markup: a
// "<link" inside it is not a tag.
func isRawText(name string) bool {
	switch name {
	case "script", "style", "textarea", "title", "xmp", "noembed", "noframes", "iframe":
		return true
	}
	return false
}

// scanTags calls fn for every complete start tag of an HTML page, in
// order, with its name and attributes: names in lower case, values with
// character references decoded, the first of a repeated attribute kept.
// Comments, declarations, processing instructions, end tags and the
// content of raw-text elements (script, style, …) are skipped, and so is
// an incomplete tag at the end of a truncated page. It is a tokenizer for
// finding <link> and <base>, not a parser: it never fails.
func scanTags(s string, fn func(name string, attrs map[string]string)) {
	lower := asciiLower(s)
	i := 0
	for {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return
		}
		i += j
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "<!--"):
			k := strings.Index(rest[4:], "-->")
			if k < 0 {
				return
			}
			i += 4 + k + 3
			continue
		case strings.HasPrefix(rest, "<!"), strings.HasPrefix(rest, "<?"), strings.HasPrefix(rest, "</"):
			k := strings.IndexByte(rest, '>')
			if k < 0 {
				return
			}
			i += k + 1
			continue
		case len(rest) < 2 || !isASCIILetter(rest[1]):
			i++ // a lone '<' in text
			continue
		}
		n := 1
		for n < len(rest) && !isHTMLSpace(rest[n]) && rest[n] != '/' && rest[n] != '>' {
			n++
		}
		name := lower[i+1 : i+n]
		attrs, end, ok := parseAttrs(rest, n)
		if !ok {
			return
		}
		i += end
		fn(name, attrs)
		if isRawText(name) {
			k := strings.Index(lower[i:], "</"+name)
			if k < 0 {
				return
			}
			i += k
		}
	}
}

// parseAttrs parses the attributes of the start tag in s from index i (just
// after its name) to its '>'. It returns them, the index after the '>', and
// false when the tag is incomplete.
func parseAttrs(s string, i int) (map[string]string, int, bool) {
	attrs := map[string]string{}
	for {
		for i < len(s) && (isHTMLSpace(s[i]) || s[i] == '/') {
			i++
		}
		if i >= len(s) {
			return nil, 0, false
		}
		if s[i] == '>' {
			return attrs, i + 1, true
		}
		st := i
		i++ // a name may start with '='
		for i < len(s) && !isHTMLSpace(s[i]) && s[i] != '/' && s[i] != '>' && s[i] != '=' {
			i++
		}
		name := asciiLower(s[st:i])
		for i < len(s) && isHTMLSpace(s[i]) {
			i++
		}
		val := ""
		if i < len(s) && s[i] == '=' {
			i++
			for i < len(s) && isHTMLSpace(s[i]) {
				i++
			}
			if i >= len(s) {
				return nil, 0, false
			}
			switch q := s[i]; q {
			case '"', '\'':
				k := strings.IndexByte(s[i+1:], q)
				if k < 0 {
					return nil, 0, false
				}
				val = s[i+1 : i+1+k]
				i += k + 2
			default:
				st := i
				for i < len(s) && !isHTMLSpace(s[i]) && s[i] != '>' {
					i++
				}
				val = s[st:i]
			}
		}
		if _, dup := attrs[name]; !dup {
			attrs[name] = html.UnescapeString(val)
		}
	}
}

func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

func isASCIILetter(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

// asciiLower lower-cases ASCII letters only, byte by byte, so byte offsets
// are kept whatever the encoding.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
