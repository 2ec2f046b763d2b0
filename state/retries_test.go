package state

import (
	"context"
	"testing"
	"time"
)

// TestRetries: an outstanding retry is replaced by a retry of a newer
// change, not of an older one; a version held clears the retries it is
// not older than, and only those; Resolved clears one the version
// recorded is not older than;
// Retries gives them back by set, with their change times.
func TestRetries(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	at := func(h int) time.Time { return time.Date(2024, 1, 1, h, 0, 0, 0, time.UTC) }
	const src, set = "http://a/", "http://a/capabilitylist.xml"
	retry := func(uri, record string, ct time.Time) Retry {
		return Retry{Source: src, URI: uri, ResourceSet: set, Record: record, ChangeTime: ct}
	}
	held := func(uri string, ct time.Time) Resource {
		return Resource{URI: uri, Source: src, ResourceSet: set, Length: 1, Outcome: OutcomeWritten, ChangeTime: ct}
	}
	outstanding := func() map[string]Retry {
		t.Helper()
		rs, err := s.Retries(ctx, src, set)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Retry{}
		for _, r := range rs {
			out[r.URI] = r
		}
		return out
	}
	steps := []struct {
		name string
		b    Batch
		want map[string]string // URI → record outstanding
	}{
		{"recorded", Batch{Retries: []Retry{retry("a", "a@2", at(2)), retry("b", "b@2", at(2)), retry("c", "c@2", at(2)), retry("d", "d", time.Time{})}},
			map[string]string{"a": "a@2", "b": "b@2", "c": "c@2", "d": "d"}},
		{"an older change does not replace, a newer does", Batch{Retries: []Retry{retry("a", "a@1", at(1)), retry("b", "b@3", at(3))}},
			map[string]string{"a": "a@2", "b": "b@3", "c": "c@2", "d": "d"}},
		{"an older version held clears nothing", Batch{Resources: []Resource{held("a", at(1))}},
			map[string]string{"a": "a@2", "b": "b@3", "c": "c@2", "d": "d"}},
		{"a version as new, or newer, clears", Batch{Resources: []Resource{held("a", at(2)), held("b", at(4)), held("d", at(1))}},
			map[string]string{"c": "c@2"}},
		{"a failed outcome clears nothing", Batch{Resources: []Resource{{URI: "c", Source: src, ResourceSet: set, Length: -1, Outcome: OutcomeFailed, ChangeTime: at(5)}}},
			map[string]string{"c": "c@2"}},
		{"resolved clears", Batch{Resolved: []Key{{src, "c"}}}, map[string]string{}},
	}
	for _, st := range steps {
		if err := s.Commit(ctx, st.b); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := outstanding()
		if len(got) != len(st.want) {
			t.Fatalf("%s: outstanding %v, want %v", st.name, got, st.want)
		}
		for uri, rec := range st.want {
			if got[uri].Record != rec {
				t.Errorf("%s: %s is %q, want %q", st.name, uri, got[uri].Record, rec)
			}
		}
	}
	if err := s.Commit(ctx, Batch{Retries: []Retry{retry("e", "e", at(7))}}); err != nil {
		t.Fatal(err)
	}
	if r := outstanding()["e"]; !r.ChangeTime.Equal(at(7)) {
		t.Errorf("change time %v, want %v", r.ChangeTime, at(7))
	}
	if rs, err := s.Retries(ctx, src, "another set"); err != nil || len(rs) != 0 {
		t.Errorf("another set's retries: %v %v", rs, err)
	}
}
