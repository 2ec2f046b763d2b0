package state

import (
	"strings"
	"testing"
)

func TestSourceKey(t *testing.T) {
	for raw, want := range map[string]string{
		"https://example.org/rs/":              "https://example.org/rs/",
		"https://alice:s3cret@example.org/rs/": "https://alice@example.org/rs/",
		"https://alice@example.org/":           "https://alice@example.org/",
		"http://host:8080":                     "http://host:8080/",
		"http://host:8080/":                    "http://host:8080/",
		"HTTP://Host:80/":                      "http://host/",
		"http://host":                          "http://host/",
		"https://EXAMPLE.org:443/rs/":          "https://example.org/rs/",
		"http://host:/":                        "http://host/",
		"http://host/a/./b/../c/":              "http://host/a/c/",
		"http://host/../a/..":                  "http://host/",
		"http://host/a/%7euser/%2fx%3a":        "http://host/a/~user/%2Fx%3A",
		"http://host/%41%62c?x=%7e%2f#Frag":    "http://host/Abc?x=~%2F#Frag",
		"http://host/?a=%0%61&b=%&c=%zz":       "http://host/?a=%250a&b=%25&c=%25zz",
		"http://[::1]:80/a":                    "http://[::1]/a",
		"http://[::1]:8080/a":                  "http://[::1]:8080/a",
		"https://alice:s3cret@Example.ORG:443": "https://alice@example.org/",
		"http://host/a//b/":                    "http://host/a//b/",
		"http://host/a#sinks-0a1b2c3d":         "http://host/a#sinks-0a1b2c3d",
		"http://Host:80#sinks-0a1b2c3d":        "http://host/#sinks-0a1b2c3d",
		"/var/data/list.xml":                   "/var/data/list.xml",
		"file:///var/data/list.xml":            "file:///var/data/list.xml",
		// A password that needs escaping makes a URL that does not parse.
		"https://bob:100%sure@Example.org/oai": "https://bob@example.org/oai",
		"https://bob:a/b@host/x":               "https://bob@host/x",
		"https://bob:a@b#c@host/x?q=@":         "https://bob@b/#c@host/x?q=@",
		"example.org/oai":                      "example.org/oai",
		"alice:hunter2pw@host/x":               "alice@host/x",
		"http://alice:se#cret@127.0.0.1:1/x":   "http://alice@127.0.0.1:1/x",
		"http://alice:se?cret@Host/x?q=1":      "http://alice@host/x?q=1",
		"http://host:bad/p?mail=a@b":           "http://host@b/",
	} {
		if got := SourceKey(raw); got != want {
			t.Errorf("SourceKey(%s) = %s, want %s", raw, got, want)
		}
	}
}

func TestSameSource(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://host/a", "http://host/a", true},
		{"HTTP://Host:80/a/./b", "http://host/a/b", true},
		{"https://u:p@host/", "https://u:p@HOST:443/", true},
		{"https://u:p@host/", "https://u@host/", false},
		{"https://u:p@host/", "https://u:q@host/", false},
		{"http://host/a", "http://host/b", false},
		{"http://host/%zz", "http://host/%zz/", false},
	} {
		if got := SameSource(tc.a, tc.b); got != tc.same {
			t.Errorf("SameSource(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// TestPostgresPasswordRedacted: a PostgreSQL password, given in the URL's
// user information or as a query parameter, is in no error of Open and in
// no message naming the store.
func TestPostgresPasswordRedacted(t *testing.T) {
	for _, where := range []string{
		"postgres://alice:hunter2@127.0.0.1:1/db?connect_timeout=2",
		"postgres://alice@127.0.0.1:1/db?password=hunter2&connect_timeout=2",
		"postgresql://alice@127.0.0.1:1/db?sslpassword=hunter2&password=hunter2&connect_timeout=2",
		"postgres://alice@127.0.0.1:1/db?password=hun%20ter2&connect_timeout=2",
	} {
		_, err := Open(t.Context(), where)
		if err == nil {
			t.Fatalf("Open(%s) succeeded with nothing listening", Redacted(where))
		}
		for _, secret := range []string{"hunter2", "hun ter2", "hun%20ter2"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open's error shows the password: %v", err)
			}
			if strings.Contains(Redacted(where), secret) {
				t.Errorf("Redacted(%s) shows the password", Redacted(where))
			}
		}
	}
}

// FuzzSourceKey: normalising is idempotent — a key is its own key — so a
// source named by the key it was recorded under is the same source.
func FuzzSourceKey(f *testing.F) {
	for _, s := range []string{"HTTP://Host:80/a/./b/../%7e", "http://u:p@h:8080", "http://[::1]:80/%2f?q=%7e", "x", "http://h/..//../a", "HTTPS://bob:100%@Host/", "https://b:a/b@h/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		k := SourceKey(raw)
		if again := SourceKey(k); again != k {
			t.Errorf("SourceKey(%q) = %q, but SourceKey(%q) = %q", raw, k, k, again)
		}
	})
}
