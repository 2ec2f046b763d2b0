package sink

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// failing is a body whose Read fails with err.
type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// TestBodyError: a copy's error is the body's when the body's Read or the
// context stopped it — retryable for the context, a reading failure that
// keeps its cause otherwise — and nobody's (nil) when the body read
// whole, so that the sink classifies its own write error.
func TestBodyError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	writeErr := errors.New("disk full")
	tests := []struct {
		name      string
		ctx       context.Context
		body      io.Reader
		writeErr  error // what the sink's writer fails with
		want      error // wrapped by BodyError's error; nil: no body error
		retryable bool
	}{
		{"body read whole", context.Background(), strings.NewReader("abc"), nil, nil, false},
		{"the sink's own write error", context.Background(), strings.NewReader("abc"), writeErr, nil, false},
		{"fixity mismatch at the end", context.Background(), failing{fixity.ErrMismatch}, nil, fixity.ErrMismatch, false},
		{"context ended", cancelled, strings.NewReader("abc"), nil, context.Canceled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &ContextReader{Ctx: tt.ctx, R: tt.body}
			var w io.Writer = io.Discard
			if tt.writeErr != nil {
				w = errWriter{tt.writeErr}
			}
			_, err := io.Copy(w, c)
			got := c.BodyError(err, "x: put u")
			switch {
			case tt.want == nil && got != nil:
				t.Fatalf("BodyError = %v, want nil", got)
			case tt.want == nil:
				return
			case !errors.Is(got, tt.want) || !strings.HasPrefix(got.Error(), "x: put u: "):
				t.Fatalf("BodyError = %v, want one naming x: put u and wrapping %v", got, tt.want)
			}
			if errclass.IsRetryable(got) != tt.retryable {
				t.Errorf("BodyError = %v: retryable %t, want %t", got, errclass.IsRetryable(got), tt.retryable)
			}
		})
	}
}

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }
