package fixity

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/rsharvest/rsharvest/errclass"
)

const (
	emptyMD5    = "d41d8cd98f00b204e9800998ecf8427e"
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	emptySHA512 = "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"
	emptySHA1   = "da39a3ee5e6b4b0d3255bfef95601890afd80709"
)

func TestParseList(t *testing.T) {
	md5b, _ := hex.DecodeString(emptyMD5)
	b64 := base64.StdEncoding.EncodeToString(md5b)
	tests := []struct {
		name    string
		in      string
		md5     string
		sha1    string
		sha256  string
		sha512  string
		unknown int
		wantErr bool
	}{
		{name: "empty", in: ""},
		{name: "md5 hex", in: "md5:" + emptyMD5, md5: emptyMD5},
		{name: "md5 upper hex", in: "md5:" + strings.ToUpper(emptyMD5), md5: emptyMD5},
		{name: "md5 base64 (resync)", in: "md5:" + b64, md5: emptyMD5},
		{name: "md5 base64 unpadded", in: "md5:" + strings.TrimRight(b64, "="), md5: emptyMD5},
		{name: "all three, extra whitespace", in: "  md5:" + emptyMD5 + " \n\tsha-1:" + emptySHA1 + "   sha-256:" + emptySHA256 + " ", md5: emptyMD5, sha1: emptySHA1, sha256: emptySHA256},
		{name: "sha-512", in: "sha-512:" + emptySHA512, sha512: emptySHA512},
		{name: "short sha-512", in: "sha-512:abcd md5:" + emptyMD5, wantErr: true},
		{name: "unknown algorithm kept", in: "sha-384:abcd md5:" + emptyMD5, md5: emptyMD5, unknown: 1},
		{name: "upper-case algorithm", in: "MD5:" + emptyMD5, md5: emptyMD5},
		{name: "no colon", in: "md5" + emptyMD5, wantErr: true},
		{name: "empty digest", in: "md5:", wantErr: true},
		{name: "short md5", in: "md5:d41d8cd9", wantErr: true},
		{name: "bad hex", in: "sha-256:" + strings.Repeat("zz", 32), wantErr: true},
		{name: "twice", in: "md5:" + emptyMD5 + " md5:" + emptyMD5, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseList(tt.in)
			if tt.wantErr {
				if err == nil || !errors.Is(err, ErrMalformed) || !errclass.IsPermanent(err) {
					t.Fatalf("err = %v, want permanent ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				got  []byte
				want string
			}{{h.MD5, tt.md5}, {h.SHA1, tt.sha1}, {h.SHA256, tt.sha256}, {h.SHA512, tt.sha512}} {
				if hex.EncodeToString(c.got) != c.want {
					t.Errorf("digest %x, want %s", c.got, c.want)
				}
			}
			if len(h.Unknown) != tt.unknown {
				t.Errorf("unknown = %v", h.Unknown)
			}
		})
	}
}

func TestStringRoundTrip(t *testing.T) {
	h, err := ParseList("sha-512:" + emptySHA512 + " sha-256:" + emptySHA256 + " md5:" + emptyMD5)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := ParseList(h.String())
	if err != nil || !h.Equal(h2) {
		t.Fatalf("round trip: %v %v", h2, err)
	}
}

func expectFor(body []byte) Expect {
	m := md5.Sum(body)
	s := sha256.Sum256(body)
	return Expect{Length: int64(len(body)), Hashes: Hashes{MD5: m[:], SHA256: s[:]}}
}

func TestReader(t *testing.T) {
	body := bytes.Repeat([]byte("resourcesync "), 10000)
	good := expectFor(body)
	badHash := expectFor(body)
	badHash.Hashes.SHA256 = append([]byte{}, badHash.Hashes.SHA256...)
	badHash.Hashes.SHA256[0] ^= 1
	short := expectFor(body)
	short.Length--
	long := expectFor(body)
	long.Length++
	noLen := expectFor(body)
	noLen.Length = -1
	s512 := sha512.Sum512(body)
	only512 := Expect{Length: -1, Hashes: Hashes{SHA512: s512[:]}}
	bad512 := Expect{Length: -1, Hashes: Hashes{SHA512: append([]byte{1}, s512[1:]...)}}
	tests := []struct {
		name     string
		want     Expect
		mismatch bool
	}{
		{"match", good, false},
		{"unknown length", noLen, false},
		{"hash differs", badHash, true},
		{"more bytes than expected", short, true},
		{"fewer bytes than expected", long, true},
		{"nothing expected", Expect{Length: -1}, false},
		{"sha-512 only", only512, false},
		{"sha-512 differs", bad512, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(iotest.HalfReader(bytes.NewReader(body)), tt.want, Compute{})
			_, err := io.Copy(io.Discard, r)
			if tt.mismatch {
				if !errors.Is(err, ErrMismatch) || !errclass.IsPermanent(err) || r.Verified() {
					t.Fatalf("err = %v verified=%v, want permanent ErrMismatch", err, r.Verified())
				}
				return
			}
			if err != nil || !r.Verified() {
				t.Fatalf("err = %v verified=%v", err, r.Verified())
			}
		})
	}
}

func TestReaderPassesErrors(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(iotest.ErrReader(boom), Expect{Length: -1}, Compute{})
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, boom) || r.Verified() {
		t.Fatalf("err = %v", err)
	}
}

func TestVerifierComputesAlso(t *testing.T) {
	v := NewVerifier(Expect{Length: -1}, Compute{MD5: true, SHA1: true, SHA256: true})
	if got := v.Sum(); hex.EncodeToString(got.MD5) != emptyMD5 || hex.EncodeToString(got.SHA1) != emptySHA1 || hex.EncodeToString(got.SHA256) != emptySHA256 {
		t.Fatalf("sums of nothing: %v", got)
	}
}

func FuzzParseList(f *testing.F) {
	f.Add("md5:" + emptyMD5)
	f.Add("md5:1B2M2Y8AsgTpgAmY7PhCfg== sha-256:" + emptySHA256)
	f.Add("sha-1:" + emptySHA1 + " foo:bar")
	f.Add(" : :: md5:")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseList(s)
		if err != nil {
			return
		}
		// What parses renders to something that parses to the same digests.
		h2, err := ParseList(h.String())
		if err != nil || !h.Equal(h2) {
			t.Fatalf("%q → %q → %v %v", s, h.String(), h2, err)
		}
	})
}

func BenchmarkReaderMD5SHA256(b *testing.B) {
	body := bytes.Repeat([]byte{0x5a}, 1<<20)
	want := expectFor(body)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(body), want, Compute{})
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAgree(t *testing.T) {
	a := []byte{1}
	b := []byte{2}
	tests := []struct {
		name string
		x, y Hashes
		want bool
	}{
		{"nothing in common", Hashes{MD5: a}, Hashes{SHA256: a}, false},
		{"equal md5", Hashes{MD5: a, SHA256: b}, Hashes{MD5: a}, true},
		{"equal sha-512", Hashes{SHA512: a}, Hashes{SHA512: a, MD5: b}, true},
		{"one differs", Hashes{MD5: a, SHA512: a}, Hashes{MD5: a, SHA512: b}, false},
		{"both empty", Hashes{}, Hashes{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.x.Agree(tt.y); got != tt.want {
				t.Fatalf("Agree = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStrongest(t *testing.T) {
	m, s1, s256, s512 := []byte{1}, []byte{2}, []byte{3}, []byte{4}
	tests := []struct {
		in, want Hashes
	}{
		{Hashes{MD5: m, SHA1: s1, SHA256: s256, SHA512: s512, Unknown: []string{"x:1"}}, Hashes{SHA512: s512}},
		{Hashes{MD5: m, SHA256: s256}, Hashes{SHA256: s256}},
		{Hashes{MD5: m, SHA1: s1}, Hashes{SHA1: s1}},
		{Hashes{MD5: m}, Hashes{MD5: m}},
		{Hashes{Unknown: []string{"x:1"}}, Hashes{}},
	}
	for _, tt := range tests {
		if got := tt.in.Strongest(); !got.Equal(tt.want) || got.Unknown != nil {
			t.Errorf("%s.Strongest() = %s, want %s", tt.in, got, tt.want)
		}
	}
}
