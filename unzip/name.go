package unzip

import (
	"strings"

	"github.com/klauspost/compress/zip"
)

// unsafeName returns why name cannot be used as an entry name (or as a
// manifest path once its leading slash is stripped), or "" when it can. No
// cleaning is done: the name must be safe as it stands.
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
// directory type in either half of the external attributes.
func isDir(h *zip.FileHeader) bool {
	if strings.HasSuffix(h.Name, "/") {
		return true
	}
	if (h.ExternalAttrs>>16)&unixTypeMask == unixDir {
		return true
	}
	return h.ExternalAttrs&dosDir != 0 && (h.ExternalAttrs>>16)&unixTypeMask == 0
}

// nonRegular returns why an entry (not a directory) is not a regular file,
// or "". The Unix file type is honoured whatever system the archive claims to
// come from, since writers store it regardless; a missing type (0) counts as
// regular, as Python's zipfile writes it.
func nonRegular(h *zip.FileHeader) string {
	switch (h.ExternalAttrs >> 16) & unixTypeMask {
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
	if h.ExternalAttrs&dosReparsePoint != 0 {
		return "reparse point (Windows symlink)"
	}
	if h.ExternalAttrs&dosDevice != 0 {
		return "device"
	}
	return ""
}
