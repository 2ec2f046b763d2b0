package harvestlog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

// fakeStore is a state holding one event, one finished run and one of its
// failures.
type fakeStore struct{ t0 time.Time }

func (f fakeStore) Events(context.Context, time.Time, string) ([]state.Event, error) {
	return []state.Event{{At: f.t0, Operation: Started, Message: "rsharvest run: 1 site(s): s"}}, nil
}

func (f fakeStore) RunsSince(context.Context, time.Time, string) ([]state.Run, error) {
	return []state.Run{{ID: 7, Mode: "baseline", Source: "http://x/", Site: "s", Status: "partial",
		Started: f.t0.Add(time.Second), Finished: f.t0.Add(3 * time.Second),
		Report: []byte(`{"status":"partial","resources":{"written":2,"failed":1}}`)}}, nil
}

func (f fakeStore) EachFailure(_ context.Context, _ time.Time, _ string, fn func(state.Failure) error) error {
	return fn(state.Failure{RunID: 7, URI: "http://x/a", Stage: "verify", Error: "no md5", Permanent: true, At: f.t0.Add(2 * time.Second)})
}

// TestRead: the events, each run begun and ended with its counts, and its
// failures, in time order, as text.
func TestRead(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l, err := Open(context.Background(), fakeStore{t0}, time.Time{}, "")
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	if err := l.Each(context.Background(), func(e Entry) error {
		ops = append(ops, e.Operation)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ops, ","); got != "harvester started,harvest begun,failed,harvest ended" {
		t.Fatalf("operations %s", got)
	}
	var b strings.Builder
	if err := l.WriteText(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"2026-01-02T03:04:05Z  -  harvester started  rsharvest run: 1 site(s): s",
		"s  harvest begun      run 7: baseline of http://x/",
		"s  failed             run 7: permanent, verify: http://x/a: no md5",
		"s  harvest ended      run 7: partial: 2 written, 0 deleted, 0 unchanged, 1 failed, 0 skipped",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
