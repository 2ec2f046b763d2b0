package unzip

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/klauspost/compress/zip"
)

// TestInflaterBuild: the build inflates with the decoder
// $RSHARVEST_WANT_INFLATER names, when it is set (.ci/run sets it for its
// run of the tests built with -tags libdeflate, so that a build that fell
// back to pure Go — cgo off, the tag lost — fails instead of passing
// unnoticed).
func TestInflaterBuild(t *testing.T) {
	want := os.Getenv("RSHARVEST_WANT_INFLATER")
	if want != "" && Inflater() != want {
		t.Fatalf("Inflater() = %q, want %q", Inflater(), want)
	}
	t.Logf("inflater: %s", Inflater())
}

// TestFastReader: the entries read whole (under 1 MiB, stored, or deflated
// with the fast inflater) come back whole through Read and WriteTo, and a failing one never
// yields a byte the streaming reader would not: its bytes and error are the
// streaming reader's (TestRead checks each failure on both builds).
func TestFastReader(t *testing.T) {
	text := bytes.Repeat([]byte("ResourceSync dump entry. "), 4000)
	tests := []struct {
		name   string
		method uint16
		body   []byte
		fast   bool
	}{
		{"deflated text", zip.Deflate, text, true},
		{"deflated, 1 MiB", zip.Deflate, bytes.Repeat([]byte{'a'}, RatioExemptSize), false},
		{"stored", zip.Store, text, true},
		{"stored, 1 MiB", zip.Store, bytes.Repeat([]byte{'a'}, RatioExemptSize), false},
		{"empty", zip.Deflate, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := open(t, withManifest(file("x", tt.body, tt.method)).build(t), Limits{})
			f, err := a.Lookup("/x")
			if err != nil {
				t.Fatal(err)
			}
			for _, how := range []string{"Read", "WriteTo"} {
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				_, isFast := rc.(*fastReader)
				wantFast := tt.fast && (tt.method == zip.Store || fastInflateAvailable)
				if isFast != wantFast {
					t.Errorf("%s: fast reader %v, want %v (inflater %s)", how, isFast, wantFast, Inflater())
				}
				var got bytes.Buffer
				if how == "Read" {
					_, err = io.Copy(&got, struct{ io.Reader }{rc})
				} else {
					_, err = io.Copy(&got, rc)
				}
				if err != nil || !bytes.Equal(got.Bytes(), tt.body) {
					t.Errorf("%s: %d bytes, %v; want %d", how, got.Len(), err, len(tt.body))
				}
				rc.Close()
				if _, err := rc.Read(make([]byte, 1)); err == nil {
					t.Errorf("%s: read after close succeeded", how)
				}
			}
		})
	}
}

// TestBufPool: a slice comes back with the length asked for, from the
// size class that fits it, and is reused by the next request of its class.
func TestBufPool(t *testing.T) {
	var p bufPool
	for _, n := range []int{1, 64 << 10, 64<<10 + 1, 300_000, fastMaxSize} {
		b := p.get(n)
		if len(*b) != n || cap(*b) < n || cap(*b)&(cap(*b)-1) != 0 || cap(*b) > 2*max(n, 64<<10) {
			t.Errorf("get(%d): len %d, cap %d", n, len(*b), cap(*b))
		}
		p.put(b)
	}
	if bufClass(fastMaxSize) >= bufClasses {
		t.Fatalf("fastMaxSize %d has class %d of %d", fastMaxSize, bufClass(fastMaxSize), bufClasses)
	}
}
