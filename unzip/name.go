package unzip

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// flagUTF8 is general-purpose flag bit 11 (the "language encoding flag"):
// the name is UTF-8.
const flagUTF8 = 0x800

// EntryKey is the key a ZIP entry is known by, given its name as stored and
// its general-purpose flags: an entry name is only ever matched against
// manifest paths (rsharvest never writes a file by an entry's name), and
// producers write names differently. A name without the UTF-8 flag that is
// not valid UTF-8 is decoded as CP437, as APPNOTE 4.4.4 says; then every
// backslash becomes a slash (DSpace on Windows writes its platform
// separator) and one leading slash is removed (DSpace writes
// "/resources/…"). Nothing else is cleaned: what is unsafe or ambiguous
// after this is refused (see unsafeName, and duplicate names). A name with
// the UTF-8 flag is taken as it is, valid UTF-8 or not.
//
// Every name read from an archive (central directory and local headers
// alike) becomes a key through this one function, so that Open's Archive
// and LocalScanner name an entry the same way.
func EntryKey(raw []byte, flags uint16) string {
	s := string(raw)
	if flags&flagUTF8 == 0 && !utf8.ValidString(s) {
		if b, err := charmap.CodePage437.NewDecoder().Bytes(raw); err == nil {
			s = string(b)
		}
	}
	return PathKey(s)
}

// PathKey is the key a manifest rs:md path is matched by, as EntryKey for
// an entry: backslashes become slashes and one leading slash is removed.
func PathKey(p string) string {
	if strings.IndexByte(p, '\\') >= 0 {
		p = strings.ReplaceAll(p, `\`, "/")
	}
	return strings.TrimPrefix(p, "/")
}

// recordKey is the key of a central-directory record (see EntryKey).
func recordKey(rec *dirRecord) string { return EntryKey(rec.name, rec.flags) }

// unsafeName returns why name, a key made by EntryKey or PathKey, cannot
// be used, or "" when it can. No cleaning is done: the key must be safe as
// it stands. (A key holds no backslash; the check stays as a guard for
// names that did not go through EntryKey or PathKey.)
func unsafeName(name string) string {
	if name == "" {
		return "empty name"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return "control character"
		}
	}
	if strings.Contains(name, `\`) {
		return "backslash"
	}
	if name[0] == '/' {
		return "absolute name"
	}
	if len(name) >= 2 && name[1] == ':' && isASCIILetter(name[0]) {
		return "drive letter"
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return `".." segment`
		}
	}
	return ""
}

func isASCIILetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// Unix file types (the S_IFMT bits of the upper half of the external
// attributes) and MS-DOS attribute bits (the lower half).
const (
	unixTypeMask = 0xf000
	unixFIFO     = 0x1000
	unixChar     = 0x2000
	unixDir      = 0x4000
	unixBlock    = 0x6000
	unixRegular  = 0x8000
	unixSymlink  = 0xa000
	unixSocket   = 0xc000

	dosDir          = 0x10
	dosDevice       = 0x40
	dosReparsePoint = 0x400 // Windows symlinks and junctions
)

// isDir reports whether an entry is a directory: a name ending in "/", or a
// directory type in either half of the external attributes ext.
func isDir(name string, ext uint32) bool {
	if strings.HasSuffix(name, "/") {
		return true
	}
	if (ext>>16)&unixTypeMask == unixDir {
		return true
	}
	return ext&dosDir != 0 && (ext>>16)&unixTypeMask == 0
}

// nonRegular returns why an entry (not a directory) with the external
// attributes ext is not a regular file, or "". The Unix file type is
// honoured whatever system the archive claims to come from, since writers
// store it regardless; a missing type (0) counts as regular, as Python's
// zipfile writes it.
func nonRegular(ext uint32) string {
	switch (ext >> 16) & unixTypeMask {
	case 0, unixRegular:
	case unixSymlink:
		return "symlink"
	case unixChar:
		return "character device"
	case unixBlock:
		return "block device"
	case unixFIFO:
		return "FIFO"
	case unixSocket:
		return "socket"
	default:
		return "unknown file type"
	}
	if ext&dosReparsePoint != 0 {
		return "reparse point (Windows symlink)"
	}
	if ext&dosDevice != 0 {
		return "device"
	}
	return ""
}
