package s3

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/sink"
)

// TestMetadataFitsTheUserMetadataLimit puts resources whose URI and
// sets each stay within the sink's own caps (maxURIMeta, maxSetsMeta, 1 KiB
// each), with all three digests and a lastmod. S3 (and MinIO) cap the user
// metadata of an object at 2 KiB in all; the sink keeps within it, by
// leaving out what does not fit, rather than fail the resource for good.
func TestMetadataFitsTheUserMetadataLimit(t *testing.T) {
	srv := minioFor(t)
	s := open(t, srv.options(srv.newBucket(t), "meta"))
	body := "a record"
	md5sum := md5.Sum([]byte(body))
	sha1sum := sha1.Sum([]byte(body))
	shasum := sha256.Sum256([]byte(body))
	// 40 setSpecs of 24 bytes: 999 bytes joined, under maxSetsMeta.
	var sets []string
	for i := range 40 {
		sets = append(sets, fmt.Sprintf("com_123456789_%09d", i))
	}
	tests := []struct {
		name string
		uri  string
	}{
		// An OAI-PMH identifier may be up to 4 KiB (docs/safety.md).
		{"long OAI identifier", "oai:repository.example.org:" + strings.Repeat("x", 900)},
		{"URI of exactly maxURIMeta bytes", "http://example.com/" + strings.Repeat("y", maxURIMeta-len("http://example.com/"))},
		{"short identifier, sets only", "oai:repository.example.org:1234"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := len(strings.Join(sets, " ")); n > maxSetsMeta {
				t.Fatalf("test setup: sets are %d bytes", n)
			}
			r := &sink.Resource{
				URI: tt.uri, Length: int64(len(body)), Type: "application/xml",
				Hashes:  fixity.Hashes{MD5: md5sum[:], SHA1: sha1sum[:], SHA256: shasum[:]},
				Lastmod: time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC),
				Sets:    sets,
			}
			size := 0
			for k, v := range s.putOptions(r).UserMetadata {
				size += len("X-Amz-Meta-") + len(k) + len(v)
			}
			if err := s.Put(t.Context(), r, strings.NewReader(body)); err != nil {
				t.Fatalf("Put with %d bytes of user metadata: %v", size, err)
			}
			if got, ok := get(t, s, tt.uri); !ok || got != body {
				t.Errorf("Get = %q, %t", got, ok)
			}
		})
	}
}
