package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/minio/minio-go/v7"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

// layoutURIs are sinktest's odd URIs and a few that only matter for keys.
func layoutURIs() []string {
	const h = "http://example.com/"
	return append(sinktest.OddURIs(),
		h+" ../x", h+". /x", h+"x/ . /y", h+"  ..  ",
		h+strings.Repeat("k", 1024-len("http/example.com/@")),   // a key of exactly 1024 bytes
		h+strings.Repeat("k", 1024-len("http/example.com/@")+1), // one byte more
		h+strings.Repeat("日本", 200),
		h+"a__XLDIR__", h+"d__XLDIR__/b", h+"e__xldir__", // names MinIO lists as directories
	)
}

func TestKeyRoundTrip(t *testing.T) {
	for _, prefix := range []string{"", "mirror/", "a/b/c/"} {
		keys := map[string]string{}
		for _, uri := range layoutURIs() {
			key, hashed := objectKey(prefix, uri)
			if !utf8.ValidString(key) || len(key) > maxKey || !storable(key) || !strings.HasPrefix(key, prefix) {
				t.Errorf("objectKey(%q, %s) = %q: not a storable key under the prefix", prefix, short(uri), key)
			}
			if other, dup := keys[key]; dup {
				t.Errorf("%s and %s share the key %q", short(uri), short(other), key)
			}
			keys[key] = uri
			kind, got, err := parseKey(prefix, key)
			switch {
			case hashed:
				if kind != hashedMain || key != hashedKey(prefix, uri) {
					t.Errorf("hashed key %q of %s parsed as %v, %v", key, short(uri), kind, err)
				}
				if plain := prefix + fs.Encode(uri); len(plain) <= maxKey && storable(plain) {
					t.Errorf("%s hashed although its key %q is fine", short(uri), plain)
				}
				if kind, _, _ := parseKey(prefix, key+uriSuffix); kind != hashedURI {
					t.Errorf("the URI object of %q parsed as %v", key, kind)
				}
			case kind != plainKey || got != uri || err != nil:
				t.Errorf("parseKey(%q) = %v, %s, %v; want %s", key, kind, short(got), err, short(uri))
			}
		}
		// No key is a "directory" of another.
		for key := range keys {
			for i := strings.IndexByte(key, '/'); i >= 0; i = next(key, i) {
				if uri, ok := keys[key[:i]]; ok {
					t.Errorf("key %q of %s is a directory of %q", key[:i], short(uri), key)
				}
			}
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func next(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func TestKeyExamples(t *testing.T) {
	long := "http://example.com/" + strings.Repeat("x", 2000)
	tests := []struct{ prefix, uri, key string }{
		{"p/", "http://example.com/a/b.txt?x=1", "p/http/example.com/a/@b.txt?x=1"},
		{"p/", "http://example.com/a/", "p/http/example.com/a/@"},
		{"", "urn:isbn:0451450523", "_other/@urn:isbn:0451450523"},
		{"", "http://example.com/ ../x", "_long/" + sha256Hex("http://example.com/ ../x")},
		{"p/", long, "p/_long/" + sha256Hex(long)},
	}
	for _, tt := range tests {
		if got, _ := objectKey(tt.prefix, tt.uri); got != tt.key {
			t.Errorf("objectKey(%q, %s) = %q, want %q", tt.prefix, short(tt.uri), got, tt.key)
		}
	}
}

func TestParseKeyForeign(t *testing.T) {
	for _, key := range []string{
		"p/readme.txt",
		"p/http/example.com/a",               // no "@"
		"p/_long/abc",                        // not a SHA-256
		"p/_long/" + strings.Repeat("A", 64), // upper case
		"p/_long/" + sha256Hex("x") + ".txt",
		"q/http/example.com/@a", // outside the prefix
		"p/http/example.com/%2e%2e/@a",
	} {
		if kind, uri, err := parseKey("p/", key); kind != foreignKey || err == nil {
			t.Errorf("parseKey(%q) = %v, %q, %v; want a foreign key", key, kind, uri, err)
		}
	}
}

func TestCleanPrefix(t *testing.T) {
	good := map[string]string{"": "", "/": "", "a": "a/", "/a/b": "a/b/", "a/b/": "a/b/", "é x": "é x/"}
	for in, want := range good {
		if got, err := cleanPrefix(in); got != want || err != nil {
			t.Errorf("cleanPrefix(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"a//b", "a/../b", "./a", "a/ . /b", "\xff", "a\x00", strings.Repeat("p", maxPrefix)} {
		if got, err := cleanPrefix(in); err == nil {
			t.Errorf("cleanPrefix(%q) = %q, want an error", in, got)
		}
	}
}

func TestMetaEscaping(t *testing.T) {
	for _, uri := range layoutURIs() {
		esc := escapeMeta(uri)
		if !validHeaderValue(esc) || strings.ContainsAny(esc, " \t") {
			t.Errorf("escapeMeta(%s) = %q: not a header value", short(uri), esc)
		}
		if got, err := unescapeMeta(esc); got != uri || err != nil {
			t.Errorf("unescapeMeta(escapeMeta(%s)) = %s, %v", short(uri), short(got), err)
		}
	}
	if got := escapeMeta("http://example.com/a?b=c"); got != "http://example.com/a?b=c" {
		t.Errorf("an ASCII URI was escaped: %q", got)
	}
	for _, bad := range []string{"%", "%4", "%zz"} {
		if _, err := unescapeMeta(bad); err == nil {
			t.Errorf("unescapeMeta(%q) succeeded", bad)
		}
	}
}

func TestParseSpec(t *testing.T) {
	opts, err := parseSpec("//bucket/some/prefix?endpoint=127.0.0.1:9000&region=eu-west-1&secure=false&concurrency=3&partsize=32MiB")
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Endpoint: "127.0.0.1:9000", Region: "eu-west-1", Bucket: "bucket", Prefix: "/some/prefix",
		Concurrency: 3, PartSize: 32 << 20}
	if opts != want {
		t.Errorf("parseSpec = %+v, want %+v", opts, want)
	}
	opts, err = parseSpec("//bucket")
	if err != nil || opts.Endpoint != defaultEndpoint || !opts.Secure || opts.Prefix != "" {
		t.Errorf("parseSpec(//bucket) = %+v, %v; want the defaults", opts, err)
	}
	for _, arg := range []string{
		"", "bucket", "/bucket", "//", "//?endpoint=x", "//b?unknown=1", "//b?secure=maybe",
		"//b?concurrency=0", "//b?concurrency=x", "//b?partsize=0", "//b?partsize=1TiB", "//b?partsize=6GiB",
		"//b#frag", "//b?%zz",
	} {
		if opts, err := parseSpec(arg); err == nil {
			t.Errorf("parseSpec(%q) = %+v, want an error", arg, opts)
		}
	}
	const secret = "sEcReT-in-the-spec"
	for _, arg := range []string{"//AKIA:" + secret + "@bucket/p", "//AKIA:" + secret + "@bucket/p?x=%zz", "//AKIA:" + secret + "@bu cket"} {
		_, err := parseSpec(arg)
		if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "AKIA") {
			t.Errorf("parseSpec with credentials: error %v, want one without them", err)
		}
	}
}

func TestOptionsStringHidesCredentials(t *testing.T) {
	o := Options{Endpoint: "h:1", Bucket: "b", AccessKey: "AKIAEXAMPLE", SecretKey: "very-secret", SessionToken: "tok-123"}
	for _, s := range []string{o.String(), fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%v", &o)} {
		for _, cred := range []string{o.AccessKey, o.SecretKey, o.SessionToken} {
			if strings.Contains(s, cred) {
				t.Errorf("%q shows a credential", s)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		err  error
		want errclass.Class
	}{
		{"network", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, errclass.Retryable},
		{"unknown", errors.New("something"), errclass.Retryable},
		{"5xx", minio.ErrorResponse{StatusCode: 500, Code: "InternalError"}, errclass.Retryable},
		{"503 slow down", minio.ErrorResponse{StatusCode: 503, Code: "SlowDown"}, errclass.Retryable},
		{"429", minio.ErrorResponse{StatusCode: 429, Code: "TooManyRequests"}, errclass.Retryable},
		{"timeout code", minio.ErrorResponse{StatusCode: 400, Code: "RequestTimeout"}, errclass.Retryable},
		{"no such bucket", minio.ErrorResponse{StatusCode: 404, Code: "NoSuchBucket"}, errclass.Fatal},
		{"bad key id", minio.ErrorResponse{StatusCode: 403, Code: "InvalidAccessKeyId"}, errclass.Fatal},
		{"bad signature", minio.ErrorResponse{StatusCode: 403, Code: "SignatureDoesNotMatch"}, errclass.Fatal},
		{"access denied", minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied"}, errclass.Permanent},
		{"metadata too large", minio.ErrorResponse{StatusCode: 400, Code: "MetadataTooLarge"}, errclass.Permanent},
		{"client-side argument", minio.ErrorResponse{StatusCode: 400, Code: "InvalidArgument"}, errclass.Permanent},
	}
	for _, tt := range tests {
		got := classify(ctx, "op", tt.err)
		if errclass.Of(got) != tt.want {
			t.Errorf("%s: class %v, want %v (%v)", tt.name, errclass.Of(got), tt.want, got)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("%s: %v does not wrap the cause", tt.name, got)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	got := classify(cancelled, "op", minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied"})
	if !errclass.IsRetryable(got) || !errors.Is(got, context.Canceled) {
		t.Errorf("with a cancelled ctx: %v (%v), want retryable context.Canceled", got, errclass.Of(got))
	}
}
