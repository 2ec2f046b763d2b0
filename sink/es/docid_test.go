package es

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// TestDocIDsOfDistinctURIsDiffer: a URI that cannot be its own _id is
// hashed to "sha256:" + hex; a URI that already looks like that is hashed
// too, so the URI "sha256:<hex of U>" and U keep two resource documents: a
// Put of one does not replace the other, a Delete of one leaves the other.
func TestDocIDsOfDistinctURIsDiffer(t *testing.T) {
	long := "http://example.com/" + strings.Repeat("x", 600)
	invalid := "http://example.com/\xff"
	alias := func(u string) string {
		sum := sha256.Sum256([]byte(u))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	tests := []struct {
		name  string
		other string // a URI whose _id is hashed
	}{
		{"long URI", long},
		{"invalid UTF-8", invalid},
		{"empty URI", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			look := alias(tt.other)
			if id1, id2 := docID(tt.other), docID(look); id1 == id2 {
				t.Errorf("docID(%q) == docID(%q) == %q", short(tt.other), look, id1)
			}
			s, _ := newFake(t, Options{StoreBody: true})
			put(t, s, tt.other, "", "the other's body")
			put(t, s, look, "", "the look-alike's body")
			for uri, want := range map[string]string{tt.other: "the other's body", look: "the look-alike's body"} {
				rc, err := s.Get(t.Context(), uri)
				if err != nil {
					t.Errorf("Get(%s) = %v, want its body", short(uri), err)
					continue
				}
				b, _ := io.ReadAll(rc)
				rc.Close()
				if string(b) != want {
					t.Errorf("Get(%s) = %q, want %q", short(uri), b, want)
				}
			}
			var uris []string
			if err := s.Walk(t.Context(), func(uri string) error { uris = append(uris, uri); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(uris, tt.other) || !slices.Contains(uris, look) {
				t.Errorf("Walk = %q, want both URIs", uris)
			}
			// Deleting the look-alike must leave the other.
			if err := s.Delete(t.Context(), look); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(t.Context(), tt.other); errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Delete(%s) deleted %s", look, short(tt.other))
			}
			if err := s.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
