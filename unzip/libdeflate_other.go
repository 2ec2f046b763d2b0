//go:build !libdeflate || !cgo

package unzip

// fastInflateAvailable: this build inflates every entry with
// klauspost/compress/flate (build with -tags libdeflate and cgo for
// libdeflate).
const fastInflateAvailable = false

// decompressors is empty in this build.
//
//lint:ignore U1000 the libdeflate build's is used.
type decompressors struct{}

// fastInflate is never called in this build.
func (p *inflaterPool) fastInflate(in, out []byte) bool { return false }
