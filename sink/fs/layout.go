package fs

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/errclass"
)

// The reserved parts of the layout; doc.go explains them.
const (
	// fileMark starts every resource file name. A literal "@" at the start
	// of a name is escaped, so only the pieces of a cut file name start
	// with it among directory names.
	fileMark = "@"
	// contMark ends every piece of a name that was cut because it is too
	// long. An escape is "%XX", so a name never otherwise ends in "%".
	contMark = "%"
	// emptyDir is the directory name of an empty URI piece ("//" in a path).
	emptyDir = "%"
	// otherDir is the top-level directory of URIs without "scheme://". A
	// scheme cannot contain "_", so no URL maps there.
	otherDir = "_other"
	// tmpDir holds files being written. It starts with ".", which neither a
	// scheme nor otherDir does, so no URI maps into it.
	tmpDir = ".rsharvest-tmp"
	// sinkMark is the directory each sink makes in its tmpDir when it
	// opens: a directory holding tmpDir/sinkMark, under a sink's own, is
	// another sink's, which Walk skips. A URI's path may have a directory
	// named as tmpDir below the root, but no path Encode writes has a name
	// beginning "%r" (an escape is "%XX", hexadecimal; a cut is at an
	// escape's start).
	sinkMark = "%rsharvest-sink"

	// maxName is the longest file or directory name written (the limit of
	// ext4, XFS, btrfs, tmpfs, APFS and NTFS).
	maxName = 255
	// maxPiece leaves room for contMark in a cut name.
	maxPiece = maxName - len(contMark)
	// minLastPiece keeps the last piece of a cut name from being "." or "..".
	minLastPiece = 3
)

// escapeASCII lists the printable ASCII characters that are always escaped:
// the escape character itself, the path separator, and the characters that
// Windows forbids and shells treat specially which URLs rarely contain.
const escapeASCII = `%/\"*<>|`

// ErrInvalidPath is wrapped by Decode's errors: the path is not one Encode
// produces.
var ErrInvalidPath = errors.New("not a path of the rsharvest layout")

// Encode maps a URI, which may be any string, to the path of its file
// relative to the sink's directory, with "/" separators. The mapping is
// described in the package documentation. It is deterministic and
// injective; the path never contains "." or ".." elements, empty elements or
// elements over 255 bytes, never starts with "/", and no URI's file path is
// a directory of another URI's path. Decode reverses it.
func Encode(uri string) string {
	var b strings.Builder
	b.Grow(len(uri) + len(uri)/8 + 16)
	scheme, rest, ok := splitURL(uri)
	if !ok {
		writeName(&b, otherDir)
		b.WriteByte('/')
		writeName(&b, fileName(uri))
		return b.String()
	}
	hier, tail := rest, ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		hier, tail = rest[:i], rest[i:]
	}
	writeName(&b, schemeName(scheme))
	for {
		seg, more, found := strings.Cut(hier, "/")
		b.WriteByte('/')
		if !found {
			writeName(&b, fileName(seg+tail))
			return b.String()
		}
		writeName(&b, dirName(seg))
		hier = more
	}
}

// schemeName is the directory name of a URL's scheme: the scheme itself
// (its characters never need escaping), but for one that begins, in any
// case (some file systems fold it), as the packed layout's database does:
// its first letter is escaped, so that no URI's directory is taken for
// that database or its journals (see New, NewPacked).
func schemeName(scheme string) string {
	if len(scheme) >= len(PackedFile) && strings.EqualFold(scheme[:len(PackedFile)], PackedFile) {
		return fmt.Sprintf("%%%02X", scheme[0]) + scheme[1:]
	}
	return scheme
}

// Decode reverses Encode: it returns the URI whose file is at rel (relative
// to the sink's directory, "/" separators). For a rel that Encode does not
// produce for any URI, it returns a permanent error wrapping ErrInvalidPath,
// so that Decode(rel) succeeds exactly when Encode(Decode(rel)) == rel.
func Decode(rel string) (string, error) {
	names, err := joinPieces(rel)
	if err != nil {
		return "", invalid(rel, err.Error())
	}
	if len(names) < 2 {
		return "", invalid(rel, "want at least two levels")
	}
	last := names[len(names)-1]
	if !strings.HasPrefix(last, fileMark) {
		return "", invalid(rel, "file name does not start with "+fileMark)
	}
	file, err := unescape(last[len(fileMark):])
	if err != nil {
		return "", invalid(rel, err.Error())
	}
	var uri string
	if names[0] == otherDir && len(names) == 2 {
		uri = file
	} else {
		var b strings.Builder
		for i, name := range names[:len(names)-1] {
			seg := ""
			if name != emptyDir {
				if seg, err = unescape(name); err != nil {
					return "", invalid(rel, err.Error())
				}
			}
			b.WriteString(seg)
			if i == 0 {
				b.WriteString("://")
			} else {
				b.WriteByte('/')
			}
		}
		b.WriteString(file)
		uri = b.String()
	}
	if Encode(uri) != rel {
		return "", invalid(rel, "not in canonical form")
	}
	return uri, nil
}

func invalid(rel, why string) error {
	if len(rel) > 200 {
		rel = rel[:200] + "…"
	}
	return errclass.Permanentf("fs: decode %q: %w: %s", rel, ErrInvalidPath, why)
}

// splitURL splits "scheme://rest" (scheme as in RFC 3986: a letter, then
// letters, digits, "+", "-" or ".").
func splitURL(uri string) (scheme, rest string, ok bool) {
	for i := 0; i < len(uri); i++ {
		c := uri[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			if strings.HasPrefix(uri[i:], "://") {
				return uri[:i], uri[i+3:], true
			}
			return "", "", false
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// dirName is the escaped name of a directory for one URI piece.
func dirName(seg string) string {
	switch seg {
	case "":
		return emptyDir
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	var b strings.Builder
	escape(&b, seg)
	return b.String()
}

// fileName is the escaped name of a resource file for the last URI piece.
func fileName(seg string) string {
	var b strings.Builder
	b.Grow(len(fileMark) + len(seg))
	b.WriteString(fileMark)
	escape(&b, seg)
	return b.String()
}

// escape writes s with the bytes the layout reserves written as %XX.
func escape(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || mustEscape(r, i) {
			for j := i; j < i+n; j++ {
				writeEscaped(b, s[j])
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// mustEscape reports whether the valid rune r at byte offset i of a piece is
// escaped: C0 and C1 control characters, DEL, escapeASCII, and a leading "@".
func mustEscape(r rune, i int) bool {
	switch {
	case r < 0x20 || (0x7f <= r && r <= 0x9f):
		return true
	case r == '@':
		return i == 0
	case r < utf8.RuneSelf:
		return strings.IndexByte(escapeASCII, byte(r)) >= 0
	}
	return false
}

func writeEscaped(b *strings.Builder, c byte) {
	const hex = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&0xf])
}

// writeName writes an escaped name, cut into pieces of at most maxPiece
// bytes, each but the last followed by contMark and a "/", when it is longer
// than maxName. A cut never falls inside an escape or a UTF-8 sequence, and
// the last piece has at least minLastPiece bytes.
func writeName(b *strings.Builder, name string) {
	if len(name) <= maxName {
		b.WriteString(name)
		return
	}
	var cuts []int // end offsets of every piece but the last
	start, end := 0, 0
	for end < len(name) {
		n := tokenLen(name[end:])
		if end+n-start > maxPiece {
			cuts = append(cuts, end)
			start = end
		}
		end += n
	}
	if last := cuts[len(cuts)-1]; len(name)-last < minLastPiece {
		// Move whole tokens from the piece before into the last one.
		prev := 0
		if len(cuts) > 1 {
			prev = cuts[len(cuts)-2]
		}
		for len(name)-last < minLastPiece {
			last = lastTokenStart(name, prev, last)
		}
		cuts[len(cuts)-1] = last
	}
	start = 0
	for _, c := range cuts {
		b.WriteString(name[start:c])
		b.WriteString(contMark)
		b.WriteByte('/')
		start = c
	}
	b.WriteString(name[start:])
}

// tokenLen is the length of the escape or UTF-8 sequence s starts with.
func tokenLen(s string) int {
	if s[0] == '%' {
		return min(3, len(s))
	}
	_, n := utf8.DecodeRuneInString(s)
	return n
}

// lastTokenStart is the offset of the last token of name[from:to].
func lastTokenStart(name string, from, to int) int {
	last := from
	for i := from; i < to; i += tokenLen(name[i:]) {
		last = i
	}
	return last
}

// joinPieces splits rel into its elements and joins the pieces of cut names.
func joinPieces(rel string) ([]string, error) {
	var names []string
	var cur strings.Builder
	cut := false
	for elem := range strings.SplitSeq(rel, "/") {
		if elem == "" {
			return nil, errors.New("empty element")
		}
		if elem != emptyDir && strings.HasSuffix(elem, contMark) {
			cur.WriteString(elem[:len(elem)-len(contMark)])
			cut = true
			continue
		}
		cur.WriteString(elem)
		names = append(names, cur.String())
		cur.Reset()
		cut = false
	}
	if cut {
		return nil, errors.New("ends in a cut name")
	}
	return names, nil
}

// unescape decodes %XX escapes (upper- or lower-case hex); a truncated or
// malformed escape is an error.
func unescape(s string) (string, error) { return url.PathUnescape(s) }
