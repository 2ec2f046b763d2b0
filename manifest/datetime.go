package manifest

import (
	"errors"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// ErrDatetime is wrapped by every error ParseDatetime returns.
var ErrDatetime = errors.New("invalid W3C datetime")

// ParseDatetime parses a W3C Datetime (the profile of ISO 8601 that the
// sitemap protocol and ResourceSync use) and returns it in UTC. The forms
// accepted are
//
//	YYYY
//	YYYY-MM
//	YYYY-MM-DD
//	YYYY-MM-DDThh:mmTZD
//	YYYY-MM-DDThh:mm:ssTZD
//	YYYY-MM-DDThh:mm:ss.sTZD
//
// where TZD is "Z" or an offset "+hh:mm" / "-hh:mm", and the fraction has
// one or more digits (digits beyond nanoseconds are truncated). A lower-case
// "t" or "z" is accepted as RFC 3339 allows. A date without a time is
// midnight UTC at the start of the period it names. Leading and trailing
// whitespace is ignored. Every field is range-checked (month 1-12, day valid
// for the month, hour 0-23, minute and second 0-59; no leap second), a time
// without a zone designator is rejected, and so is a value that falls
// outside the years 0000-9999 once converted to UTC. Errors are permanent
// (errclass) and wrap ErrDatetime.
func ParseDatetime(s string) (time.Time, error) {
	v := strings.TrimSpace(s)
	t, why := parseW3C(v)
	if why != "" {
		return time.Time{}, errclass.Permanentf("%w %q: %s", ErrDatetime, trunc(v, 64), why)
	}
	return t, nil
}

// parseW3C parses a trimmed W3C Datetime. It returns a non-empty reason when
// s is not one.
func parseW3C(s string) (time.Time, string) {
	num := func(i, n int) (int, bool) {
		if i+n > len(s) {
			return 0, false
		}
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	sep := func(i int, c byte) bool { return i < len(s) && s[i] == c }

	year, ok := num(0, 4)
	if !ok {
		return time.Time{}, "want a four-digit year"
	}
	if len(s) == 4 {
		return time.Date(year, time.January, 1, 0, 0, 0, 0, time.UTC), ""
	}
	if !sep(4, '-') {
		return time.Time{}, "want '-' after the year"
	}
	month, ok := num(5, 2)
	if !ok || month < 1 || month > 12 {
		return time.Time{}, "want a month 01-12"
	}
	if len(s) == 7 {
		return time.Date(year, time.Month(month), 1, 0, 0, 0, 0, time.UTC), ""
	}
	if !sep(7, '-') {
		return time.Time{}, "want '-' after the month"
	}
	day, ok := num(8, 2)
	if !ok || day < 1 || day > daysIn(year, month) {
		return time.Time{}, "want a day that exists in the month"
	}
	if len(s) == 10 {
		return time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC), ""
	}
	if !sep(10, 'T') && !sep(10, 't') {
		return time.Time{}, "want 'T' between date and time"
	}
	hour, ok := num(11, 2)
	if !ok || hour > 23 {
		return time.Time{}, "want an hour 00-23"
	}
	if !sep(13, ':') {
		return time.Time{}, "want ':' after the hour"
	}
	minute, ok := num(14, 2)
	if !ok || minute > 59 {
		return time.Time{}, "want a minute 00-59"
	}
	i := 16
	sec, nsec := 0, 0
	if sep(i, ':') {
		sec, ok = num(i+1, 2)
		if !ok || sec > 59 {
			return time.Time{}, "want a second 00-59"
		}
		i += 3
		if sep(i, '.') {
			i++
			start := i
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				if i-start < 9 {
					nsec = nsec*10 + int(s[i]-'0')
				}
				i++
			}
			if i == start {
				return time.Time{}, "want digits after '.'"
			}
			for n := i - start; n < 9; n++ {
				nsec *= 10
			}
		}
	}
	if i >= len(s) {
		return time.Time{}, "a time needs a zone designator (Z or ±hh:mm)"
	}
	offset := 0
	switch s[i] {
	case 'Z', 'z':
		i++
	case '+', '-':
		oh, ok1 := num(i+1, 2)
		om, ok2 := num(i+4, 2)
		if !ok1 || !ok2 || !sep(i+3, ':') || oh > 23 || om > 59 {
			return time.Time{}, "want a zone offset ±hh:mm"
		}
		offset = oh*3600 + om*60
		if s[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return time.Time{}, "want a zone designator (Z or ±hh:mm)"
	}
	if i != len(s) {
		return time.Time{}, "unexpected text after the zone designator"
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.FixedZone("", offset)).UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, "out of range in UTC (years 0000-9999)"
	}
	return t, ""
}

// daysIn returns the number of days of month (1-12) in year.
func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// trunc shortens s for an error message.
func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// ParseDatetimeLenient parses a datetime as real producers write it when
// they do not write a W3C Datetime. It first tries ParseDatetime; when that
// fails it accepts
//
//   - a space instead of the "T" between date and time,
//   - a time without a zone designator, taken as UTC,
//   - a zone offset without its colon ("+0530"),
//   - an HTTP date (RFC 1123, RFC 850, ANSI C asctime) and RFC 1123 with a
//     numeric zone,
//
// and reports lenient = true. Otherwise it returns ParseDatetime's error.
func ParseDatetimeLenient(s string) (t time.Time, lenient bool, err error) {
	t, err = ParseDatetime(s)
	if err == nil {
		return t, false, nil
	}
	v := strings.TrimSpace(s)
	if lt, ok := lenientW3C(v); ok {
		return lt, true, nil
	}
	for _, layout := range []string{time.RFC1123, time.RFC1123Z, time.RFC850, time.ANSIC} {
		if lt, perr := time.Parse(layout, v); perr == nil {
			if y := lt.UTC().Year(); y >= 0 && y <= 9999 {
				return lt.UTC(), true, nil
			}
		}
	}
	return time.Time{}, false, err
}

// lenientW3C mends the deviations from W3C Datetime that
// ParseDatetimeLenient accepts and parses the result strictly.
func lenientW3C(v string) (time.Time, bool) {
	if len(v) < 16 || v[4] != '-' || v[7] != '-' {
		return time.Time{}, false
	}
	b := []byte(v)
	if b[10] == ' ' {
		b[10] = 'T'
	}
	s := string(b)
	// The zone: none, or ±hhmm without a colon.
	rest := s[16:] // after YYYY-MM-DDThh:mm
	if len(rest) >= 3 && rest[0] == ':' {
		rest = rest[3:]
		if len(rest) > 0 && rest[0] == '.' {
			i := 1
			for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
				i++
			}
			rest = rest[i:]
		}
	}
	clock := s[:len(s)-len(rest)]
	switch {
	case rest == "":
		s = clock + "Z"
	case len(rest) == 5 && (rest[0] == '+' || rest[0] == '-'):
		s = clock + rest[:3] + ":" + rest[3:]
	case rest == " UTC" || rest == " GMT" || rest == "UTC" || rest == "GMT":
		s = clock + "Z"
	}
	t, why := parseW3C(s)
	return t, why == ""
}
