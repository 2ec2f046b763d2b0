// Package fixity models the fixity information of ResourceSync documents (the
// rs:md and rs:ln "hash" and "length" attributes) and verifies bytes against
// it in a single streaming pass.
//
// A hash attribute is a whitespace-separated list of "algorithm:digest"
// tokens. The algorithms understood are md5, sha-1, sha-256 and sha-512; digests are
// hex as the specification says, and md5 is also accepted in base64, as the
// resync reference library writes it (the two are told apart by length).
// Tokens of other algorithms are kept in Unknown and otherwise ignored.
package fixity

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/rsharvest/rsharvest/errclass"
)

// Hashes holds the expected (or computed) digests of one representation. A
// nil digest means "not given".
type Hashes struct {
	MD5    []byte
	SHA1   []byte
	SHA256 []byte
	SHA512 []byte
	// Unknown keeps tokens of algorithms this package does not verify,
	// verbatim ("sha-512:ab12…").
	Unknown []string
}

// IsZero reports whether no verifiable digest is present.
func (h Hashes) IsZero() bool {
	return h.MD5 == nil && h.SHA1 == nil && h.SHA256 == nil && h.SHA512 == nil
}

// Strongest returns h with only its strongest verifiable digest — sha-512,
// else sha-256, sha-1, md5 — and no Unknown tokens: what verifying h needs
// when checking one digest protects the bytes as well as checking them
// all (a second, weaker digest of the same bytes adds no protection). It
// is zero when h has no verifiable digest.
func (h Hashes) Strongest() Hashes {
	switch {
	case h.SHA512 != nil:
		return Hashes{SHA512: h.SHA512}
	case h.SHA256 != nil:
		return Hashes{SHA256: h.SHA256}
	case h.SHA1 != nil:
		return Hashes{SHA1: h.SHA1}
	case h.MD5 != nil:
		return Hashes{MD5: h.MD5}
	}
	return Hashes{}
}

// Equal reports whether h and o give the same verifiable digests.
func (h Hashes) Equal(o Hashes) bool {
	return bytes.Equal(h.MD5, o.MD5) && bytes.Equal(h.SHA1, o.SHA1) &&
		bytes.Equal(h.SHA256, o.SHA256) && bytes.Equal(h.SHA512, o.SHA512)
}

// Agree reports whether h and o both give at least one digest of a common
// algorithm and every digest they have in common is equal: whether they
// describe the same bytes, as far as both can tell.
func (h Hashes) Agree(o Hashes) bool {
	common := 0
	for _, c := range [][2][]byte{{h.MD5, o.MD5}, {h.SHA1, o.SHA1}, {h.SHA256, o.SHA256}, {h.SHA512, o.SHA512}} {
		if c[0] == nil || c[1] == nil {
			continue
		}
		if !bytes.Equal(c[0], c[1]) {
			return false
		}
		common++
	}
	return common > 0
}

// String renders the verifiable digests as a hash attribute value with hex
// digests ("md5:… sha-1:… sha-256:… sha-512:…"), in that order. Unknown tokens are
// appended unchanged.
func (h Hashes) String() string {
	var parts []string
	if h.MD5 != nil {
		parts = append(parts, "md5:"+hex.EncodeToString(h.MD5))
	}
	if h.SHA1 != nil {
		parts = append(parts, "sha-1:"+hex.EncodeToString(h.SHA1))
	}
	if h.SHA256 != nil {
		parts = append(parts, "sha-256:"+hex.EncodeToString(h.SHA256))
	}
	if h.SHA512 != nil {
		parts = append(parts, "sha-512:"+hex.EncodeToString(h.SHA512))
	}
	parts = append(parts, h.Unknown...)
	return strings.Join(parts, " ")
}

// ErrMalformed is wrapped by every error ParseList returns.
var ErrMalformed = errors.New("malformed hash list")

// ParseList parses a hash attribute value. An empty value gives zero Hashes.
// A token for md5, sha-1, sha-256 or sha-512 whose digest does not decode to the
// algorithm's size, a token without a colon, or a repeated algorithm is an
// error (permanent, wrapping ErrMalformed). Algorithm names are compared
// case-insensitively.
func ParseList(s string) (Hashes, error) {
	var h Hashes
	for _, tok := range strings.Fields(s) {
		alg, digest, ok := strings.Cut(tok, ":")
		if !ok || alg == "" || digest == "" {
			return Hashes{}, errclass.Permanentf("%w: token %q is not algorithm:digest", ErrMalformed, trunc(tok))
		}
		var dst *[]byte
		var size int
		switch strings.ToLower(alg) {
		case "md5":
			dst, size = &h.MD5, md5.Size
		case "sha-1", "sha1":
			dst, size = &h.SHA1, sha1.Size
		case "sha-256", "sha256":
			dst, size = &h.SHA256, sha256.Size
		case "sha-512", "sha512":
			dst, size = &h.SHA512, sha512.Size
		default:
			h.Unknown = append(h.Unknown, tok)
			continue
		}
		if *dst != nil {
			return Hashes{}, errclass.Permanentf("%w: algorithm %s given twice", ErrMalformed, alg)
		}
		b, err := decodeDigest(digest, size)
		if err != nil {
			return Hashes{}, errclass.Permanentf("%w: %s digest %q: %v", ErrMalformed, alg, trunc(digest), err)
		}
		*dst = b
	}
	return h, nil
}

// decodeDigest decodes a hex digest, or a base64 one (standard or URL
// alphabet, padded or not), of exactly size bytes.
func decodeDigest(s string, size int) ([]byte, error) {
	if len(s) == 2*size {
		b, err := hex.DecodeString(s)
		if err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == size {
			return b, nil
		}
	}
	return nil, fmt.Errorf("want %d bytes as hex or base64", size)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// ErrMismatch is wrapped by every fixity failure a Verifier reports.
var ErrMismatch = errors.New("fixity mismatch")

// Expect is what a representation must match. Length < 0 means "unknown".
type Expect struct {
	Length int64
	Hashes Hashes
	// Max, when above 0 and Length is unknown, is the most bytes the
	// representation may have: a hostile server's endless body is cut off
	// there instead of filling the disk. It is not checked by a Verifier
	// (it is not fixity); fetch.Client.Download enforces it.
	Max int64
}

// Verifier is an io.Writer that computes, in one pass, exactly the digests
// that Expect asks for (and any extra ones requested with Also) and counts
// the bytes. It is not safe for concurrent use.
type Verifier struct {
	want   Expect
	n      int64
	md5    hash.Hash
	sha1   hash.Hash
	sha256 hash.Hash
	sha512 hash.Hash
	w      io.Writer
}

// Compute selects digests to compute even when they are not expected.
type Compute struct{ MD5, SHA1, SHA256, SHA512 bool }

// NewVerifier returns a Verifier for want that also computes the digests
// selected by also.
func NewVerifier(want Expect, also Compute) *Verifier {
	v := &Verifier{want: want}
	var ws []io.Writer
	if want.Hashes.MD5 != nil || also.MD5 {
		v.md5 = md5.New()
		ws = append(ws, v.md5)
	}
	if want.Hashes.SHA1 != nil || also.SHA1 {
		v.sha1 = sha1.New()
		ws = append(ws, v.sha1)
	}
	if want.Hashes.SHA256 != nil || also.SHA256 {
		v.sha256 = sha256.New()
		ws = append(ws, v.sha256)
	}
	if want.Hashes.SHA512 != nil || also.SHA512 {
		v.sha512 = sha512.New()
		ws = append(ws, v.sha512)
	}
	switch len(ws) {
	case 0:
		v.w = io.Discard
	case 1:
		v.w = ws[0]
	default:
		v.w = io.MultiWriter(ws...)
	}
	return v
}

// Write hashes p. It never fails.
func (v *Verifier) Write(p []byte) (int, error) {
	v.n += int64(len(p))
	return v.w.Write(p)
}

// N returns the number of bytes written so far.
func (v *Verifier) N() int64 { return v.n }

// Sum returns the digests computed so far.
func (v *Verifier) Sum() Hashes {
	var h Hashes
	if v.md5 != nil {
		h.MD5 = v.md5.Sum(nil)
	}
	if v.sha1 != nil {
		h.SHA1 = v.sha1.Sum(nil)
	}
	if v.sha256 != nil {
		h.SHA256 = v.sha256.Sum(nil)
	}
	if v.sha512 != nil {
		h.SHA512 = v.sha512.Sum(nil)
	}
	return h
}

// Check compares what was written with the expectation. It returns nil when
// everything expected matches, and otherwise a permanent error wrapping
// ErrMismatch that names the first thing that differs.
func (v *Verifier) Check() error {
	if v.want.Length >= 0 && v.n != v.want.Length {
		return errclass.Permanentf("%w: length %d, expected %d", ErrMismatch, v.n, v.want.Length)
	}
	got := v.Sum()
	for _, c := range []struct {
		name      string
		got, want []byte
	}{{"md5", got.MD5, v.want.Hashes.MD5}, {"sha-1", got.SHA1, v.want.Hashes.SHA1}, {"sha-256", got.SHA256, v.want.Hashes.SHA256}, {"sha-512", got.SHA512, v.want.Hashes.SHA512}} {
		if c.want != nil && !bytes.Equal(c.got, c.want) {
			return errclass.Permanentf("%w: %s %x, expected %x", ErrMismatch, c.name, c.got, c.want)
		}
	}
	return nil
}

// Reader wraps r so that every byte read is verified against want. Reads
// pass through until r ends; at the end, instead of io.EOF, the reader
// returns the mismatch error if the bytes do not match, so a consumer that
// commits only on io.EOF never commits unverified bytes. A read past the
// expected length fails at once, without waiting for the end. Errors from r
// are returned unchanged.
type Reader struct {
	r    io.Reader
	v    *Verifier
	done error
}

// NewReader returns a verifying reader over r. also selects digests to
// compute beyond those expected (see Sum).
func NewReader(r io.Reader, want Expect, also Compute) *Reader {
	return &Reader{r: r, v: NewVerifier(want, also)}
}

// Read implements io.Reader with the contract described on Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.done != nil {
		return 0, r.done
	}
	n, err := r.r.Read(p)
	if n > 0 {
		r.v.Write(p[:n])
		if r.v.want.Length >= 0 && r.v.n > r.v.want.Length {
			r.done = errclass.Permanentf("%w: more than the expected %d bytes", ErrMismatch, r.v.want.Length)
			return 0, r.done
		}
	}
	if err == io.EOF {
		if cerr := r.v.Check(); cerr != nil {
			r.done = cerr
			return n, cerr
		}
		r.done = io.EOF
	}
	return n, err
}

// N returns the number of bytes read so far.
func (r *Reader) N() int64 { return r.v.N() }

// Sum returns the digests computed over the bytes read so far; after the
// reader returned io.EOF they are the digests of the whole representation.
func (r *Reader) Sum() Hashes { return r.v.Sum() }

// Verified reports whether the reader reached the end of its input and the
// bytes matched the expectation, that is whether it has returned io.EOF.
func (r *Reader) Verified() bool { return r.done == io.EOF }
