package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/sink/fs"
)

// The reserved parts of the key layout; doc.go explains them.
const (
	// maxKey is the longest object key S3 and MinIO accept, in bytes.
	maxKey = 1024
	// hashedDir holds the objects of URIs whose key would be too long (or
	// not storable as it is). fs.Encode never starts a path with "_long": a
	// scheme cannot contain "_", and non-URLs go to "_other".
	hashedDir = "_long"
	// uriSuffix names the object holding the URI of a hashed object.
	uriSuffix = ".uri"
	// maxPrefix bounds the key prefix so that every hashed key and its URI
	// object fit in maxKey.
	maxPrefix = 512
	// maxSegment is the longest segment of a key MinIO stores (a file
	// name on its disks), as fs.Encode keeps every segment of a URI's key.
	maxSegment = 255
	// sinkMarker is the object each sink writes at its prefix when it
	// opens: a sink at a prefix under another's is skipped by the other's
	// Walk. No key of a URI ends in it (a URI's last segment begins with
	// "@"), and it sorts before every first segment a sink writes (a
	// scheme, "_other", "_long" or an escape's "%"), so a listing meets a
	// sink's marker before its objects.
	sinkMarker = "!rsharvest-sink"
	// dirSuffix ends the names MinIO keeps its directory objects under:
	// it lists a name ending so as a directory ("KEY/"), and a segment
	// ending so is not stored as it is.
	dirSuffix = "__XLDIR__"
)

// objectKey returns the key of uri's object under prefix (empty, or ending
// in "/"), and whether it is a hashed key (see doc.go).
func objectKey(prefix, uri string) (key string, hashed bool) {
	key = prefix + fs.Encode(uri)
	if len(key) <= maxKey && storable(key) {
		return key, false
	}
	return hashedKey(prefix, uri), true
}

// hashedKey is PREFIX + "_long/" + the hex SHA-256 of uri.
func hashedKey(prefix, uri string) string {
	sum := sha256.Sum256([]byte(uri))
	return prefix + hashedDir + "/" + hex.EncodeToString(sum[:])
}

// keyKind tells what an object key found under the prefix is.
type keyKind int

const (
	foreignKey keyKind = iota // not written by this sink
	plainKey                  // PREFIX + fs.Encode(uri)
	hashedMain                // PREFIX + "_long/" + hex: a hashed object
	hashedURI                 // PREFIX + "_long/" + hex + ".uri": its URI
)

// parseKey classifies key, which starts with prefix. For a plainKey it
// returns the URI; for a foreignKey, the reason.
func parseKey(prefix, key string) (keyKind, string, error) {
	rel, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return foreignKey, "", errors.New("outside the prefix")
	}
	if name, ok := strings.CutPrefix(rel, hashedDir+"/"); ok {
		base, isURI := strings.CutSuffix(name, uriSuffix)
		switch {
		case !isHex256(base):
			return foreignKey, "", errors.New("not a hashed key")
		case isURI:
			return hashedURI, "", nil
		}
		return hashedMain, "", nil
	}
	uri, err := fs.Decode(rel)
	if err != nil {
		return foreignKey, "", err
	}
	if got, _ := objectKey(prefix, uri); got != key {
		return foreignKey, "", errors.New("not in canonical form")
	}
	return plainKey, uri, nil
}

func isHex256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// storable reports whether S3 stores (as MinIO does) key under exactly this
// name: valid UTF-8 without NUL, no empty segment, and no segment that is
// "." or ".." once surrounding white space is trimmed (MinIO rejects those;
// it trims bytes as unicode.IsSpace would runes). fs.Encode's keys only
// fail the last test, for segments like " .." .
func storable(key string) bool {
	if key == "" || !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return false
	}
	for seg := range strings.SplitSeq(key, "/") {
		trimmed := trimSpaceBytes(seg)
		if seg == "" || trimmed == "." || trimmed == ".." ||
			len(seg) >= len(dirSuffix) && strings.EqualFold(seg[len(seg)-len(dirSuffix):], dirSuffix) {
			return false
		}
	}
	return true
}

// trimSpaceBytes trims leading and trailing bytes that are white space
// when read as runes, as MinIO does when it checks a path.
func trimSpaceBytes(s string) string {
	i, j := 0, len(s)
	for i < j && unicode.IsSpace(rune(s[i])) {
		i++
	}
	for j > i && unicode.IsSpace(rune(s[j-1])) {
		j--
	}
	return s[i:j]
}

// cleanPrefix turns the path of a sink spec into a key prefix: no leading
// "/", and a trailing "/" unless it is empty.
func cleanPrefix(p string) (string, error) {
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return "", nil
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	switch {
	case len(p) > maxPrefix:
		return "", fmt.Errorf("prefix is %d bytes long, want at most %d", len(p), maxPrefix)
	case !storable(strings.TrimSuffix(p, "/")):
		return "", errors.New(`prefix must be valid UTF-8 without NUL, empty, "." or ".." segments`)
	}
	for seg := range strings.SplitSeq(strings.TrimSuffix(p, "/"), "/") {
		if len(seg) > maxSegment {
			return "", fmt.Errorf("prefix has a segment of %d bytes, want at most %d (what S3 servers store)", len(seg), maxSegment)
		}
	}
	return p, nil
}

// escapeMeta makes s a metadata value: every byte outside the printable
// ASCII range 0x21–0x7E, and "%", is written as "%" and two upper-case hex
// digits. unescapeMeta reverses it.
func escapeMeta(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unescapeMeta reverses escapeMeta.
func unescapeMeta(s string) (string, error) { return url.PathUnescape(s) }
