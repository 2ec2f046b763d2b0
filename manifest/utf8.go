package manifest

import (
	"bufio"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/internal/xmlcap"
)

// declEncoding finds the encoding an XML declaration names.
var declEncoding = regexp.MustCompile(`^\s*<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']`)

// UTF8 returns a document read from r as UTF-8, for readers that copy its
// bytes out (as the OAI-PMH reader copies each record's metadata) and so
// need them in one encoding: a UTF-16 document (a byte order mark, or its
// shape) is transcoded; one whose XML declaration names another encoding
// (ISO-8859-1, windows-1252, … as xmlcap.CharsetReader reads labels) is
// transcoded from it — unless its first 64 KB are valid UTF-8 holding
// non-ASCII text, the common slip of a server that declares Latin-1 and
// sends UTF-8, which is then read as UTF-8. note says what was done ("":
// nothing, the document is UTF-8). The XML declaration is left as it is:
// a decoder reading the result must take every label as UTF-8. An
// encoding that cannot be decoded is an error naming its label.
func UTF8(r io.Reader) (out io.Reader, note string, err error) {
	src, sniffed := sniffEncoding(r)
	if sniffed != "" {
		if sniffed == "UTF-8" {
			return src, "", nil
		}
		return src, "transcoded from " + sniffed, nil
	}
	br := bufio.NewReaderSize(src, 64<<10)
	head, _ := br.Peek(64 << 10)
	m := declEncoding.FindSubmatch(head)
	if m == nil {
		return br, "", nil
	}
	label := string(m[1])
	if l := strings.ToLower(label); l == "utf-8" || l == "utf8" || l == "us-ascii" || l == "ascii" {
		return br, "", nil
	}
	if utf8.Valid(trimPartialRune(head)) && !isASCII(head) {
		return br, "declared " + label + " but UTF-8: read as UTF-8", nil
	}
	dec, err := xmlcap.CharsetReader(label, br)
	if err != nil {
		return nil, "", err
	}
	return dec, "transcoded from " + label, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b (a
// peek may cut one).
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
