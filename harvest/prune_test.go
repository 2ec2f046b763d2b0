package harvest

import (
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

func TestParseKeepLog(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want state.LogKeep
		bad  bool
	}{
		{in: "365d", want: state.LogKeep{Age: 365 * day}},
		{in: "12w", want: state.LogKeep{Age: 84 * day}},
		{in: "1y", want: state.LogKeep{Age: 365 * day}},
		{in: "720h", want: state.LogKeep{Age: 720 * time.Hour}},
		{in: "100", want: state.LogKeep{PerSite: 100}},
		{in: "all", want: state.LogKeep{}},
		{in: "0", bad: true},
		{in: "-5d", bad: true},
		{in: "0d", bad: true},
		{in: "d", bad: true},
		{in: "1dd", bad: true},
		{in: "a month", bad: true},
		{in: "99999999y", bad: true},
		{in: "", bad: true},
	} {
		got, err := ParseKeepLog(tc.in)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("ParseKeepLog(%q) = %+v, %v; want %+v (bad: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
	if k, err := ParseKeepLog(DefaultKeepLog); err != nil || k.Age != 365*day {
		t.Errorf("the default %q reads %+v, %v", DefaultKeepLog, k, err)
	}
}
