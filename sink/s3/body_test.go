package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/rsharvest/rsharvest/errclass"
)

func TestBodyReaderPassesTheBody(t *testing.T) {
	data := []byte(strings.Repeat("0123456789abcdef", 1000) + "xyz")
	wraps := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"plain", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
		{"data with EOF", iotest.DataErrReader},
	}
	for _, w := range wraps {
		for _, size := range []int{0, 1, 2, 3, 4096, len(data)} {
			for _, length := range []int64{int64(size), -1} {
				body := data[:size]
				b := newBodyReader(context.Background(), w.wrap(bytes.NewReader(body)), length)
				if err := iotest.TestReader(b, body); err != nil {
					t.Errorf("%s, %d bytes, length %d: %v", w.name, size, length, err)
				}
			}
		}
	}
}

// dataThenErr returns data in reads of at most chunk bytes, then err,
// recording how many bytes it has given out.
type dataThenErr struct {
	data     []byte
	chunk    int
	err      error
	withLast bool // return err together with the last data
}

func (d *dataThenErr) Read(p []byte) (int, error) {
	if len(d.data) == 0 {
		return 0, d.err
	}
	n := copy(p[:min(len(p), d.chunk)], d.data)
	d.data = d.data[n:]
	if len(d.data) == 0 && d.withLast {
		return n, d.err
	}
	return n, nil
}

func TestBodyReaderHoldsBackTheLastByte(t *testing.T) {
	errFixity := errors.New("fixity mismatch")
	for _, withLast := range []bool{false, true} {
		for _, bufSize := range []int{1, 2, 7, 4096} {
			for _, length := range []int64{100, -1} {
				src := &dataThenErr{data: bytes.Repeat([]byte{'x'}, 100), chunk: 10, err: errFixity, withLast: withLast}
				b := newBodyReader(context.Background(), src, length)
				buf := make([]byte, bufSize)
				got := 0
				var err error
				for err == nil {
					var n int
					n, err = b.Read(buf)
					got += n
				}
				if !errors.Is(err, errFixity) {
					t.Errorf("withLast=%t buf=%d length=%d: error %v, want the body's", withLast, bufSize, length, err)
				}
				if got >= 100 {
					t.Errorf("withLast=%t buf=%d length=%d: %d bytes handed over before the error, want fewer than 100", withLast, bufSize, length, got)
				}
				if n, err2 := b.Read(buf); n != 0 || err2 != err {
					t.Errorf("Read after the error = %d, %v; want 0, the same error", n, err2)
				}
			}
		}
	}
}

func TestBodyReaderLength(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		length int64
	}{
		{"longer", "abcdef", 5},
		{"shorter", "abcd", 5},
		{"empty, length 1", "", 1},
		{"one byte, length 0", "a", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBodyReader(context.Background(), strings.NewReader(tt.body), tt.length)
			got, err := io.ReadAll(b)
			if !errclass.IsPermanent(err) {
				t.Fatalf("error %v, want a permanent one", err)
			}
			if len(got) >= len(tt.body) && len(tt.body) > 0 {
				t.Errorf("handed over all %d bytes before the error", len(got))
			}
		})
	}
}

func TestBodyReaderContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	// The context ends as the body returns its last bytes.
	src := &dataThenErr{data: []byte("0123456789"), chunk: 4, err: io.EOF}
	b := newBodyReader(ctx, readFunc(func(p []byte) (int, error) {
		n, err := src.Read(p)
		if len(src.data) == 0 {
			cancel()
		}
		return n, err
	}), 10)
	got, err := io.ReadAll(b)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if len(got) >= 10 {
		t.Errorf("handed over all %d bytes", len(got))
	}
}

func TestBodyReaderNoProgress(t *testing.T) {
	b := newBodyReader(context.Background(), readFunc(func([]byte) (int, error) { return 0, nil }), -1)
	if _, err := b.Read(make([]byte, 10)); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("error %v, want io.ErrNoProgress", err)
	}
}

func TestBodyReaderDrain(t *testing.T) {
	b := newBodyReader(context.Background(), strings.NewReader(""), 0)
	if err := b.drain(); err != nil || !b.ended {
		t.Fatalf("drain = %v, ended %t; want nil, true", err, b.ended)
	}
	errBody := errors.New("body failed")
	b = newBodyReader(context.Background(), iotest.ErrReader(errBody), 0)
	if err := b.drain(); !errors.Is(err, errBody) {
		t.Fatalf("drain = %v, want the body's error", err)
	}
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }
