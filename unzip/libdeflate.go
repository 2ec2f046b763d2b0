//go:build libdeflate && cgo

package unzip

import (
	"sync"

	"github.com/4kills/go-libdeflate/v2"
)

// fastInflateAvailable: this build inflates small entries with libdeflate
// (the libdeflate build tag, with cgo; Debian's libdeflate-dev).
const fastInflateAvailable = true

// decompressors keeps libdeflate decompressors for reuse; each frees its C
// memory when the garbage collector drops it.
type decompressors struct{ pool sync.Pool } // of *libdeflate.Decompressor

// fastInflate inflates the raw DEFLATE data in into out, which must be
// exactly as long as the data inflates to; false for any failure.
func (p *inflaterPool) fastInflate(in, out []byte) bool {
	dc, ok := p.fast.pool.Get().(*libdeflate.Decompressor)
	if !ok {
		d, err := libdeflate.NewDecompressorAutoClose()
		if err != nil {
			return false
		}
		dc = &d
	}
	defer p.fast.pool.Put(dc)
	_, _, err := dc.Decompress(in, out, libdeflate.ModeDEFLATE)
	return err == nil
}
