package fetch

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter parses a Retry-After header value, either delta-seconds
// ("120") or an HTTP-date ("Fri, 31 Dec 1999 23:59:59 GMT", and the obsolete
// RFC 850 and asctime forms), into a delay relative to now. A date in the
// past gives 0. Delays too large for a time.Duration saturate at its
// maximum. ok is false for an empty or malformed value; the delay is then 0.
// The returned delay is never negative.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(math.MaxInt64/time.Second) {
			// Only overflow is possible here: all digits.
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(0, t.Sub(now)), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
