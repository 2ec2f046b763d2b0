package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/rsharvest/rsharvest/errclass"
)

// failingReader hands out body, then fails with err.
type failingReader struct {
	body []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.body) == 0 {
		return 0, f.err
	}
	n := copy(p, f.body)
	f.body = f.body[n:]
	return n, nil
}

// TestDecodeDocumentReaderErrors: an error of the reader under a
// compressed document keeps its own class (a transport's retryable error
// is retried, a cancelled context is no fault of the document); only a
// broken compressed stream is the document's permanent failure.
func TestDecodeDocumentReaderErrors(t *testing.T) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	for i := range 20000 {
		w.Write([]byte{byte(i), byte(i >> 8), byte(i * 7)}) // little to compress
	}
	w.Close()
	half := buf.Bytes()[:buf.Len()/2]
	reset := errclass.Retryablef("GET http://x/d.xml.gz: connection reset")
	tests := []struct {
		name  string
		err   error
		check func(error) bool
	}{
		{"retryable", reset, func(err error) bool { return errors.Is(err, reset) && errclass.IsRetryable(err) }},
		{"cancelled", context.Canceled, func(err error) bool { return err == context.Canceled }},
		{"deadline", context.DeadlineExceeded, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) && !errclass.IsPermanent(err) }},
		{"ended early", io.EOF, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) && errclass.IsPermanent(err) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeDocument(&failingReader{body: half, err: tt.err}, "http://x/d.xml.gz", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(io.Discard, r)
			if !tt.check(err) {
				t.Fatalf("err = %v (class %v)", err, errclass.Of(err))
			}
			if _, again := r.Read(make([]byte, 1)); again == nil || again.Error() != err.Error() {
				t.Errorf("next Read: %v, want the same error again", again)
			}
		})
	}
}
