package errclass

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, Unclassified},
		{"plain", io.EOF, Unclassified},
		{"retryable", NewRetryable(io.ErrUnexpectedEOF), Retryable},
		{"permanent wrapped", fmt.Errorf("ctx: %w", NewPermanent(io.EOF)), Permanent},
		{"fatalf", Fatalf("bad %w", io.EOF), Fatal},
		{"outermost wins", NewPermanent(NewRetryable(io.EOF)), Permanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.err); got != tt.want {
				t.Fatalf("Of() = %v, want %v", got, tt.want)
			}
		})
	}
	if !errors.Is(Fatalf("x: %w", io.EOF), io.EOF) {
		t.Fatal("classified error must unwrap to its cause")
	}
	if NewRetryable(nil) != nil {
		t.Fatal("nil stays nil")
	}
}

func TestAbout(t *testing.T) {
	const u = "http://x/d.xml"
	for _, tt := range []struct {
		err  error
		want string
	}{
		{Permanentf("GET %s: gone", u), "GET " + u + ": gone"},
		{Permanentf("malformed"), u + ": malformed"},
	} {
		got := About(u, tt.err)
		if got.Error() != tt.want || !IsPermanent(got) || !errors.Is(got, tt.err) {
			t.Errorf("About = %v, want %q, permanent, wrapping", got, tt.want)
		}
	}
	if About(u, nil) != nil {
		t.Error("About(nil) is not nil")
	}
}
