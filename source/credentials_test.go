package source

import "testing"

func TestCredentials(t *testing.T) {
	tests := []struct {
		raw, fetch, auth string
	}{
		{"https://example.org/rs/", "https://example.org/rs/", ""},
		{"https://alice:s3cret@example.org/rs/", "https://example.org/rs/", "Basic YWxpY2U6czNjcmV0"},
		{"https://alice@example.org/", "https://example.org/", "Basic YWxpY2U6"},
		{"https://:tok@example.org/", "https://example.org/", "Basic OnRvaw=="},
	}
	for _, tc := range tests {
		f, a := Credentials(tc.raw)
		if f != tc.fetch || a != tc.auth {
			t.Errorf("Credentials(%s) = %s, %q; want %s, %q", tc.raw, f, a, tc.fetch, tc.auth)
		}
	}
}
