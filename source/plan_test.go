package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/source"
)

// planUnits are units of every kind a plan holds.
func planUnits() []source.Unit {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	rec := source.Record{URI: "http://example.org/r1", ResourceSet: "set", Listed: "http://example.org/cl.xml", Change: source.Updated, ChangeTime: at,
		Length: 12, Hashes: fixity.Hashes{SHA256: []byte{1, 2, 3}}, Type: "text/plain", Lastmod: at, Mirrors: []string{"http://mirror.example.org/r1"},
		Links: []source.Link{{Rel: "via", Href: "http://origin.example.org/r1", Modified: at, Length: 12}}, Path: "resources/r1", Seq: 7}
	return []source.Unit{
		{Package: &source.Package{URL: "http://example.org/p1.zip", Expect: fixity.Expect{Length: 100, Hashes: fixity.Hashes{MD5: []byte{9}}},
			Dump: "http://example.org/cd.xml", ResourceSet: "set", From: at, Until: at.Add(time.Hour), Contents: "http://example.org/p1.xml", Wins: []source.Record{rec}}},
		{Record: &rec},
		{Document: &source.Document{URL: "http://example.org/cl.xml", ResourceSet: "set", Capability: "changelist", From: at}},
		{Package: &source.Package{URL: "http://example.org/cl2.xml", List: true, Expect: fixity.Expect{Length: -1}}},
	}
}

// TestPlanRoundTrip: a plan gives back, in order, the units added to it;
// a unit that cannot be planned apart is refused; Take empties the buffer.
func TestPlanRoundTrip(t *testing.T) {
	var b source.PlanBuffer
	defer b.Close()
	want := planUnits()
	for _, u := range want {
		if err := b.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	if b.Len() != len(want) {
		t.Errorf("Len = %d, want %d", b.Len(), len(want))
	}
	plan, err := b.Take()
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 0 {
		t.Errorf("Len after Take = %d", b.Len())
	}
	var got []source.Unit
	if err := source.ReadPlan(t.Context(), plan, func(_ context.Context, u source.Unit) error {
		got = append(got, u)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		a, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("plan read back\n%s\nwant\n%s", a, w)
	}
	empty, err := b.Take()
	if err != nil {
		t.Fatal(err)
	}
	if err := source.ReadPlan(t.Context(), empty, func(context.Context, source.Unit) error {
		t.Error("an empty plan emitted a unit")
		return nil
	}); err != nil {
		t.Errorf("an empty plan: %v", err)
	}

	for name, u := range map[string]source.Unit{
		"failure":          {Failure: &source.Failure{URI: "x", Err: errors.New("x")}},
		"mark":             {Mark: &source.Mark{Key: "k"}},
		"skip":             {Skip: &source.Skip{URI: "x"}},
		"record with body": {Record: &source.Record{URI: "x", Open: func(context.Context) (io.ReadCloser, error) { return nil, nil }}},
		"nothing":          {},
	} {
		if err := b.Add(u); !errclass.IsFatal(err) {
			t.Errorf("Add(%s) = %v, want a fatal error", name, err)
		}
	}

	stop := errors.New("stop")
	if err := source.ReadPlan(t.Context(), plan, func(context.Context, source.Unit) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("ReadPlan with emit failing = %v, want its error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := source.ReadPlan(ctx, plan, func(context.Context, source.Unit) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadPlan cancelled = %v", err)
	}
}

// FuzzReadPlan: whatever bytes a plan holds, reading it never panics, and
// fails fatally or emits exactly one kind of unit each time.
func FuzzReadPlan(f *testing.F) {
	var b source.PlanBuffer
	defer b.Close()
	for _, u := range planUnits() {
		if err := b.Add(u); err != nil {
			f.Fatal(err)
		}
		plan, err := b.Take()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(plan)
	}
	f.Add([]byte{})
	f.Add([]byte("not a plan"))
	f.Fuzz(func(t *testing.T, plan []byte) {
		err := source.ReadPlan(t.Context(), plan, func(_ context.Context, u source.Unit) error {
			n := 0
			for _, set := range []bool{u.Package != nil, u.Record != nil, u.Document != nil, u.Failure != nil, u.Mark != nil, u.Skip != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				t.Errorf("a unit with %d fields set: %+v", n, u)
			}
			return nil
		})
		if err != nil && !errclass.IsFatal(err) {
			t.Errorf("ReadPlan = %v, want nil or a fatal error", err)
		}
	})
}
