package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/rsharvest/rsharvest/sink/fs"
)

// maxEntryElem is the longest element of a dump entry's name: what Linux,
// macOS and Windows file systems take.
const maxEntryElem = 255

// EntryName is the name, within a published dump package, of the body of
// uri: the fs sink's path of uri (fs.Encode: a directory per URI piece,
// "%XX" escapes of what no file name may hold, "@" before the file's
// name) made extractable by every common unzip tool on Linux, macOS and
// Windows. In each element ":" and "?" are escaped too ("%3A", "%3F"), a
// trailing "." or " " (which Windows drops) is escaped, and a name Windows
// reserves for a device (CON, PRN, AUX, NUL, COM0–9, LPT0–9, with any
// extension, in any case) has its first letter escaped. An element those
// escapes take past 255 bytes keeps its first 200 bytes, then "~" and 16
// hex digits of its sha-256. The mapping is injective (fs.Encode escapes
// every "%" it is given, so none of these escapes can come from a URI);
// each entry's manifest path names it, so a consumer need not reverse it.
func EntryName(uri string) string {
	elems := strings.Split(fs.Encode(uri), "/")
	for i, e := range elems {
		elems[i] = portable(e)
	}
	return strings.Join(elems, "/")
}

// portable escapes what an element of fs.Encode's may hold that some file
// system refuses.
func portable(e string) string {
	e = strings.NewReplacer(":", "%3A", "?", "%3F").Replace(e)
	if n := len(e); n > 0 && (e[n-1] == '.' || e[n-1] == ' ') {
		e = e[:n-1] + escapeByte(e[n-1])
	}
	if reservedDevice(e) {
		e = escapeByte(e[0]) + e[1:]
	}
	if len(e) > maxEntryElem {
		cut := 200
		for cut > 0 && (e[cut]&0xc0 == 0x80 || strings.LastIndexByte(e[cut-2:cut], '%') >= 0) {
			cut-- // not inside a UTF-8 sequence or an escape
		}
		sum := sha256.Sum256([]byte(e))
		e = e[:cut] + "~" + hex.EncodeToString(sum[:8])
	}
	return e
}

func escapeByte(c byte) string {
	const hexDigits = "0123456789ABCDEF"
	return string([]byte{'%', hexDigits[c>>4], hexDigits[c&15]})
}

// reservedDevice reports whether Windows takes the name e for a device:
// CON, PRN, AUX, NUL, COM0–9 or LPT0–9, alone or before an extension.
func reservedDevice(e string) bool {
	base, _, _ := strings.Cut(e, ".")
	base = strings.ToUpper(strings.TrimRight(base, " "))
	switch base {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	return len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) && base[3] >= '0' && base[3] <= '9'
}
