package unzip

import (
	"hash/crc32"
	"io"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/zip"
)

// fastMaxSize bounds the entries inflated in one call by the fast inflater
// (see Inflater): both their compressed and their declared sizes, since
// each is held whole in memory while it is read. It is RatioExemptSize: a
// larger entry would have its ratio checked as it streams, which an
// inflater that takes the whole entry at once cannot do.
const fastMaxSize = RatioExemptSize - 1

// Inflater names the DEFLATE decoder entries are inflated with: "libdeflate"
// when the package is built with the libdeflate tag and cgo (entries of up
// to 8 MiB, compressed and inflated, are inflated in one call of
// libdeflate; larger ones stream through klauspost/compress/flate), else
// "klauspost/compress" for every entry.
func Inflater() string {
	if fastInflateAvailable {
		return "libdeflate"
	}
	return "klauspost/compress"
}

// Size classes of bufPool: capacities 64 KiB, 128 KiB, … up to the first
// power of two at or above fastMaxSize.
const (
	minBufShift = 16
	bufClasses  = 21 - minBufShift // 2^20 ≥ fastMaxSize
)

// bufPool keeps byte slices of up to fastMaxSize for reuse, by size class
// (a power of two), so that an entry's buffer comes from the class that
// fits it instead of a slice too small being dropped and another made (and
// zeroed) for nearly every entry of a dump whose sizes vary. The zero
// value is ready for use; it is safe for concurrent use.
type bufPool struct{ pools [bufClasses]sync.Pool } // of *[]byte

// bufClass is the class of slices of capacity 1<<(minBufShift+class) that
// hold n bytes.
func bufClass(n int) int {
	return max(bits.Len(uint(n-1))-minBufShift, 0)
}

// get returns a slice of length n (at most fastMaxSize).
func (p *bufPool) get(n int) *[]byte {
	c := bufClass(n)
	if b, ok := p.pools[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(minBufShift+c))
	return &b
}

// put gives back a slice that get returned.
func (p *bufPool) put(b *[]byte) { p.pools[bufClass(cap(*b))].Put(b) }

// fastEligible tells whether an entry is read whole (fastReader): not
// empty, both sizes within fastMaxSize, and stored (its sizes equal: else
// the streaming reader reports the mismatch), or deflated when the fast
// inflater is available.
func fastEligible(method uint16, size, csize int64) bool {
	if csize <= 0 || size <= 0 || csize > fastMaxSize || size > fastMaxSize {
		return false
	}
	return (method == zip.Store && size == csize) || (method == zip.Deflate && fastInflateAvailable)
}

// fastReader yields an entry read whole — in one read of the archive, and
// inflated in one call of the fast inflater when deflated — once its size
// and CRC-32 have been checked: it never yields a byte of an entry that
// fails. When anything is wrong — the archive cannot be read, the data
// is corrupt, longer or shorter than declared, or its CRC-32 differs — it
// reads the entry again through the streaming reader (open), whose bytes
// and errors it then passes on: every failure is diagnosed, and
// classified, exactly as without the fast inflater.
type fastReader struct {
	method  uint16
	section *io.SectionReader
	size    int64
	crc32   uint32
	pool    *inflaterPool
	open    func() io.ReadCloser // the streaming reader, for a failure
	// data, when not nil, is the section's bytes, already in memory: a
	// deflated entry is inflated from it, not from a copy.
	data []byte

	out      *[]byte // the verified bytes, once inflated
	off      int
	fallback io.ReadCloser
	closed   bool
}

// inflate inflates the entry on first use; false means the streaming
// reader took over.
func (r *fastReader) inflate() bool {
	if r.out != nil || r.fallback != nil {
		return r.fallback == nil
	}
	out := r.pool.bufs.get(int(r.size))
	in := out // a stored entry is read straight into out
	var (
		n   int
		err error
	)
	switch {
	case r.method != zip.Store && r.data != nil:
		in, n = &r.data, len(r.data)
	case r.method != zip.Store:
		in = r.pool.bufs.get(int(r.section.Size()))
		defer r.pool.bufs.put(in)
		fallthrough
	default:
		n, err = r.section.ReadAt(*in, 0)
	}
	if n == len(*in) && (err == nil || err == io.EOF) &&
		(r.method == zip.Store || r.pool.fastInflate(*in, *out)) && crc32.ChecksumIEEE(*out) == r.crc32 {
		r.out = out
		return true
	}
	r.pool.bufs.put(out)
	r.fallback = r.open()
	return false
}

func (r *fastReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, errReadAfterClose
	}
	if !r.inflate() {
		return r.fallback.Read(p)
	}
	if r.off == len(*r.out) {
		return 0, io.EOF
	}
	n := copy(p, (*r.out)[r.off:])
	r.off += n
	return n, nil
}

// WriteTo writes the rest of the entry to w in one call: no copy through
// the caller's buffer.
func (r *fastReader) WriteTo(w io.Writer) (int64, error) {
	if r.closed {
		return 0, errReadAfterClose
	}
	if !r.inflate() {
		return io.Copy(w, r.fallback)
	}
	n, err := w.Write((*r.out)[r.off:])
	r.off += n
	return int64(n), err
}

func (r *fastReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.out != nil {
		r.pool.bufs.put(r.out)
		r.out = nil
	}
	if r.fallback != nil {
		return r.fallback.Close()
	}
	return nil
}
