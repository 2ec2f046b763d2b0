package manifest

import (
	"errors"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

func TestParseDatetime(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2013", utc(2013, 1, 1, 0, 0, 0, 0)},
		{"2013-07", utc(2013, 7, 1, 0, 0, 0, 0)},
		{"2013-07-16", utc(2013, 7, 16, 0, 0, 0, 0)},
		{"2013-07-16T19:20Z", utc(2013, 7, 16, 19, 20, 0, 0)},
		{"2013-07-16T19:20+01:00", utc(2013, 7, 16, 18, 20, 0, 0)},
		{"2013-07-16T19:20:30Z", utc(2013, 7, 16, 19, 20, 30, 0)},
		{"2013-07-16T19:20:30-05:30", utc(2013, 7, 17, 0, 50, 30, 0)},
		{"2013-07-16T19:20:30.45+01:00", utc(2013, 7, 16, 18, 20, 30, 450000000)},
		{"2013-07-16T19:20:30.5Z", utc(2013, 7, 16, 19, 20, 30, 500000000)},
		{"2026-11-22T14:03:54.570503Z", utc(2026, 11, 22, 14, 3, 54, 570503000)},
		{"2013-07-16T19:20:30.123456789Z", utc(2013, 7, 16, 19, 20, 30, 123456789)},
		{"2013-07-16T19:20:30.1234567891234Z", utc(2013, 7, 16, 19, 20, 30, 123456789)},
		{"  \n2013-01-02T13:00:00Z\t ", utc(2013, 1, 2, 13, 0, 0, 0)},
		{"2013-01-02t13:00:00z", utc(2013, 1, 2, 13, 0, 0, 0)},
		{"2012-02-29", utc(2012, 2, 29, 0, 0, 0, 0)},
		{"2000-02-29", utc(2000, 2, 29, 0, 0, 0, 0)},
		{"2013-12-31T23:59:59-00:00", utc(2013, 12, 31, 23, 59, 59, 0)},
		{"2013-12-31T23:30-01:00", utc(2014, 1, 1, 0, 30, 0, 0)},
		{"0000-06-01", utc(0, 6, 1, 0, 0, 0, 0)},
		{"9999-12-31T23:59:59.999999999Z", utc(9999, 12, 31, 23, 59, 59, 999999999)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDatetime(tt.in)
			if err != nil {
				t.Fatalf("ParseDatetime(%q): %v", tt.in, err)
			}
			if !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Fatalf("ParseDatetime(%q) = %v, want %v in UTC", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseDatetimeErrors(t *testing.T) {
	for _, in := range []string{
		"", " ", "13", "201", "20133", "2013-", "2013-7", "2013-00", "2013-13", "2013-07-", "2013-07-1",
		"2013-02-29", "1900-02-29", "2013-04-31", "2013-07-00", "2013-07-32", "2013/07/16",
		"2013-07-16T", "2013-07-16T19", "2013-07-16T19:20", "2013-07-16T19:20:30",
		"2013-07-16 19:20:30Z", "2013-07-16T24:00:00Z", "2013-07-16T19:60:00Z", "2013-07-16T19:20:60Z",
		"2013-07-16T19:20:30.Z", "2013-07-16T19:20:30,5Z", "2013-07-16T19:20:30+01", "2013-07-16T19:20:30+0100",
		"2013-07-16T19:20:30+24:00", "2013-07-16T19:20:30+01:60", "2013-07-16T19:20:30ZZ", "2013-07-16T19:20:30Z ?",
		"2013-07-16T1:20:30Z", "2013-07-16T19:2:30Z", "-2013-07-16", "+2013", "２０１３", "2013-07-16T19:20:30 Z",
		"0000-01-01T00:00+00:01", "9999-12-31T23:59-00:01", "2013-07-16T19:20:30.5", "2013-07-16T19:20.5Z",
	} {
		t.Run(in, func(t *testing.T) {
			got, err := ParseDatetime(in)
			if err == nil {
				t.Fatalf("ParseDatetime(%q) = %v, want an error", in, got)
			}
			if !errors.Is(err, ErrDatetime) || !errclass.IsPermanent(err) {
				t.Fatalf("error %v: want permanent and wrapping ErrDatetime", err)
			}
			if !got.IsZero() {
				t.Fatalf("error with non-zero time %v", got)
			}
		})
	}
}

func FuzzParseDatetime(f *testing.F) {
	for _, s := range []string{
		"2013", "2013-01", "2013-01-02", "2013-01-02T13:00Z", "2013-01-02T13:00:00Z",
		"2013-01-02T13:00:00.5+01:00", "2026-11-22T14:03:54.570503Z", "0000-01-01T00:00:00+00:00",
		"9999-12-31T23:59:59.999999999999-00:00", "2012-02-29T23:59:59-23:59", " 2013-01-02 ", "2013-13-01",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseDatetime(s)
		if err != nil {
			if !errors.Is(err, ErrDatetime) || !errclass.IsPermanent(err) {
				t.Fatalf("ParseDatetime(%q): unclassified error %v", s, err)
			}
			return
		}
		if got.Location() != time.UTC {
			t.Fatalf("ParseDatetime(%q) = %v, not UTC", s, got)
		}
		out := FormatDatetime(got)
		again, err := ParseDatetime(out)
		if err != nil {
			t.Fatalf("ParseDatetime(%q) = %v; its formatting %q does not parse: %v", s, got, out, err)
		}
		if !again.Equal(got) {
			t.Fatalf("ParseDatetime(%q) = %v; round trip through %q gives %v", s, got, out, again)
		}
	})
}

func FuzzParseDatetimeLenient(f *testing.F) {
	for _, s := range []string{
		"2013-01-02T13:00:00Z", "2013-01-02T13:00:00", "2013-01-02 13:00", "2013-01-02T13:00:00.5+0530",
		"Wed, 02 Jan 2013 13:00:00 GMT", "Wed Jan  2 13:00:00 2013", "2013-01-02 13:00:00 UTC", "2013-13-45T99:99Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, lenient, err := ParseDatetimeLenient(s)
		strict, serr := ParseDatetime(s)
		switch {
		case err != nil:
			if serr == nil || !errors.Is(err, ErrDatetime) || !errclass.IsPermanent(err) {
				t.Fatalf("ParseDatetimeLenient(%q): %v (strict: %v)", s, err, serr)
			}
		case !lenient:
			if serr != nil || !got.Equal(strict) {
				t.Fatalf("ParseDatetimeLenient(%q) = %v, not lenient, but strict gives %v, %v", s, got, strict, serr)
			}
		case serr == nil:
			t.Fatalf("ParseDatetimeLenient(%q) lenient though strict parses it", s)
		}
		if err == nil && (got.Location() != time.UTC || got.Year() < 0 || got.Year() > 9999) {
			t.Fatalf("ParseDatetimeLenient(%q) = %v", s, got)
		}
	})
}

// TestFormatDatetime: whole seconds have no fraction, whole microseconds
// (the state's stamps) exactly six digits, finer times nine; each reads
// back as itself.
func TestFormatDatetime(t *testing.T) {
	base := time.Date(2026, 11, 26, 8, 28, 24, 0, time.UTC)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{base, "2026-11-26T08:28:24Z"},
		{base.Add(500 * time.Millisecond), "2026-11-26T08:28:24.500000Z"},
		{base.Add(682677 * time.Microsecond), "2026-11-26T08:28:24.682677Z"},
		{base.Add(time.Microsecond), "2026-11-26T08:28:24.000001Z"},
		{base.Add(682677085 * time.Nanosecond), "2026-11-26T08:28:24.682677085Z"},
		{base.Add(10 * time.Nanosecond).In(time.FixedZone("x", 3600)), "2026-11-26T08:28:24.000000010Z"},
	} {
		got := FormatDatetime(tc.t)
		if got != tc.want {
			t.Errorf("FormatDatetime(%s) = %s, want %s", tc.t, got, tc.want)
		}
		if back, err := ParseDatetime(got); err != nil || !back.Equal(tc.t) {
			t.Errorf("%s reads back as %s (%v)", got, back, err)
		}
	}
}
