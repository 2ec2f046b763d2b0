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
	} {
		if got := SourceKey(raw); got != want {
			t.Errorf("SourceKey(%s) = %s, want %s", raw, got, want)
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
