package sink

import (
	"strings"
	"testing"
)

// TestRedact: a sink spec loses its credentials (user info, also when the
// URL lacks "//" or a password's "/" is not escaped, and query parameters
// named like secrets) and keeps the rest as it is — a path with an "@"
// included, since the redacted spec names the sink in the state.
func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
		secret     string // must not appear
	}{
		{"es:http://elastic:s3cret@127.0.0.1:9200/res", "es:http://%E2%80%A6@127.0.0.1:9200/res", "s3cret"},
		{"es:elastic:s3cret@127.0.0.1:9200/res", "", "s3cret"},
		{"es:http://elastic:4711/s3cret@127.0.0.1:9200/res", "", "s3cret"},
		{"es:http://elastic:s3cr/et@127.0.0.1:9200/res", "", "s3cr"},
		{"s3:http://127.0.0.1:9000/bucket?secret_key=s3cret&region=x", "", "s3cret"},
		{"s3://bucket/p?endpoint=AKIA:s3cret@127.0.0.1:9000&secure=false", "s3://bucket/p?endpoint=%E2%80%A6%40127.0.0.1%3A9000&secure=false", "s3cret"},
		{"s3://bucket/p?endpoint=127.0.0.1:9000", "s3://bucket/p?endpoint=127.0.0.1:9000", ""},
		{"fs:/data/mirror", "fs:/data/mirror", ""},
		{"fs:backup@2024/mirror", "fs:backup@2024/mirror", ""},
		{"fs:/srv/user@host/mirror", "fs:/srv/user@host/mirror", ""},
		{"solr:http://127.0.0.1:8983/solr/core", "solr:http://127.0.0.1:8983/solr/core", ""},
	} {
		got := Redact(tc.spec)
		if tc.want != "" && got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.spec, got, tc.want)
		}
		if tc.secret != "" && strings.Contains(got, tc.secret) {
			t.Errorf("Redact(%q) = %q: shows %q", tc.spec, got, tc.secret)
		}
	}
}
