package unzip

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"
)

// This file builds raw ZIP bytes by hand, so tests can forge what a writer
// library would refuse to write: names, attributes, lying sizes and CRCs,
// duplicate names, bad offsets, zip64 records, junk around the archive.

// OS values for the upper byte of "version made by".
const (
	creatorFAT  = 0
	creatorUnix = 3
	creatorNTFS = 10
)

// rawEntry describes one entry to write.
type rawEntry struct {
	name    string
	body    []byte // uncompressed content
	method  uint16 // zip.Store, zip.Deflate, or anything else (body written as is)
	creator uint16 // OS, the upper byte of "version made by"
	ext     uint32 // external attributes
	flags   uint16
	// legacyName writes the name without the UTF-8 flag, as old tools
	// write CP437 names; by default the flag is set.
	legacyName bool
	zip64      bool // write sizes and offset through a zip64 extra field
	// raw, if non-nil, is written as the entry's data instead of body
	// compressed with method (the true sizes and CRC still come from body).
	raw []byte
	// patch, if set, alters the header (local and central) before it is
	// written: this is how sizes and CRCs lie.
	patch func(h *rawHeader)
	// central, if set, alters the central-directory record alone, given
	// the headers of every entry as written: how records point at another
	// entry's bytes, or name another entry than their local header.
	central func(h *rawHeader, all []rawHeader)
}

// rawHeader holds the fields written to the local and central headers.
type rawHeader struct {
	name         string
	method       uint16
	flags        uint16
	crc          uint32
	csize, usize uint64
	offset       uint64 // of the local header (central directory only)
	ext          uint32
	creator      uint16
}

// rawArchive describes a whole archive.
type rawArchive struct {
	entries []rawEntry
	prefix  []byte // junk before the first local header
	suffix  []byte // junk after the end-of-central-directory record
	zip64   bool   // force zip64 end records
}

func deflate(t testing.TB, p []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type le struct{ b bytes.Buffer }

func (w *le) u16(v uint16) { w.b.Write(binary.LittleEndian.AppendUint16(nil, v)) }
func (w *le) u32(v uint32) { w.b.Write(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *le) u64(v uint64) { w.b.Write(binary.LittleEndian.AppendUint64(nil, v)) }

// build writes the archive and returns its bytes.
func (ra rawArchive) build(t testing.TB) []byte {
	t.Helper()
	var out le
	out.b.Write(ra.prefix)
	base := uint64(len(ra.prefix))
	headers := make([]rawHeader, len(ra.entries))
	for i, e := range ra.entries {
		data := e.raw
		if data == nil {
			switch e.method {
			case zip.Deflate:
				data = deflate(t, e.body)
			default:
				data = e.body
			}
		}
		h := rawHeader{
			name:    e.name,
			method:  e.method,
			flags:   e.flags | utf8Flag(e),
			crc:     crc32.ChecksumIEEE(e.body),
			csize:   uint64(len(data)),
			usize:   uint64(len(e.body)),
			offset:  uint64(out.b.Len()) - base,
			ext:     e.ext,
			creator: e.creator,
		}
		if e.patch != nil {
			e.patch(&h)
		}
		headers[i] = h
		extra := zip64Extra(e.zip64, h, false)
		out.u32(0x04034b50)
		out.u16(45)
		out.u16(h.flags)
		out.u16(h.method)
		out.u16(0x6000) // 12:00
		out.u16(0x5821) // 2024-01-01
		out.u32(h.crc)
		out.u32(size32(e.zip64, h.csize))
		out.u32(size32(e.zip64, h.usize))
		out.u16(uint16(len(h.name)))
		out.u16(uint16(len(extra)))
		out.b.WriteString(h.name)
		out.b.Write(extra)
		out.b.Write(data)
	}
	cdStart := uint64(out.b.Len()) - base
	for i, e := range ra.entries {
		h := headers[i]
		if e.central != nil {
			e.central(&h, headers)
		}
		extra := zip64Extra(e.zip64, h, true)
		out.u32(0x02014b50)
		out.u16(h.creator<<8 | 45)
		out.u16(45)
		out.u16(h.flags)
		out.u16(h.method)
		out.u16(0x6000)
		out.u16(0x5821)
		out.u32(h.crc)
		out.u32(size32(e.zip64, h.csize))
		out.u32(size32(e.zip64, h.usize))
		out.u16(uint16(len(h.name)))
		out.u16(uint16(len(extra)))
		out.u16(0) // comment
		out.u16(0) // disk
		out.u16(0) // internal attributes
		out.u32(h.ext)
		out.u32(size32(e.zip64, h.offset))
		out.b.WriteString(h.name)
		out.b.Write(extra)
	}
	cdEnd := uint64(out.b.Len()) - base
	n := uint64(len(ra.entries))
	if ra.zip64 {
		eocd64 := cdEnd
		out.u32(0x06064b50)
		out.u64(44)
		out.u16(45)
		out.u16(45)
		out.u32(0)
		out.u32(0)
		out.u64(n)
		out.u64(n)
		out.u64(cdEnd - cdStart)
		out.u64(cdStart)
		out.u32(0x07064b50) // locator
		out.u32(0)
		out.u64(eocd64)
		out.u32(1)
	}
	out.u32(0x06054b50)
	out.u16(0)
	out.u16(0)
	if ra.zip64 {
		out.u16(0xffff)
		out.u16(0xffff)
		out.u32(0xffffffff)
		out.u32(0xffffffff)
	} else {
		out.u16(uint16(n))
		out.u16(uint16(n))
		out.u32(uint32(cdEnd - cdStart))
		out.u32(uint32(cdStart))
	}
	out.u16(0) // comment length
	out.b.Write(ra.suffix)
	return out.b.Bytes()
}

func size32(zip64 bool, v uint64) uint32 {
	if zip64 {
		return 0xffffffff
	}
	return uint32(v)
}

// zip64Extra returns the zip64 extended-information field: sizes, and in the
// central directory the local header offset too.
func zip64Extra(on bool, h rawHeader, central bool) []byte {
	if !on {
		return nil
	}
	var w le
	w.u16(0x0001)
	if central {
		w.u16(24)
	} else {
		w.u16(16)
	}
	w.u64(h.usize)
	w.u64(h.csize)
	if central {
		w.u64(h.offset)
	}
	return w.b.Bytes()
}

// manifestBody is the content of test manifests; this package does not parse it.
var manifestBody = []byte(`<?xml version="1.0" encoding="UTF-8"?><urlset/>`)

func manifestEntry() rawEntry {
	return rawEntry{name: ManifestName, body: manifestBody, method: zip.Deflate, creator: creatorUnix, ext: 0o100644 << 16}
}

// withManifest returns an archive of a manifest followed by entries.
func withManifest(entries ...rawEntry) rawArchive {
	return rawArchive{entries: append([]rawEntry{manifestEntry()}, entries...)}
}

// file returns a regular Unix entry.
func file(name string, body []byte, method uint16) rawEntry {
	return rawEntry{name: name, body: body, method: method, creator: creatorUnix, ext: 0o100644 << 16}
}

// flateWriter returns the DEFLATE writer the bomb tests use.
func flateWriter(w io.Writer) (*flate.Writer, error) {
	return flate.NewWriter(w, flate.DefaultCompression)
}

// crc32Zeros returns the CRC-32 of n zero bytes.
func crc32Zeros(n int) uint32 {
	chunk := make([]byte, 1<<20)
	var crc uint32
	for n > 0 {
		k := min(n, len(chunk))
		crc = crc32.Update(crc, crc32.IEEETable, chunk[:k])
		n -= k
	}
	return crc
}

// utf8Flag is the UTF-8 name flag an entry is written with.
func utf8Flag(e rawEntry) uint16 {
	if e.legacyName {
		return 0
	}
	return 0x800
}
