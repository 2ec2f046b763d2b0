package bench

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
)

// blockSize is how many bytes a bodyReader generates at a time. The byte
// stream of a body does not depend on it being read in any particular
// chunking: blocks are produced by the generator alone.
const blockSize = 64 << 10

// maxToken is the size of a slot of the word table: tokens are shorter.
const maxToken = 16

// wordTable is the fixed vocabulary of compressible bodies: 256 tokens, each
// a made-up word followed by a separator (mostly a space, sometimes a comma,
// a full stop or a line break). Tokens sit in fixed-size slots so that
// appending one is a single fixed-size copy.
type wordTable struct {
	slot [256][maxToken]byte
	len  [256]uint8
}

// newWordTable builds the vocabulary from a fixed seed, so it is the same
// for every generation.
func newWordTable() *wordTable {
	const (
		consonants = "bcdfghjklmnprstvwz"
		vowels     = "aeiou"
	)
	rng := rand.New(rand.NewPCG(0x5eed, 0x7ab1e))
	var t wordTable
	for i := range t.slot {
		var w []byte
		syllables := 1 + rng.IntN(3)
		for range syllables {
			w = append(w, consonants[rng.IntN(len(consonants))], vowels[rng.IntN(len(vowels))])
			if rng.IntN(3) == 0 {
				w = append(w, consonants[rng.IntN(len(consonants))])
			}
		}
		switch {
		case i%32 == 31:
			w = append(w, ".\n"...)
		case i%16 == 7:
			w = append(w, ", "...)
		case i%64 == 13:
			w = append(w, ". "...)
		default:
			w = append(w, ' ')
		}
		t.len[i] = uint8(copy(t.slot[i][:], w))
	}
	return &t
}

// seedMix derives a well-mixed 64-bit value from a generation seed, a
// resource index and a stream number (splitmix64 finaliser), so that
// neighbouring indexes get unrelated random streams.
func seedMix(seed int64, index int, stream uint64) uint64 {
	z := uint64(seed) ^ (uint64(index)+1)*0x9e3779b97f4a7c15 ^ stream*0xd1b54a32d192ed03
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// bodyReader produces one resource's body: exactly size bytes, a function of
// (seed, index, kind) only. It is reusable (reset) so that generating many
// bodies does not allocate. It implements io.WriterTo so io.Copy writes
// straight from its block buffer.
type bodyReader struct {
	words     *wordTable
	text      bool
	remaining int64
	buf       []byte // generated, not yet consumed: buf[off:]
	off       int
	pcg       rand.PCG
	chacha    rand.ChaCha8
}

func newBodyReader(words *wordTable) *bodyReader {
	return &bodyReader{words: words, buf: make([]byte, 0, blockSize)}
}

// reset prepares the reader for the body of resource index of the given
// size and kind.
func (b *bodyReader) reset(seed int64, index int, size int64, text bool) {
	b.text = text
	b.remaining = size
	b.buf = b.buf[:0]
	b.off = 0
	if text {
		b.pcg.Seed(seedMix(seed, index, 11), seedMix(seed, index, 12))
		return
	}
	var s [32]byte
	for k := range 4 {
		binary.LittleEndian.PutUint64(s[8*k:], seedMix(seed, index, uint64(13+k)))
	}
	b.chacha.Seed(s)
}

// refill generates the next block. Text blocks end on a token boundary
// after at least blockSize-4×maxToken bytes, or as soon as they hold what
// remains of the body (the tokens come one after the other from the
// generator, so stopping early changes nothing of the body); random blocks
// are blockSize bytes (or what remains).
func (b *bodyReader) refill() {
	b.off = 0
	if b.text {
		buf := b.buf[:blockSize]
		n := 0
		limit := int(min(blockSize-4*maxToken, b.remaining))
		for n < limit {
			x := b.pcg.Uint64()
			for range 4 {
				// The smaller of two draws: a skewed (triangular) word
				// frequency, as in natural text.
				i := min(byte(x), byte(x>>8))
				x >>= 16
				copy(buf[n:n+maxToken], b.words.slot[i][:])
				n += int(b.words.len[i])
			}
		}
		b.buf = buf[:n]
		return
	}
	n := int64(blockSize)
	n = min(n, b.remaining)
	b.buf = b.buf[:n]
	_, _ = b.chacha.Read(b.buf) // never fails
}

// Read implements io.Reader.
func (b *bodyReader) Read(p []byte) (int, error) {
	if b.remaining <= 0 {
		return 0, io.EOF
	}
	if b.off >= len(b.buf) {
		b.refill()
	}
	chunk := b.buf[b.off:]
	if int64(len(chunk)) > b.remaining {
		chunk = chunk[:b.remaining]
	}
	n := copy(p, chunk)
	b.off += n
	b.remaining -= int64(n)
	return n, nil
}

// WriteTo implements io.WriterTo, writing the rest of the body to w.
func (b *bodyReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for b.remaining > 0 {
		if b.off >= len(b.buf) {
			b.refill()
		}
		chunk := b.buf[b.off:]
		if int64(len(chunk)) > b.remaining {
			chunk = chunk[:b.remaining]
		}
		n, err := w.Write(chunk)
		b.off += n
		b.remaining -= int64(n)
		total += int64(n)
		if err != nil {
			return total, err
		}
		if n < len(chunk) {
			return total, io.ErrShortWrite
		}
	}
	return total, nil
}
