package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDatetimeLenient(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return v.UTC()
	}
	tests := []struct {
		in      string
		want    time.Time
		lenient bool
		bad     bool
	}{
		{in: "2013-01-02T13:00:00Z", want: utc("2013-01-02T13:00:00Z")},
		{in: "2013-01-02", want: utc("2013-01-02T00:00:00Z")},
		{in: "2013-01-02T13:00:00", want: utc("2013-01-02T13:00:00Z"), lenient: true},
		{in: "2013-01-02T13:00", want: utc("2013-01-02T13:00:00Z"), lenient: true},
		{in: "2013-01-02T13:00:00.25", want: utc("2013-01-02T13:00:00.25Z"), lenient: true},
		{in: "2013-01-02T13:00:00+0530", want: utc("2013-01-02T07:30:00Z"), lenient: true},
		{in: "2013-01-02T13:00:00-0100", want: utc("2013-01-02T14:00:00Z"), lenient: true},
		{in: "2013-01-02 13:00:00", want: utc("2013-01-02T13:00:00Z"), lenient: true},
		{in: "2013-01-02 13:00:00+01:00", want: utc("2013-01-02T12:00:00Z"), lenient: true},
		{in: "2013-01-02 13:00:00 UTC", want: utc("2013-01-02T13:00:00Z"), lenient: true},
		{in: "Wed, 02 Jan 2013 13:00:00 GMT", want: utc("2013-01-02T13:00:00Z"), lenient: true},
		{in: "Wed, 02 Jan 2013 13:00:00 +0100", want: utc("2013-01-02T12:00:00Z"), lenient: true},
		{in: "Wednesday, 02-Jan-13 13:00:00 GMT", want: utc("2013-01-02T13:00:00Z"), lenient: true},
		{in: "Wed Jan  2 13:00:00 2013", want: utc("2013-01-02T13:00:00Z"), lenient: true},
		{in: "2013-13-45T99:99Z", bad: true},
		{in: "2013-02-30 10:00:00", bad: true},
		{in: "yesterday", bad: true},
		{in: "", bad: true},
		{in: "2013-01-02T13:00:00+05", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, lenient, err := ParseDatetimeLenient(tt.in)
			if tt.bad {
				if err == nil || !errors.Is(err, ErrDatetime) {
					t.Fatalf("got %v, %v; want ErrDatetime", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) || lenient != tt.lenient || got.Location() != time.UTC {
				t.Fatalf("got %v lenient=%v, want %v lenient=%v", got, lenient, tt.want, tt.lenient)
			}
		})
	}
}

// TestDatetimesSnapshotAndChange: a datetime that is not W3C is read
// leniently everywhere; one that cannot be read is dropped from a snapshot
// entry (the entry is kept) and fails a change entry alone.
func TestDatetimesSnapshotAndChange(t *testing.T) {
	body := `
  <url><loc>http://x/lenient</loc><lastmod>2013-01-02 10:00:00</lastmod><rs:md change="updated" datetime="2013-01-02T10:00:00+0100"/></url>
  <url><loc>http://x/unusable</loc><lastmod>2013-13-45T99:99Z</lastmod><rs:md change="updated"/></url>
  <url><loc>http://x/good</loc><lastmod>2013-01-03T00:00:00Z</lastmod><rs:md change="created"/></url>
`
	for _, tt := range []struct {
		capability string
		good       []string
		bad        []string
	}{
		{"resourcelist", []string{"http://x/lenient", "http://x/unusable", "http://x/good"}, nil},
		{"resourcedump-manifest", []string{"http://x/lenient", "http://x/unusable", "http://x/good"}, nil},
		{"changelist", []string{"http://x/lenient", "http://x/good"}, []string{"http://x/unusable"}},
		{"changedump-manifest", []string{"http://x/lenient", "http://x/good"}, []string{"http://x/unusable"}},
	} {
		t.Run(tt.capability, func(t *testing.T) {
			res := readString(t, doc(`<rs:md capability="`+tt.capability+`"/>`+body))
			if res.err != nil {
				t.Fatal(res.err)
			}
			var good []string
			for _, e := range res.entries {
				good = append(good, e.Loc)
			}
			if strings.Join(good, " ") != strings.Join(tt.good, " ") {
				t.Fatalf("entries %v, want %v", good, tt.good)
			}
			if want := time.Date(2013, 1, 2, 10, 0, 0, 0, time.UTC); !res.entries[0].Lastmod.Equal(want) {
				t.Errorf("lenient lastmod %v, want %v", res.entries[0].Lastmod, want)
			}
			if want := time.Date(2013, 1, 2, 9, 0, 0, 0, time.UTC); !res.entries[0].Metadata.Datetime.Equal(want) {
				t.Errorf("lenient datetime %v, want %v", res.entries[0].Metadata.Datetime, want)
			}
			if len(res.bad) != len(tt.bad) {
				t.Fatalf("entry errors %v, want %d", res.bad, len(tt.bad))
			}
			for i, b := range res.bad {
				var ee *EntryError
				if !errors.As(b, &ee) || ee.Loc != tt.bad[i] || !errors.Is(b, ErrDatetime) || !strings.Contains(b.Error(), "lastmod") {
					t.Errorf("entry error %v, want a datetime error naming %s and <lastmod>", b, tt.bad[i])
				}
			}
			if !strings.Contains(res.warn, "read leniently") {
				t.Errorf("no warning for the lenient datetime: %s", res.warn)
			}
		})
	}
}
