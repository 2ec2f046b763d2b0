package statetest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/state"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, a job engine's connection to PostgreSQL
)

// at gives the times the cases record: UTC, with nanoseconds, so that a
// round trip that loses precision or the location shows; in the past, so
// that "now" comes after them. at(i+1) is an hour and a nanosecond after
// at(i).
func at(i int) time.Time {
	return time.Date(2021, 5, 6, 7, 8, 9, 123456789, time.UTC).Add(time.Duration(i-1) * (time.Hour + 1))
}

const (
	srcA = "http://a.example/"
	srcB = "http://b.example/"
	setA = "http://a.example/capabilitylist.xml"
)

// hashes are digests of every kind the store keeps.
func hashes() fixity.Hashes {
	return fixity.Hashes{
		MD5:     bytes.Repeat([]byte{1}, 16),
		SHA1:    bytes.Repeat([]byte{2}, 20),
		SHA256:  bytes.Repeat([]byte{3}, 32),
		SHA512:  bytes.Repeat([]byte{4}, 64),
		Unknown: []string{"x-crc:ab12"},
	}
}

// openStore opens a store in a new file under t.TempDir(), closed (and
// the error checked) when t ends.
func openStore[S Snapshot](t *testing.T, h Harness[S]) (Store[S], string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	return openAt(t, h, path), path
}

// openAt opens the store at path, closed when t ends.
func openAt[S Snapshot](t *testing.T, h Harness[S], path string) Store[S] {
	t.Helper()
	st, err := h.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return st
}

func mustRun[S Snapshot](t *testing.T, st Store[S]) int64 {
	t.Helper()
	id, err := st.BeginRun(t.Context(), state.Run{Mode: "baseline", Source: srcA})
	if err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	return id
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantFatal checks that err is an error classified fatal, as the state
// store's errors are.
func wantFatal(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one", what)
	} else if !errclass.IsFatal(err) {
		t.Errorf("%s: error %v is not classified fatal", what, err)
	}
}

func testRuns[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)

	id1, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: srcA, Site: "a", Started: at(1), Report: []byte(`{"x":1}`)})
	must(t, err)
	before := time.Now()
	id2, err := st.BeginRun(ctx, state.Run{Mode: "incremental", Source: srcB, Site: "b"})
	must(t, err)
	after := time.Now()
	id3, err := st.BeginRun(ctx, state.Run{Mode: "audit", Source: srcA, Status: "queued", Started: at(2)})
	must(t, err)
	if !(id1 < id2 && id2 < id3) {
		t.Errorf("run ids %d, %d, %d: want increasing", id1, id2, id3)
	}

	got, err := st.Run(ctx, id1)
	want := state.Run{ID: id1, Mode: "baseline", Source: srcA, Site: "a", Status: state.StatusRunning, Started: at(1), Report: []byte(`{"x":1}`)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Run(%d) = %+v, %v; want %+v", id1, got, err, want)
	}
	if got, err := st.Run(ctx, id2); err != nil || got.Started.Before(before.Truncate(time.Microsecond)) || got.Started.After(after) || got.Report != nil {
		t.Errorf("Run(%d) = %+v, %v; want Started now and no report", id2, got, err)
	}

	must(t, st.RunProgress(ctx, id1, []byte(`{"written":3}`)))
	if got, err := st.Run(ctx, id1); err != nil || string(got.Report) != `{"written":3}` || got.Status != state.StatusRunning {
		t.Errorf("Run(%d) after RunProgress = %+v, %v; want the report so far, still running", id1, got, err)
	}
	must(t, st.FinishRun(ctx, id1, at(2), "partial", nil))
	must(t, st.RunProgress(ctx, id1, []byte(`{"written":4}`))) // finished: left alone
	if got, err := st.Run(ctx, id1); err != nil || got.Report != nil {
		t.Errorf("RunProgress changed a finished run: %+v, %v", got, err)
	}
	must(t, st.FinishRun(ctx, id1, at(3), "ok", []byte(`{"y":2}`))) // again: overwrites
	want.Finished, want.Status, want.Report = at(3), "ok", []byte(`{"y":2}`)
	if got, err := st.Run(ctx, id1); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("finished Run(%d) = %+v, %v; want %+v", id1, got, err, want)
	}

	for _, tc := range []struct {
		name string
		err  error
	}{
		{"FinishRun(unknown)", st.FinishRun(ctx, 9999, at(3), "ok", nil)},
		{"RunProgress(unknown)", st.RunProgress(ctx, 9999, nil)},
		{"Run(unknown)", func() error { _, err := st.Run(ctx, 9999); return err }()},
	} {
		wantFatal(t, tc.name, tc.err)
		if !errors.Is(tc.err, state.ErrNotFound) {
			t.Errorf("%s = %v, want ErrNotFound", tc.name, tc.err)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"FinishRun(empty status)", st.FinishRun(ctx, id1, at(3), "", nil)},
		{"FinishRun(bad JSON)", st.FinishRun(ctx, id1, at(3), "failed", []byte("{"))},
		{"RunProgress(bad JSON)", st.RunProgress(ctx, id1, []byte("{"))},
		{"FinishRun(year 10000)", st.FinishRun(ctx, id1, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "failed", nil)},
		{"BeginRun(bad JSON)", func() error { _, err := st.BeginRun(ctx, state.Run{Report: []byte("nope")}); return err }()},
		{"BeginRun(year -1)", func() error {
			_, err := st.BeginRun(ctx, state.Run{Started: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)})
			return err
		}()},
	} {
		wantFatal(t, tc.name, tc.err)
	}
	if got, err := st.Run(ctx, id1); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after rejected calls, Run(%d) = %+v, %v; want %+v", id1, got, err, want)
	}

	ids := func(rs []state.Run, err error) string {
		if err != nil {
			return err.Error()
		}
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprint(r.ID))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name string
		got  string
		want []int64
	}{
		{"Runs(0)", ids(st.Runs(ctx, 0)), []int64{id3, id2, id1}},
		{"Runs(2)", ids(st.Runs(ctx, 2)), []int64{id3, id2}},
		{"RunsSince(zero)", ids(st.RunsSince(ctx, time.Time{}, "")), []int64{id1, id3, id2}},
		{"RunsSince(at(2))", ids(st.RunsSince(ctx, at(2), "")), []int64{id3, id2}},
		{"RunsSince(zero, a)", ids(st.RunsSince(ctx, time.Time{}, "a")), []int64{id1}},
		{"RunsSince(zero, none)", ids(st.RunsSince(ctx, time.Time{}, "none")), nil},
		{"RunsFinishedSince(at(3))", ids(st.RunsFinishedSince(ctx, at(3))), []int64{id1}}, // id1 ended at(3); the others run
		{"RunsFinishedSince(at(4))", ids(st.RunsFinishedSince(ctx, at(4))), nil},
	} {
		if want := strings.Trim(fmt.Sprint(tc.want), "[]"); tc.got != want {
			t.Errorf("%s = %s, want %s", tc.name, tc.got, want)
		}
	}

	// Only id2 is still running (id3 is queued, id1 finished); only
	// its source's runs are marked when a source is named.
	if n, err := st.MarkInterrupted(ctx, at(3), srcA, nil); err != nil || n != 0 {
		t.Errorf("MarkInterrupted(%s) = %d, %v; want 0", srcA, n, err)
	}
	n, err := st.MarkInterrupted(ctx, at(3), srcB, nil)
	if err != nil || n != 1 {
		t.Errorf("MarkInterrupted(%s) = %d, %v; want 1", srcB, n, err)
	}
	if got, err := st.Run(ctx, id2); err != nil || got.Status != state.StatusInterrupted || !got.Finished.Equal(at(3)) {
		t.Errorf("interrupted Run(%d) = %+v, %v", id2, got, err)
	}
	if n, err := st.MarkInterrupted(ctx, at(3), "", nil); err != nil || n != 0 {
		t.Errorf("MarkInterrupted again = %d, %v; want 0", n, err)
	}
}

func testEvents[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	evs := []state.Event{
		{At: at(1), Operation: "started", Message: "m1"},
		{At: at(2), Operation: "harvest", Site: "a", Message: "m2"},
		{At: at(3), Operation: "harvest", Site: "b"},
	}
	for _, e := range evs {
		must(t, st.AddEvent(ctx, e))
	}
	wantFatal(t, "AddEvent(no operation)", st.AddEvent(ctx, state.Event{At: at(1)}))
	wantFatal(t, "AddEvent(year 10000)", st.AddEvent(ctx, state.Event{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Operation: "x"}))
	for _, tc := range []struct {
		since time.Time
		site  string
		want  []state.Event
	}{
		{time.Time{}, "", evs},
		{at(2), "", evs[1:]},
		{time.Time{}, "a", evs[1:2]},
		{at(3).Add(time.Nanosecond), "", nil},
	} {
		got, err := st.Events(ctx, tc.since, tc.site)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Events(%v, %q) = %+v, %v; want %+v", tc.since, tc.site, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		since     time.Time
		operation string
		want      []state.Event
	}{
		{time.Time{}, "harvest", evs[1:]},
		{at(3), "harvest", evs[2:]},
		{time.Time{}, "started", evs[:1]},
		{time.Time{}, "stopped", nil},
	} {
		got, err := st.EventsOf(ctx, tc.since, tc.operation)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("EventsOf(%v, %q) = %+v, %v; want %+v", tc.since, tc.operation, got, err, tc.want)
		}
	}
	// A zero At is the current time.
	before := time.Now().Add(-time.Microsecond)
	must(t, st.AddEvent(ctx, state.Event{Operation: "stopped"}))
	if got, err := st.Events(ctx, before, ""); err != nil || len(got) != 1 || got[0].Operation != "stopped" || got[0].At.After(time.Now()) {
		t.Errorf("Events after a zero-At event = %+v, %v", got, err)
	}
}

// testFailuresRead: a run's failures are read the first limit at a time
// with how many more there are, and the failures of a period's runs are
// streamed in the order of their times, then as recorded.
func testFailuresRead[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	runA, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "http://a.example/", Site: "a", Started: at(1)})
	must(t, err)
	runB, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "http://b.example/", Site: "b", Started: at(2)})
	must(t, err)
	runOld, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "http://a.example/", Site: "a", Started: at(0)})
	must(t, err)
	var fs []state.Failure
	for i := range 5 {
		fs = append(fs, state.Failure{RunID: runA, URI: "a" + strconv.Itoa(i), Stage: "fetch", Error: "e", At: at(10 - i)})
	}
	fs = append(fs,
		state.Failure{RunID: runB, URI: "b0", Stage: "verify", Error: "e", Permanent: true, At: at(7).Add(time.Nanosecond)},
		state.Failure{RunID: runOld, URI: "old", Stage: "fetch", Error: "e", At: at(8)})
	must(t, st.AddFailures(ctx, fs))
	for _, tc := range []struct {
		run        int64
		limit      int
		want, more int
	}{
		{runA, 2, 2, 3},
		{runA, 5, 5, 0},
		{runA, 6, 5, 0},
		{runA, 0, 1, 4},
		{runB, 1, 1, 0},
		{runB + runA + runOld, 3, 0, 0},
	} {
		got, more, err := st.Failures(ctx, tc.run, tc.limit)
		if err != nil || len(got) != tc.want || more != int64(tc.more) || (tc.run == runA && got[0].URI != "a0") {
			t.Errorf("Failures(run %d, limit %d) = %d failures, %d more, %v; want %d, %d more", tc.run, tc.limit, len(got), more, err, tc.want, tc.more)
		}
	}
	uris := func(since time.Time, site string) []string {
		var out []string
		must(t, st.EachFailure(ctx, since, site, func(f state.Failure) error {
			out = append(out, f.URI)
			return nil
		}))
		return out
	}
	for _, tc := range []struct {
		since time.Time
		site  string
		want  []string
	}{
		{time.Time{}, "", []string{"a4", "a3", "b0", "a2", "old", "a1", "a0"}},
		{at(1), "", []string{"a4", "a3", "b0", "a2", "a1", "a0"}},
		{at(1), "a", []string{"a4", "a3", "a2", "a1", "a0"}},
		{at(2), "", []string{"b0"}},
		{at(3), "", nil},
	} {
		if got := uris(tc.since, tc.site); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("EachFailure(%v, %q) = %q; want %q", tc.since, tc.site, got, tc.want)
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := st.EachFailure(ctx, time.Time{}, "", func(state.Failure) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("EachFailure with fn failing = %v after %d; want fn's error after 1", err, n)
	}
}

// fullBatch is a batch with an item of every kind, for run run.
func fullBatch(run int64) state.Batch {
	return state.Batch{
		Resources: []state.Resource{
			{URI: "r1", Source: srcA, ResourceSet: setA, Length: 5, Hashes: hashes(), Type: "text/plain", Lastmod: at(1), ChangeTime: at(2),
				Package: "p.zip", Outcome: state.OutcomeWritten, RunID: run, Updated: at(3), ETag: `"e1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT",
				Links: []state.Link{{Rel: "describedby", Href: "http://a.example/meta", Type: "application/xml"}}, Version: "7", Verified: state.VerifiedHash},
			{URI: "r2", Source: srcA, Length: -1, ChangeTime: at(2), Outcome: state.OutcomeDeleted, Deleted: true, RunID: run, Updated: at(3)},
		},
		Failures: []state.Failure{
			{RunID: run, URI: "r3", Package: "p.zip", Stage: "verify", Error: "md5 mismatch", Permanent: true, ChangeTime: at(2), At: at(3)},
			{RunID: run, Stage: "list", Error: "timeout", At: at(3)},
		},
		Changes: []state.ChangeRecord{
			{URI: "r1", Change: state.ChangeCreated, Datetime: at(2), RunID: run, Package: "p.zip", Source: srcA, Length: 5, Hashes: hashes(), Type: "text/plain", Lastmod: at(1)},
			{URI: "r2", Change: state.ChangeDeleted, Datetime: at(2), RunID: run, Source: srcA, Length: -1},
		},
		Deliveries: []state.Delivery{
			{Source: srcA, URI: "r1", Sink: "s1", Length: 5, Hashes: fixity.Hashes{MD5: hashes().MD5, SHA1: hashes().SHA1, SHA256: hashes().SHA256}, ChangeTime: at(2)},
			{Source: srcA, URI: "r4", Sink: "s2", Length: 1},
		},
		Delivered: []state.Key{{Source: srcA, URI: "r4"}},
		Documents: []state.ChangeDocument{
			{URL: "http://a.example/cl1.xml", Source: srcA, ResourceSet: setA, Capability: "changelist", From: at(1), Open: true, RunID: run, Seen: at(3)},
		},
		Progress: []state.Progress{{Source: srcA, ResourceSet: setA, Key: "page", Value: "3", RunID: run}},
		Retries:  []state.Retry{{Source: srcA, URI: "r5", ResourceSet: setA, Record: "rec5", ChangeTime: at(2), RunID: run}},
	}
}

func testCommit[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	run := mustRun(t, st)
	must(t, st.Commit(ctx, state.Batch{})) // empty: a no-op
	b := fullBatch(run)
	must(t, st.Commit(ctx, b))
	b = fullBatch(run) // fresh, whatever Commit did to the slices

	for i, want := range b.Resources {
		got, ok, err := st.Resource(ctx, want.Source, want.URI)
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Resource %d = %+v, %v, %v; want %+v", i, got, ok, err, want)
		}
	}
	for _, k := range []state.Key{{Source: srcB, URI: "r1"}, {Source: srcA, URI: "none"}, {Source: srcA, URI: "r3"}} {
		if got, ok, err := st.Resource(ctx, k.Source, k.URI); err != nil || ok {
			t.Errorf("Resource(%q, %q) = %+v, %v, %v; want none", k.Source, k.URI, got, ok, err)
		}
	}
	if got, _, err := st.Failures(ctx, run, 1000); err != nil || !reflect.DeepEqual(got, b.Failures) {
		t.Errorf("Failures = %+v, %v; want %+v", got, err, b.Failures)
	}
	if got, _, err := st.Failures(ctx, run+1, 1000); err != nil || len(got) != 0 {
		t.Errorf("Failures(unknown run) = %+v, %v; want none", got, err)
	}
	if got, unattributed, err := st.FailedPackages(ctx, run); err != nil || !reflect.DeepEqual(got, map[string]bool{"p.zip": true}) || !unattributed {
		t.Errorf("FailedPackages = %v, %v, %v; want p.zip, true", got, unattributed, err)
	}
	if got, unattributed, err := st.FailedPackages(ctx, run+1); err != nil || len(got) != 0 || unattributed {
		t.Errorf("FailedPackages(unknown run) = %v, %v, %v; want none", got, unattributed, err)
	}
	changes, err := st.Changes(ctx, run)
	must(t, err)
	if len(changes) != len(b.Changes) {
		t.Fatalf("Changes = %+v, want %d", changes, len(b.Changes))
	}
	for i, got := range changes {
		if got.Recorded.IsZero() || got.Recorded.Location() != time.UTC || !got.Recorded.Equal(got.Recorded.Truncate(time.Microsecond)) {
			t.Errorf("change %d: Recorded %v, want a UTC stamp of whole microseconds", i, got.Recorded)
		}
		if i > 0 && !got.Recorded.After(changes[i-1].Recorded) {
			t.Errorf("change %d: Recorded %v, not after %v", i, got.Recorded, changes[i-1].Recorded)
		}
		got.Recorded = time.Time{}
		if !reflect.DeepEqual(got, b.Changes[i]) {
			t.Errorf("change %d = %+v, want %+v", i, got, b.Changes[i])
		}
	}
	if got, err := st.Changes(ctx, run+1); err != nil || len(got) != 0 {
		t.Errorf("Changes(unknown run) = %+v, %v; want none", got, err)
	}
	if got, err := st.Deliveries(ctx, srcA, "r1"); err != nil || !reflect.DeepEqual(got, b.Deliveries[:1]) {
		t.Errorf("Deliveries(r1) = %+v, %v; want %+v", got, err, b.Deliveries[:1])
	}
	for _, k := range []state.Key{{Source: srcA, URI: "r4"}, {Source: srcB, URI: "r1"}} {
		if got, err := st.Deliveries(ctx, k.Source, k.URI); err != nil || len(got) != 0 {
			t.Errorf("Deliveries(%q, %q) = %+v, %v; want none (delivered, or another source)", k.Source, k.URI, got, err)
		}
	}
	if got, err := st.ChangeDocuments(ctx, srcA); err != nil || !reflect.DeepEqual(got, b.Documents) {
		t.Errorf("ChangeDocuments = %+v, %v; want %+v", got, err, b.Documents)
	}
	if got, err := st.ChangeDocuments(ctx, srcB); err != nil || len(got) != 0 {
		t.Errorf("ChangeDocuments(another source) = %+v, %v; want none", got, err)
	}
	if got, err := st.Progress(ctx, srcA, setA); err != nil || !reflect.DeepEqual(got, map[string]string{"page": "3"}) {
		t.Errorf("Progress = %v, %v", got, err)
	}
	if got, err := st.Progress(ctx, srcA, "other"); err != nil || len(got) != 0 {
		t.Errorf("Progress(another set) = %v, %v; want none", got, err)
	}
	if got, err := st.Retries(ctx, srcA, setA); err != nil || !reflect.DeepEqual(got, b.Retries) {
		t.Errorf("Retries = %+v, %v; want %+v", got, err, b.Retries)
	}

	// A second batch replaces by key: resources by (source, URI), the
	// later entry of one batch winning; deliveries by (source, URI,
	// sink); documents by URL; progress by key.
	r1 := b.Resources[0]
	r1.Length, r1.Outcome, r1.Updated = 6, state.OutcomeUnchanged, time.Time{}
	r1b := r1
	r1b.Length = 7
	d := b.Documents[0]
	d.Until, d.Open, d.Seen = at(3), false, time.Time{}
	del := b.Deliveries[0]
	del.Length = 7
	before := time.Now().Add(-time.Microsecond)
	must(t, st.Commit(ctx, state.Batch{
		Resources:  []state.Resource{r1, r1b},
		Deliveries: []state.Delivery{del, {Source: srcA, URI: "r1", Sink: "s3", Length: 7}},
		Documents:  []state.ChangeDocument{d},
		Progress:   []state.Progress{{Source: srcA, ResourceSet: setA, Key: "page", Value: "4"}, {Source: srcA, ResourceSet: setA, Key: "token", Value: "t"}},
	}))
	if got, _, err := st.Resource(ctx, srcA, "r1"); err != nil || got.Length != 7 || got.Outcome != state.OutcomeUnchanged || got.Updated.Before(before) {
		t.Errorf("replaced Resource = %+v, %v; want length 7, unchanged, updated now", got, err)
	}
	if got, err := st.Deliveries(ctx, srcA, "r1"); err != nil || len(got) != 2 || got[0].Length+got[1].Length != 14 {
		t.Errorf("replaced Deliveries = %+v, %v; want s1 and s3 of length 7", got, err)
	}
	if got, err := st.ChangeDocuments(ctx, srcA); err != nil || len(got) != 1 || got[0].Open || !got[0].Until.Equal(at(3)) || got[0].Seen.Before(before) {
		t.Errorf("replaced ChangeDocuments = %+v, %v", got, err)
	}
	if got, err := st.Progress(ctx, srcA, setA); err != nil || !reflect.DeepEqual(got, map[string]string{"page": "4", "token": "t"}) {
		t.Errorf("replaced Progress = %v, %v", got, err)
	}

	// Failures and changes are appended; zero At is the commit's time.
	f := state.Failure{RunID: run, URI: "r6", Stage: "fetch", Error: "404"}
	must(t, st.AddFailures(ctx, []state.Failure{f}))
	got, _, err := st.Failures(ctx, run, 1000)
	if err != nil || len(got) != 3 || got[2].At.Before(before) {
		t.Fatalf("Failures after AddFailures = %+v, %v", got, err)
	}
	got[2].At = time.Time{}
	if !reflect.DeepEqual(got[2], f) {
		t.Errorf("added failure = %+v, want %+v", got[2], f)
	}
	wantFatal(t, "AddFailures(no run)", st.AddFailures(ctx, []state.Failure{{URI: "x", Stage: "fetch", Error: "e"}}))
}

// testCommitRejects: a batch with one invalid item stores nothing.
func testCommitRejects[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	run := mustRun(t, st)
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(mod func(*state.Resource)) state.Batch {
		r := state.Resource{URI: "bad", Source: srcA, Length: 1, Outcome: state.OutcomeWritten}
		mod(&r)
		return state.Batch{Resources: []state.Resource{r}}
	}
	chg := func(mod func(*state.ChangeRecord)) state.Batch {
		c := state.ChangeRecord{URI: "bad", Change: state.ChangeUpdated, Source: srcA, Length: 1}
		mod(&c)
		return state.Batch{Changes: []state.ChangeRecord{c}}
	}
	for _, tc := range []struct {
		name string
		b    state.Batch
	}{
		{"resource without URI", res(func(r *state.Resource) { r.URI = "" })},
		{"resource of length -2", res(func(r *state.Resource) { r.Length = -2 })},
		{"resource of unknown outcome", res(func(r *state.Resource) { r.Outcome = "lost" })},
		{"resource without outcome", res(func(r *state.Resource) { r.Outcome = "" })},
		{"resource of year 10000", res(func(r *state.Resource) { r.Lastmod = far })},
		{"resource of an unknown run", res(func(r *state.Resource) { r.RunID = run + 100 })},
		{"failure without run", state.Batch{Failures: []state.Failure{{Stage: "fetch", Error: "e"}}}},
		{"failure of an unknown run", state.Batch{Failures: []state.Failure{{RunID: run + 100, Stage: "fetch", Error: "e"}}}},
		{"failure of year 10000", state.Batch{Failures: []state.Failure{{RunID: run, Stage: "fetch", Error: "e", ChangeTime: far}}}},
		{"change without URI", chg(func(c *state.ChangeRecord) { c.URI = "" })},
		{"change of unknown kind", chg(func(c *state.ChangeRecord) { c.Change = "moved" })},
		{"change of length -2", chg(func(c *state.ChangeRecord) { c.Length = -2 })},
		{"change of year -1", chg(func(c *state.ChangeRecord) { c.Datetime = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) })},
		{"change of an unknown run", chg(func(c *state.ChangeRecord) { c.RunID = run + 100 })},
		{"delivery without sink", state.Batch{Deliveries: []state.Delivery{{Source: srcA, URI: "bad"}}}},
		{"document without URL", state.Batch{Documents: []state.ChangeDocument{{Source: srcA}}}},
		{"progress without key", state.Batch{Progress: []state.Progress{{Source: srcA, Value: "v"}}}},
		{"progress without source", state.Batch{Progress: []state.Progress{{Key: "k", Value: "v"}}}},
		{"retry without URI", state.Batch{Retries: []state.Retry{{Source: srcA}}}},
		{"checkpoint without source", state.Batch{Checkpoint: &state.Checkpoint{Next: at(1)}}},
		{"checkpoint of year 10000", state.Batch{Checkpoint: &state.Checkpoint{Source: srcA, Next: far}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Valid items of every kind, before and after the bad one.
			b := fullBatch(run)
			b.Resources = append(b.Resources, tc.b.Resources...)
			b.Failures = append(b.Failures, tc.b.Failures...)
			b.Changes = append(b.Changes, tc.b.Changes...)
			b.Deliveries = append(b.Deliveries, tc.b.Deliveries...)
			b.Documents = append(b.Documents, tc.b.Documents...)
			b.Progress = append(b.Progress, tc.b.Progress...)
			b.Retries = append(b.Retries, tc.b.Retries...)
			b.Checkpoint = tc.b.Checkpoint
			if b.Checkpoint == nil {
				b.Checkpoint = &state.Checkpoint{Source: srcA, ResourceSet: setA, Next: at(1)}
			}
			wantFatal(t, "Commit", st.Commit(ctx, b))
			assertEmpty(t, st, run)
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := st.Commit(cctx, fullBatch(run)); err == nil {
			t.Error("Commit with a cancelled context: no error")
		}
		assertEmpty(t, st, run)
	})
}

// assertEmpty checks that st holds no record of any kind fullBatch(run)
// makes.
func assertEmpty[S Snapshot](t *testing.T, st Store[S], run int64) {
	t.Helper()
	ctx := t.Context()
	var found []string
	if n, err := st.CountResources(ctx, "", true); err != nil || n != 0 {
		found = append(found, fmt.Sprintf("%d resources (%v)", n, err))
	}
	if fs, _, err := st.Failures(ctx, run, 1000); err != nil || len(fs) != 0 {
		found = append(found, fmt.Sprintf("failures %+v (%v)", fs, err))
	}
	if cs, err := st.Changes(ctx, run); err != nil || len(cs) != 0 {
		found = append(found, fmt.Sprintf("changes %+v (%v)", cs, err))
	}
	if ds, err := st.Deliveries(ctx, srcA, "r1"); err != nil || len(ds) != 0 {
		found = append(found, fmt.Sprintf("deliveries %+v (%v)", ds, err))
	}
	if ds, err := st.ChangeDocuments(ctx, srcA); err != nil || len(ds) != 0 {
		found = append(found, fmt.Sprintf("documents %+v (%v)", ds, err))
	}
	if p, err := st.Progress(ctx, srcA, setA); err != nil || len(p) != 0 {
		found = append(found, fmt.Sprintf("progress %v (%v)", p, err))
	}
	if rs, err := st.Retries(ctx, srcA, setA); err != nil || len(rs) != 0 {
		found = append(found, fmt.Sprintf("retries %+v (%v)", rs, err))
	}
	if ok, err := st.HasCheckpoint(ctx, srcA); err != nil || ok {
		found = append(found, fmt.Sprintf("a checkpoint (%v)", err))
	}
	if len(found) > 0 {
		t.Errorf("a rejected batch left %s", strings.Join(found, ", "))
	}
}

func testCheckpoints[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	run := mustRun(t, st)
	if c, ok, err := st.Checkpoint(ctx, srcA, setA); err != nil || ok {
		t.Errorf("Checkpoint before any = %+v, %v, %v", c, ok, err)
	}
	if ok, err := st.HasCheckpoint(ctx, srcA); err != nil || ok {
		t.Errorf("HasCheckpoint before any = %v, %v", ok, err)
	}
	want := state.Checkpoint{Source: srcA, ResourceSet: setA, Next: at(1), Baseline: at(2), Open: true, RunID: run, Updated: at(3), DescribedBy: "http://a.example/.well-known/resourcesync"}
	must(t, st.SetCheckpoint(ctx, want))
	if got, ok, err := st.Checkpoint(ctx, srcA, setA); err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("Checkpoint = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	whole := state.Checkpoint{Source: srcA, Next: at(2)}
	before := time.Now().Add(-time.Microsecond)
	must(t, st.SetCheckpoint(ctx, whole))
	if got, ok, err := st.Checkpoint(ctx, srcA, ""); err != nil || !ok || !got.Next.Equal(at(2)) || got.Updated.Before(before) || got.Open || got.RunID != 0 {
		t.Errorf("Checkpoint(whole source) = %+v, %v, %v; want next %v, updated now", got, ok, err, at(2))
	}
	want.Next, want.Open = at(3), false
	must(t, st.SetCheckpoint(ctx, want)) // overwrites
	if got, _, err := st.Checkpoint(ctx, srcA, setA); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("overwritten Checkpoint = %+v, %v; want %+v", got, err, want)
	}
	for _, tc := range []struct {
		src  string
		want bool
	}{{srcA, true}, {srcB, false}, {"", false}} {
		if ok, err := st.HasCheckpoint(ctx, tc.src); err != nil || ok != tc.want {
			t.Errorf("HasCheckpoint(%q) = %v, %v; want %v", tc.src, ok, err, tc.want)
		}
	}
	if _, ok, err := st.Checkpoint(ctx, srcB, setA); err != nil || ok {
		t.Errorf("Checkpoint(another source) = %v, %v; want none", ok, err)
	}
	wantFatal(t, "SetCheckpoint(no source)", st.SetCheckpoint(ctx, state.Checkpoint{ResourceSet: setA}))
	wantFatal(t, "SetCheckpoint(unknown run)", st.SetCheckpoint(ctx, state.Checkpoint{Source: srcB, RunID: run + 100}))
	if ok, _ := st.HasCheckpoint(ctx, srcB); ok {
		t.Error("a rejected checkpoint was set")
	}

	// Setting a set's checkpoint clears that set's progress marks, those
	// of its own batch too, and no others; one that keeps them (a set not
	// done) leaves them.
	must(t, st.Commit(ctx, state.Batch{Progress: []state.Progress{
		{Source: srcA, ResourceSet: setA, Key: "k", Value: "1"},
		{Source: srcA, ResourceSet: "other", Key: "k", Value: "2"},
	}}))
	must(t, st.Commit(ctx, state.Batch{Checkpoint: &state.Checkpoint{Source: srcA, ResourceSet: setA, Next: at(2), KeepProgress: true}}))
	if got, err := st.Progress(ctx, srcA, setA); err != nil || !reflect.DeepEqual(got, map[string]string{"k": "1"}) {
		t.Errorf("Progress after a checkpoint that keeps it = %v, %v; want k=1", got, err)
	}
	must(t, st.Commit(ctx, state.Batch{
		Progress:   []state.Progress{{Source: srcA, ResourceSet: setA, Key: "k2", Value: "3"}},
		Checkpoint: &state.Checkpoint{Source: srcA, ResourceSet: setA, Next: at(3)},
	}))
	if got, err := st.Progress(ctx, srcA, setA); err != nil || len(got) != 0 {
		t.Errorf("Progress after the checkpoint = %v, %v; want none", got, err)
	}
	if got, err := st.Progress(ctx, srcA, "other"); err != nil || !reflect.DeepEqual(got, map[string]string{"k": "2"}) {
		t.Errorf("Progress of another set = %v, %v; want k=2", got, err)
	}
}

// testRetries: a retry of an older change does not replace an
// outstanding one; a resource held at a change not older than the
// retry's clears it, a failed one does not; Resolved clears it when the
// version recorded is not older than the retry's change.
func testRetries[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	retry := func(uri, rec string, ct time.Time) state.Retry {
		return state.Retry{Source: srcA, URI: uri, ResourceSet: setA, Record: rec, ChangeTime: ct}
	}
	held := func(uri string, ct time.Time, outcome string) state.Resource {
		return state.Resource{URI: uri, Source: srcA, ResourceSet: setA, Length: 1, ChangeTime: ct, Outcome: outcome}
	}
	steps := []struct {
		name string
		b    state.Batch
		want []state.Retry // by URI
	}{
		{"recorded", state.Batch{Retries: []state.Retry{retry("a", "a@2", at(2)), retry("b", "b@2", at(2)), retry("c", "c@2", at(2)), retry("d", "d", time.Time{})}},
			[]state.Retry{retry("a", "a@2", at(2)), retry("b", "b@2", at(2)), retry("c", "c@2", at(2)), retry("d", "d", time.Time{})}},
		{"older does not replace", state.Batch{Retries: []state.Retry{retry("a", "a@1", at(1)), retry("b", "b@3", at(3))}},
			[]state.Retry{retry("a", "a@2", at(2)), retry("b", "b@3", at(3)), retry("c", "c@2", at(2)), retry("d", "d", time.Time{})}},
		{"held clears", state.Batch{Resources: []state.Resource{
			held("a", at(1), state.OutcomeWritten),         // older: stays
			held("b", at(3), state.OutcomeWritten),         // as new: cleared
			held("c", at(3), state.OutcomeFailed),          // failed: stays
			held("d", time.Time{}, state.OutcomeUnchanged), // unknown, as the retry: cleared
		}}, []state.Retry{retry("a", "a@2", at(2)), retry("c", "c@2", at(2))}},
		// a is recorded at 1, older than its retry's 2: it stays; c at 3.
		{"resolved clears", state.Batch{Resolved: []state.Key{{Source: srcA, URI: "a"}, {Source: srcA, URI: "c"}, {Source: srcB, URI: "a"}}},
			[]state.Retry{retry("a", "a@2", at(2))}},
	}
	for _, s := range steps {
		must(t, st.Commit(ctx, s.b))
		got, err := st.Retries(ctx, srcA, setA)
		if err != nil || !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: Retries = %+v, %v; want %+v", s.name, got, err, s.want)
		}
	}
	if got, err := st.Retries(ctx, srcB, setA); err != nil || len(got) != 0 {
		t.Errorf("Retries(another source) = %+v, %v; want none", got, err)
	}
}

func testResources[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	rs := []state.Resource{
		{URI: "u2", Source: srcA, Length: 1, Outcome: state.OutcomeWritten, Type: "first"},
		{URI: "u1", Source: srcA, Length: -1, Outcome: state.OutcomeDeleted, Deleted: true},
		{URI: "u1", Source: srcB, Length: 2, Outcome: state.OutcomeWritten},
		{URI: "u2", Source: srcA, Length: 3, Outcome: state.OutcomeWritten, Type: "second"}, // wins
	}
	must(t, st.SetPackagesDone(ctx, []state.PackageRecord{{URL: "p.zip", Sinks: "s", Fingerprint: "f", Resources: 1}}))
	must(t, st.PutResources(ctx, rs))
	if got, _, err := st.Resource(ctx, srcA, "u2"); err != nil || got.Type != "second" || got.Length != 3 {
		t.Errorf("Resource(u2) = %+v, %v; want the later entry", got, err)
	}
	if got, ok, err := st.Resource(ctx, srcA, "u1"); err != nil || !ok || !got.Deleted {
		t.Errorf("Resource(tombstone) = %+v, %v, %v; want it, deleted", got, ok, err)
	}
	if _, ok, err := st.PackageDone(ctx, "p.zip", "s"); err != nil || ok {
		t.Errorf("PackageDone after PutResources = %v, %v; want the records forgotten", ok, err)
	}
	for _, tc := range []struct {
		src  string
		del  bool
		want int64
	}{{"", true, 3}, {"", false, 2}, {srcA, true, 2}, {srcA, false, 1}, {srcB, false, 1}, {"http://none/", true, 0}} {
		if n, err := st.CountResources(ctx, tc.src, tc.del); err != nil || n != tc.want {
			t.Errorf("CountResources(%q, %v) = %d, %v; want %d", tc.src, tc.del, n, err, tc.want)
		}
	}
	walk := func(src string) string {
		var got []string
		if err := st.WalkResources(ctx, src, func(r state.Resource) error {
			got = append(got, r.Source+r.URI)
			return nil
		}); err != nil {
			return err.Error()
		}
		return strings.Join(got, " ")
	}
	for _, tc := range []struct{ src, want string }{
		{"", srcA + "u1 " + srcA + "u2 " + srcB + "u1"},
		{srcA, srcA + "u1 " + srcA + "u2"},
		{"http://none/", ""},
	} {
		if got := walk(tc.src); got != tc.want {
			t.Errorf("WalkResources(%q) = %s, want %s", tc.src, got, tc.want)
		}
	}
	stop := errors.New("stop")
	calls := 0
	if err := st.WalkResources(ctx, "", func(state.Resource) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("WalkResources with a failing fn = %v after %d calls; want the fn's error unchanged after 1", err, calls)
	}
	// fn may call the store's other methods.
	if err := st.WalkResources(ctx, srcA, func(r state.Resource) error {
		_, _, err := st.Resource(ctx, r.Source, r.URI)
		return err
	}); err != nil {
		t.Errorf("WalkResources calling Resource: %v", err)
	}

	wantFatal(t, "PutResources(no URI)", st.PutResources(ctx, []state.Resource{{URI: "u9", Source: srcA, Outcome: state.OutcomeWritten}, {Source: srcA, Outcome: state.OutcomeWritten}}))
	if _, ok, _ := st.Resource(ctx, srcA, "u9"); ok {
		t.Error("a rejected PutResources stored part of its resources")
	}

	// ForgetResources removes the resources named, their deliveries and
	// every package record; another source's same URI stays.
	must(t, st.Commit(ctx, state.Batch{Deliveries: []state.Delivery{{Source: srcA, URI: "u2", Sink: "s1", Length: 3}, {Source: srcB, URI: "u1", Sink: "s1", Length: 2}}}))
	must(t, st.SetPackagesDone(ctx, []state.PackageRecord{{URL: "p.zip", Sinks: "s", Fingerprint: "f", Resources: 1}}))
	must(t, st.ForgetResources(ctx, srcA, nil, nil)) // nothing named: nothing forgotten
	if _, ok, _ := st.PackageDone(ctx, "p.zip", "s"); !ok {
		t.Error("ForgetResources(none) forgot the package records")
	}
	must(t, st.ForgetResources(ctx, srcA, []string{"u2", "u1", "missing"}, nil))
	if got := walk(""); got != srcB+"u1" {
		t.Errorf("after ForgetResources, WalkResources = %s, want %su1", got, srcB)
	}
	if ds, err := st.Deliveries(ctx, srcA, "u2"); err != nil || len(ds) != 0 {
		t.Errorf("a forgotten resource's deliveries = %+v, %v", ds, err)
	}
	if ds, err := st.Deliveries(ctx, srcB, "u1"); err != nil || len(ds) != 1 {
		t.Errorf("another source's deliveries = %+v, %v; want one", ds, err)
	}
	if _, ok, _ := st.PackageDone(ctx, "p.zip", "s"); ok {
		t.Error("ForgetResources kept the package records")
	}
}

func testPackages[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	run := mustRun(t, st)
	if p, ok, err := st.PackageDone(ctx, "p.zip", "s1"); err != nil || ok {
		t.Errorf("PackageDone before any = %+v, %v, %v", p, ok, err)
	}
	must(t, st.SetPackagesDone(ctx, nil))
	ps := []state.PackageRecord{
		{URL: "p.zip", Sinks: "s1", Fingerprint: "f1", Resources: 3, RunID: run, Updated: at(1)},
		{URL: "p.zip", Sinks: "s1 s2", Fingerprint: "f2", Resources: 4, Updated: at(2)},
	}
	must(t, st.SetPackagesDone(ctx, ps))
	for _, want := range ps {
		if got, ok, err := st.PackageDone(ctx, want.URL, want.Sinks); err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("PackageDone(%q, %q) = %+v, %v, %v; want %+v", want.URL, want.Sinks, got, ok, err, want)
		}
	}
	before := time.Now().Add(-time.Microsecond)
	must(t, st.SetPackagesDone(ctx, []state.PackageRecord{{URL: "p.zip", Sinks: "s1", Fingerprint: "f3", Resources: 5}}))
	if got, _, err := st.PackageDone(ctx, "p.zip", "s1"); err != nil || got.Fingerprint != "f3" || got.Resources != 5 || got.RunID != 0 || got.Updated.Before(before) {
		t.Errorf("replaced PackageDone = %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		bad  state.PackageRecord
	}{
		{"no URL", state.PackageRecord{Sinks: "s1", Fingerprint: "f"}},
		{"no fingerprint", state.PackageRecord{URL: "q.zip", Sinks: "s1"}},
		{"unknown run", state.PackageRecord{URL: "q.zip", Sinks: "s1", Fingerprint: "f", RunID: run + 100}},
	} {
		wantFatal(t, "SetPackagesDone("+tc.name+")", st.SetPackagesDone(ctx, []state.PackageRecord{{URL: "r.zip", Sinks: "s1", Fingerprint: "f"}, tc.bad}))
		if _, ok, _ := st.PackageDone(ctx, "r.zip", "s1"); ok {
			t.Errorf("SetPackagesDone(%s) stored part of its records", tc.name)
		}
	}
}

func testDocuments[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	const url = "http://a.example/resourcelist.xml"
	if d, ok, err := st.Document(ctx, url); err != nil || ok {
		t.Errorf("Document before any = %+v, %v, %v", d, ok, err)
	}
	want := state.Document{URL: url, ETag: `"v1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT", Encoding: "gzip", Body: []byte("\x1f\x8b body"), Updated: at(1)}
	must(t, st.PutDocument(ctx, want))
	check := func(name string, want state.Document) {
		t.Helper()
		got, ok, err := st.Document(ctx, url)
		if err != nil || !ok || got.URL != want.URL || got.ETag != want.ETag || got.LastModified != want.LastModified ||
			got.Encoding != want.Encoding || !bytes.Equal(got.Body, want.Body) || !got.Updated.Equal(want.Updated) {
			t.Errorf("%s: Document = %+v, %v, %v; want %+v", name, got, ok, err, want)
		}
	}
	check("put", want)
	want.ETag, want.LastModified, want.Body, want.Encoding = "", "Tue, 03 Jan 2006 15:04:05 GMT", nil, ""
	must(t, st.PutDocument(ctx, want))
	check("replaced, empty body", want)
	if _, ok, err := st.Document(ctx, url+"?other"); err != nil || ok {
		t.Errorf("Document(another URL) = %v, %v; want none", ok, err)
	}
	for _, tc := range []struct {
		name string
		d    state.Document
	}{
		{"no validators", state.Document{URL: url, Body: []byte("x")}},
		{"too large", state.Document{URL: url, ETag: `"v2"`, Body: make([]byte, state.MaxDocumentCopy+1)}},
	} {
		must(t, st.PutDocument(ctx, want))
		must(t, st.PutDocument(ctx, tc.d))
		if _, ok, err := st.Document(ctx, url); err != nil || ok {
			t.Errorf("PutDocument(%s) kept a copy (%v, %v); want the copy removed", tc.name, ok, err)
		}
	}
	wantFatal(t, "PutDocument(no URL)", st.PutDocument(ctx, state.Document{ETag: "e"}))
}

func testSites[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	run := mustRun(t, st)
	if _, err := st.Site(ctx, "a"); !errors.Is(err, state.ErrNoSite) {
		t.Errorf("Site(unknown) = %v, want ErrNoSite", err)
	}
	if sites, err := st.Sites(ctx); err != nil || len(sites) != 0 {
		t.Errorf("Sites before any = %+v, %v", sites, err)
	}
	wantFatal(t, "PutSite(no name)", st.PutSite(ctx, state.Site{Definition: "x: 1"}))
	wantFatal(t, "PutSite(no definition)", st.PutSite(ctx, state.Site{Name: "a"}))
	before := time.Now().Add(-time.Microsecond)
	must(t, st.PutSite(ctx, state.Site{Name: "b", Definition: "url: b"}))
	must(t, st.PutSite(ctx, state.Site{Name: "a", Definition: "url: a", Next: at(1), Last: at(1), LastStatus: "ignored"}))
	sites, err := st.Sites(ctx)
	if err != nil || len(sites) != 2 || sites[0].Name != "a" || sites[1].Name != "b" {
		t.Fatalf("Sites = %+v, %v; want a, b", sites, err)
	}
	if a := sites[0]; a.Definition != "url: a" || !a.Next.IsZero() || !a.Last.IsZero() || a.LastStatus != "" || a.Updated.Before(before) {
		t.Errorf("new site = %+v; want its definition only, updated now", a)
	}

	must(t, st.SetSiteNext(ctx, "a", at(2)))
	if a, err := st.Site(ctx, "a"); err != nil || !a.Next.Equal(at(2)) {
		t.Errorf("after SetSiteNext, Site = %+v, %v", a, err)
	}
	// A harvest begun before the explicit next (at 1: the next was set
	// while it ran) leaves it; one begun at or after it clears it.
	must(t, st.SiteHarvested(ctx, "a", at(1), "ok", run))
	if a, err := st.Site(ctx, "a"); err != nil || !a.Next.Equal(at(2)) || !a.Last.Equal(at(1)) {
		t.Errorf("after SiteHarvested begun before the next, Site = %+v, %v; want the next kept", a, err)
	}
	must(t, st.SiteHarvested(ctx, "a", at(2), "ok", run))
	want := state.Site{Name: "a", Definition: "url: a", Last: at(2), LastStatus: "ok", LastRunID: run}
	a, err := st.Site(ctx, "a")
	a.Updated = time.Time{}
	if err != nil || !reflect.DeepEqual(a, want) {
		t.Errorf("after SiteHarvested, Site = %+v, %v; want %+v (next cleared)", a, err, want)
	}
	// A retry after a failed harvest sets the next harvest, over none or
	// the one read before the harvest (an earlier retry's), but not over
	// one set since (while that harvest ran).
	must(t, st.RetrySite(ctx, "a", at(5), time.Time{}))
	if a, err := st.Site(ctx, "a"); err != nil || !a.Next.Equal(at(5)) {
		t.Errorf("after RetrySite, Site = %+v, %v; want next at 5", a, err)
	}
	must(t, st.RetrySite(ctx, "a", at(7), at(5)))
	if a, err := st.Site(ctx, "a"); err != nil || !a.Next.Equal(at(7)) {
		t.Errorf("after RetrySite over the next read, Site = %+v, %v; want next at 7", a, err)
	}
	must(t, st.SetSiteNext(ctx, "a", at(3)))
	for _, read := range []time.Time{{}, at(7)} {
		must(t, st.RetrySite(ctx, "a", at(9), read))
		if a, err := st.Site(ctx, "a"); err != nil || !a.Next.Equal(at(3)) {
			t.Errorf("after RetrySite (next read %v) with a next set since, Site = %+v, %v; want the next kept", read, a, err)
		}
	}
	must(t, st.SetSiteNext(ctx, "a", time.Time{}))
	must(t, st.SetSitePaused(ctx, "a", true))
	if a, err := st.Site(ctx, "a"); err != nil || !a.Paused {
		t.Errorf("after SetSitePaused(true), Site = %+v, %v", a, err)
	}
	must(t, st.SetSitePaused(ctx, "a", false))
	if err := st.SetSitePaused(ctx, "nope", true); !errors.Is(err, state.ErrNoSite) {
		t.Errorf("SetSitePaused(unknown site) = %v, want ErrNoSite", err)
	}
	must(t, st.SetSiteNext(ctx, "a", at(3)))
	must(t, st.SetSiteNext(ctx, "a", time.Time{})) // clears
	must(t, st.PutSite(ctx, state.Site{Name: "a", Definition: "url: a2"}))
	want.Definition = "url: a2"
	a, err = st.Site(ctx, "a")
	a.Updated = time.Time{}
	if err != nil || !reflect.DeepEqual(a, want) {
		t.Errorf("after a new definition, Site = %+v, %v; want %+v (harvests kept)", a, err, want)
	}

	for _, tc := range []struct {
		name string
		err  error
	}{
		{"SetSiteNext(unknown)", st.SetSiteNext(ctx, "z", at(1))},
		{"SiteHarvested(unknown)", st.SiteHarvested(ctx, "z", at(1), "ok", 0)},
		{"RetrySite(unknown)", st.RetrySite(ctx, "z", at(2), at(1))},
		{"RemoveSite(unknown)", st.RemoveSite(ctx, "z")},
	} {
		if !errors.Is(tc.err, state.ErrNoSite) {
			t.Errorf("%s = %v, want ErrNoSite", tc.name, tc.err)
		}
	}
	wantFatal(t, "SiteHarvested(unknown run)", st.SiteHarvested(ctx, "a", at(2), "ok", run+100))
	wantFatal(t, "SetSiteNext(year 10000)", st.SetSiteNext(ctx, "a", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)))
	must(t, st.RemoveSite(ctx, "a"))
	if _, err := st.Site(ctx, "a"); !errors.Is(err, state.ErrNoSite) {
		t.Errorf("Site(removed) = %v, want ErrNoSite", err)
	}
	if err := st.RemoveSite(ctx, "a"); !errors.Is(err, state.ErrNoSite) {
		t.Errorf("RemoveSite(removed) = %v, want ErrNoSite", err)
	}
	if sites, err := st.Sites(ctx); err != nil || len(sites) != 1 || sites[0].Name != "b" {
		t.Errorf("Sites after RemoveSite = %+v, %v; want b", sites, err)
	}
}

func testReports[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	steps := []struct {
		op   string // claim, sent, release
		key  string
		want bool // claim's answer
	}{
		{"claim", "k1", true},
		{"claim", "k1", false}, // being sent
		{"claim", "k2", true},
		{"release", "k1", false},
		{"claim", "k1", true}, // released: claimable again
		{"sent", "k1", false},
		{"release", "k1", false}, // sent: release does nothing
		{"claim", "k1", false},
		{"release", "none", false},
		{"sent", "none", false},
		{"claim", "none", true},
	}
	for i, s := range steps {
		var err error
		switch s.op {
		case "claim":
			var ok bool
			ok, err = st.ClaimReport(ctx, s.key)
			if err == nil && ok != s.want {
				t.Errorf("step %d: ClaimReport(%q) = %v, want %v", i, s.key, ok, s.want)
			}
		case "sent":
			err = st.ReportSent(ctx, s.key)
		case "release":
			err = st.ReleaseReport(ctx, s.key)
		}
		if err != nil {
			t.Errorf("step %d: %s %q: %v", i, s.op, s.key, err)
		}
	}
	if _, err := st.ClaimReport(ctx, ""); err == nil {
		t.Error("ClaimReport(\"\"): no error")
	}
	// The newest of the keys sent under a prefix, by a time that sorts.
	for _, k := range []string{"end:2026-11-28T10:00:00Z", "end:2026-11-29T09:00:00Z", "end:2026-11-30T08:00:00Z", "endless", "ends:2099"} {
		must(t, func() error {
			if _, err := st.ClaimReport(ctx, k); err != nil {
				return err
			}
			if k == "end:2026-11-30T08:00:00Z" {
				return nil // claimed, not sent
			}
			return st.ReportSent(ctx, k)
		}())
	}
	if got, ok, err := st.LastReport(ctx, "end:"); err != nil || !ok || got != "end:2026-11-29T09:00:00Z" {
		t.Errorf("LastReport(end:) = %q, %v, %v; want the newest sent", got, ok, err)
	}
	if got, ok, err := st.LastReport(ctx, "none:"); err != nil || ok {
		t.Errorf("LastReport(none:) = %q, %v, %v; want none", got, ok, err)
	}
}

// testJobDB: the job engine's pool writes to the store's file (or, kept in
// PostgreSQL, its database) while the store commits, neither failing.
func testJobDB[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	create := "CREATE TABLE statetest_jobs (id INTEGER PRIMARY KEY, v TEXT)"
	insert := "INSERT INTO statetest_jobs (v) VALUES (?)"
	var db *sql.DB
	var err error
	if url := st.PostgresURL(); url != "" {
		if _, err := st.JobDB(); err == nil {
			t.Error("JobDB of a store kept in PostgreSQL: no error")
		}
		db, err = sql.Open("pgx", url) // as River's pgx driver connects
		create = "CREATE TABLE statetest_jobs (id INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, v TEXT)"
		insert = "INSERT INTO statetest_jobs (v) VALUES ($1)"
	} else {
		db, err = st.JobDB()
	}
	must(t, err)
	if _, err := db.ExecContext(ctx, create); err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make(chan error, 2)
	go func() {
		for i := range n {
			r := state.Resource{URI: fmt.Sprintf("u%d", i), Source: srcA, Length: 1, Outcome: state.OutcomeWritten}
			if err := st.Commit(ctx, state.Batch{Resources: []state.Resource{r}}); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for i := range n {
			tx, err := db.BeginTx(ctx, nil)
			if err == nil {
				_, err = tx.ExecContext(ctx, insert, fmt.Sprint(i))
				if err == nil {
					err = tx.Commit()
				} else {
					_ = tx.Rollback()
				}
			}
			if err != nil {
				errs <- fmt.Errorf("job db: %w", err)
				return
			}
		}
		errs <- nil
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	var jobs int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM statetest_jobs").Scan(&jobs); err != nil || jobs != n {
		t.Errorf("job rows = %d, %v; want %d", jobs, err, n)
	}
	must(t, db.Close())
	if c, err := st.CountResources(ctx, srcA, false); err != nil || c != n {
		t.Errorf("resources = %d, %v; want %d", c, err, n)
	}
}

// testReopen: what a store holds survives Close; two stores open on one
// file see each other's commits.
func testReopen[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := h.Open(ctx, path)
	must(t, err)
	run, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: srcA})
	must(t, err)
	must(t, st.Commit(ctx, fullBatch(run)))
	must(t, st.Close())

	a := openAt(t, h, path)
	b := openAt(t, h, path)
	if got, err := a.Changes(ctx, run); err != nil || len(got) != 2 {
		t.Errorf("after reopening, Changes = %+v, %v; want 2", got, err)
	}
	must(t, a.PutSite(ctx, state.Site{Name: "s", Definition: "d"}))
	if _, err := b.Site(ctx, "s"); err != nil {
		t.Errorf("a site put through one store, read through another: %v", err)
	}
	must(t, b.Commit(ctx, state.Batch{Resources: []state.Resource{{URI: "n", Source: srcB, Length: 0, Outcome: state.OutcomeWritten}}}))
	if _, ok, err := a.Resource(ctx, srcB, "n"); err != nil || !ok {
		t.Errorf("a resource committed through one store, read through another: %v, %v", ok, err)
	}
	if srcs := sources(t, a); !slices.Equal(srcs, []string{srcA, srcB}) {
		t.Errorf("Sources = %v", srcs)
	}
}

func sources[S Snapshot](t *testing.T, st Store[S]) []string {
	t.Helper()
	var out []string
	err := st.View(t.Context(), func(v S) error {
		var err error
		out, err = v.Sources(t.Context())
		return err
	})
	if err != nil {
		t.Errorf("Sources: %v", err)
	}
	return out
}

// testTasks: a task and its parts are recorded with what runs in their
// transaction, or not at all; a part is done by a batch, with its holds,
// and not when the batch is refused; the open task of a source is the
// newest not closed.
func testTasks[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	run := mustRun(t, st)
	if _, ok, err := st.OpenTask(ctx, srcA); err != nil || ok {
		t.Errorf("OpenTask before any = %v, %v", ok, err)
	}
	wantFatal(t, "CreateTask(no parts)", func() error {
		_, err := st.CreateTask(ctx, state.Task{Source: srcA, Mode: "baseline"}, nil, nil, nil)
		return err
	}())
	wantFatal(t, "CreateTask(a part twice)", func() error {
		_, err := st.CreateTask(ctx, state.Task{Source: srcA, Mode: "baseline"}, []string{"p", "p"}, nil, nil)
		return err
	}())
	// What fails within the transaction leaves no task.
	boom := errors.New("the queue refused")
	if _, err := st.CreateTask(ctx, state.Task{Source: srcA, Mode: "baseline"}, []string{"p"}, nil, func(context.Context, *sql.Tx, int64) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("CreateTask(also fails) = %v, want %v", err, boom)
	}
	if _, ok, err := st.OpenTask(ctx, srcA); err != nil || ok {
		t.Errorf("OpenTask after a refused creation = %v, %v; want none", ok, err)
	}
	cps := []byte(`[{"ResourceSet":"a"}]`)
	plans := [][]byte{[]byte("plan of p1"), nil, {0, 1, 2, 0xff}} // p2 has none
	var seen int64
	id, err := st.CreateTask(ctx, state.Task{Source: srcA, Site: "site a", Mode: "incremental", RunID: run, Checkpoints: cps, Fresh: true, Slots: 3}, []string{"p1", "p2", "p0"},
		func(i int) ([]byte, error) { return plans[i], nil },
		func(ctx context.Context, tx *sql.Tx, id int64) error {
			seen = id
			var n int
			return tx.QueryRowContext(ctx, "SELECT count(*) FROM task_parts WHERE task_id = ?", id).Scan(&n)
		})
	must(t, err)
	if seen != id {
		t.Errorf("also saw task %d, created %d", seen, id)
	}
	got, ok, err := st.OpenTask(ctx, srcA)
	if err != nil || !ok || got.ID != id || got.Source != srcA || got.Site != "site a" || got.Mode != "incremental" || got.RunID != run || string(got.Checkpoints) != string(cps) || got.Created.IsZero() || !got.Fresh || got.Slots != 3 {
		t.Errorf("OpenTask = %+v, %v, %v", got, ok, err)
	}
	if _, ok, _ := st.OpenTask(ctx, srcB); ok {
		t.Error("OpenTask of another source found one")
	}
	parts, err := st.TaskParts(ctx, id)
	must(t, err)
	if len(parts) != 3 || parts[0].Name != "p1" || parts[1].Name != "p2" || parts[2].Name != "p0" || parts[0].Done {
		t.Errorf("TaskParts = %+v; want p1, p2, p0, none done", parts)
	}
	// A part done with a batch; a refused batch does not do it.
	must(t, st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: id, Name: "p2", RunID: run, Holds: []byte(`{"a":"x"}`)},
		Resources: []state.Resource{{Source: srcA, URI: "r-part", Length: 1, Hashes: hashes(), Outcome: state.OutcomeWritten, RunID: run}}}))
	wantFatal(t, "Commit(part of no task)", st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: id + 100, Name: "p1"}}))
	wantFatal(t, "Commit(a bad resource and a part)", st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: id, Name: "p1"}, Resources: []state.Resource{{Source: srcA, URI: "bad", Length: -2, Outcome: state.OutcomeWritten}}}))
	parts, err = st.TaskParts(ctx, id)
	must(t, err)
	if len(parts) != 3 || parts[0].Done || !parts[1].Done || parts[1].RunID != run || string(parts[1].Holds) != `{"a":"x"}` || parts[2].Done {
		t.Errorf("TaskParts after p2 done = %+v", parts)
	}
	for _, p := range parts {
		if got, ok, err := st.TaskPart(ctx, id, p.Name); err != nil || !ok || !reflect.DeepEqual(got, p) {
			t.Errorf("TaskPart(%s) = %+v, %v, %v; want %+v", p.Name, got, ok, err, p)
		}
	}
	if _, ok, err := st.TaskPart(ctx, id, "no such part"); err != nil || ok {
		t.Errorf("TaskPart(no such part) = %v, %v", ok, err)
	}
	for i, name := range []string{"p1", "p2", "p0", "no such part"} {
		var want []byte
		if i < len(plans) {
			want = plans[i]
		}
		if got, err := st.TaskPartPlan(ctx, id, name); err != nil || !bytes.Equal(got, want) || (want == nil) != (got == nil) {
			t.Errorf("TaskPartPlan(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	// A plan that fails to be read leaves no task.
	if _, err := st.CreateTask(ctx, state.Task{Source: srcB, Mode: "baseline"}, []string{"x"}, func(int) ([]byte, error) { return nil, boom }, nil); !errors.Is(err, boom) {
		t.Errorf("CreateTask(a plan unread) = %v, want %v", err, boom)
	}
	if _, ok, err := st.OpenTask(ctx, srcB); err != nil || ok {
		t.Errorf("OpenTask after a plan unread = %v, %v; want none", ok, err)
	}
	// A part given up leaves a part done as it was; one not done is done.
	must(t, st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: id, Name: "p2", Holds: []byte(`{"*":"y"}`), GiveUp: true}}))
	must(t, st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: id, Name: "p0", Holds: []byte(`{"*":"y"}`), GiveUp: true}}))
	parts, err = st.TaskParts(ctx, id)
	must(t, err)
	if string(parts[1].Holds) != `{"a":"x"}` || !parts[2].Done || string(parts[2].Holds) != `{"*":"y"}` {
		t.Errorf("TaskParts after giving up p2 (done) and p0 = %+v", parts)
	}
	// A unit's batch commits while its task is open.
	must(t, st.Commit(ctx, state.Batch{Task: id, Resources: []state.Resource{{Source: srcA, URI: "r-unit", Length: 1, Hashes: hashes(), Outcome: state.OutcomeWritten, RunID: run}}}))
	// A part done with its run's end finishes the run in the same
	// transaction; a run that does not exist refuses the batch.
	unitRun, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: srcA, Started: at(4)})
	must(t, err)
	must(t, st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: id, Name: "p0", RunID: unitRun, Holds: []byte(`{}`),
		Finished: at(5), Status: "partial", Report: []byte(`{"written":3}`)}}))
	if r, err := st.Run(ctx, unitRun); err != nil || r.Status != "partial" || !r.Finished.Equal(at(5)) || string(r.Report) != `{"written":3}` {
		t.Errorf("the run of a part done with its end = %+v, %v; want partial, finished at %v, with its report", r, err, at(5))
	}
	wantFatal(t, "Commit(a part done with the end of no run)", st.Commit(ctx, state.Batch{Part: &state.PartDone{Task: id, Name: "p0", RunID: unitRun + 1000,
		Finished: at(5), Status: "ok"}}))
	if p, _, err := st.TaskPart(ctx, id, "p0"); err != nil || p.RunID != unitRun {
		t.Errorf("a refused part done changed the part: %+v, %v", p, err)
	}
	// A newer task is the open one; closed, the older is again.
	id2, err := st.CreateTask(ctx, state.Task{Source: srcA, Mode: "baseline"}, []string{"q"}, nil, nil)
	must(t, err)
	if got, _, _ := st.OpenTask(ctx, srcA); got.ID != id2 || got.Fresh || got.Slots != 0 {
		t.Errorf("OpenTask = %d (fresh %v, %d slots), want the newer %d, not fresh, no slots", got.ID, got.Fresh, got.Slots, id2)
	}
	must(t, st.CloseTask(ctx, id2))
	if got, _, _ := st.OpenTask(ctx, srcA); got.ID != id {
		t.Errorf("OpenTask after closing the newer = %d, want %d", got.ID, id)
	}
	must(t, st.CloseTask(ctx, id))
	if _, ok, _ := st.OpenTask(ctx, srcA); ok {
		t.Error("OpenTask found a closed task")
	}
	if got, err := st.TaskPartPlan(ctx, id, "p1"); !errors.Is(err, state.ErrTaskClosed) || got != nil {
		t.Errorf("TaskPartPlan of a closed task = %q, %v; want none, ErrTaskClosed", got, err)
	}
	// A unit of a closed task commits nothing.
	err = st.Commit(ctx, state.Batch{Task: id, Resources: []state.Resource{{Source: srcA, URI: "r-late", Length: 1, Hashes: hashes(), Outcome: state.OutcomeWritten, RunID: run}}})
	if !errors.Is(err, state.ErrTaskClosed) {
		t.Errorf("Commit of a closed task's unit = %v, want ErrTaskClosed", err)
	}
	if _, ok, _ := st.Resource(ctx, srcA, "r-late"); ok {
		t.Error("a closed task's unit committed a resource")
	}
	if err := st.CloseTask(ctx, id2+100); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("CloseTask(no such task) = %v, want ErrNotFound", err)
	}
}

// testHolders: the sinks that hold a source's resources accumulate, each
// once, sorted, per source.
func testHolders[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	if got, err := st.Holders(ctx, srcA); err != nil || len(got) != 0 {
		t.Fatalf("Holders of a new source = %q, %v", got, err)
	}
	for _, add := range [][]string{{"fs:/b", "fs:/a"}, {"fs:/a", "es:http://x/i", "es:http://x/i"}, nil} {
		if err := st.AddHolders(ctx, srcA, add); err != nil {
			t.Fatalf("AddHolders(%q): %v", add, err)
		}
	}
	if err := st.AddHolders(ctx, srcB, []string{"fs:/z"}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Holders(ctx, srcA); err != nil || !slices.Equal(got, []string{"es:http://x/i", "fs:/a", "fs:/b"}) {
		t.Errorf("Holders(%s) = %q, %v", srcA, got, err)
	}
	if got, err := st.Holders(ctx, srcB); err != nil || !slices.Equal(got, []string{"fs:/z"}) {
		t.Errorf("Holders(%s) = %q, %v", srcB, got, err)
	}
	// A sink left out of a harvest holds the source no more.
	must(t, st.RemoveHolders(ctx, srcA, []string{"fs:/a", "fs:/none"}))
	if got, err := st.Holders(ctx, srcA); err != nil || !slices.Equal(got, []string{"es:http://x/i", "fs:/b"}) {
		t.Errorf("Holders(%s) after RemoveHolders = %q, %v", srcA, got, err)
	}
	must(t, st.AddHolders(ctx, srcA, []string{"fs:/a"}))
	// The other sources held in some of a set of sinks, and those whose
	// holders were never recorded.
	const srcC, srcD = "http://c.example/", "http://d.example/"
	must(t, st.AddHolders(ctx, srcC, []string{"fs:/a", "fs:/c"}))
	must(t, st.PutResources(ctx, []state.Resource{
		{URI: "u1", Source: srcA, Length: 1, Outcome: state.OutcomeWritten},
		{URI: "u1", Source: srcD, Length: 1, Outcome: state.OutcomeWritten}, // no holders recorded
	}))
	for _, tc := range []struct {
		source string
		sinks  []string
		want   []string
	}{
		{srcA, []string{"fs:/a"}, []string{srcC, srcD}},
		{srcA, []string{"fs:/z", "fs:/c"}, []string{srcB, srcC, srcD}},
		{srcC, []string{"fs:/a"}, []string{srcA, srcD}},
		{srcA, nil, []string{srcD}},
	} {
		if got, err := st.OtherSources(ctx, tc.source, tc.sinks); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("OtherSources(%s, %q) = %q, %v; want %q", tc.source, tc.sinks, got, err, tc.want)
		}
	}
}

// testRegistryPages: the registry's reads at scale — the due candidates
// and the recorded next harvests, a page of sites by state and name with
// its counts, a site's runs and log by page, its run under way, the runs
// by status.
func testRegistryPages[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	st, _ := openStore(t, h)
	now := at(100)
	for _, name := range []string{"a-fail", "b-run", "c-due", "d-paused", "e-ok", "f-unknown"} {
		must(t, st.PutSite(ctx, state.Site{Name: name, Definition: "name: " + name + "\n"}))
	}
	for _, s := range []struct {
		name, status string
	}{{"a-fail", "failed"}, {"b-run", "ok"}, {"c-due", "ok"}, {"d-paused", "ok"}, {"e-ok", "ok"}} {
		id, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: srcA, Site: s.name, Started: at(1)})
		must(t, err)
		must(t, st.FinishRun(ctx, id, at(2), s.status, nil))
		must(t, st.SiteHarvested(ctx, s.name, at(1), s.status, id))
	}
	running, err := st.BeginRun(ctx, state.Run{Mode: "incremental", Source: srcA, Site: "b-run", Started: at(3)})
	must(t, err)
	must(t, st.SetSitePaused(ctx, "d-paused", true))
	// Harvested: their next harvest unknown until recorded.
	dueOf := func(name string, next time.Time) state.DueTime {
		row, err := st.Site(ctx, name)
		must(t, err)
		return state.DueTime{Name: name, At: next, Updated: row.Updated}
	}
	must(t, st.SetSitesDue(ctx, []state.DueTime{dueOf("a-fail", at(50)), dueOf("b-run", at(200)), dueOf("c-due", at(99)), dueOf("d-paused", at(10)), dueOf("e-ok", at(200))}))
	// A due time computed from a row read before a change is not
	// recorded: f-unknown's explicit next, set meanwhile, stands.
	read := dueOf("f-unknown", at(500))
	must(t, st.SetSiteNext(ctx, "f-unknown", at(60)))
	must(t, st.SetSitesDue(ctx, []state.DueTime{read}))
	due, err := st.DueSites(ctx, now)
	must(t, err)
	var names []string
	for _, s := range due {
		names = append(names, s.Name)
	}
	if want := []string{"a-fail", "c-due", "f-unknown"}; !reflect.DeepEqual(names, want) {
		t.Errorf("DueSites = %v, want %v (not paused; due, or not known)", names, want)
	}
	page, err := st.SitePage(ctx, state.SiteQuery{Limit: 10, Now: now})
	must(t, err)
	names = nil
	for _, s := range page.Sites {
		names = append(names, s.Name+":"+s.State)
	}
	if want := []string{"a-fail:failing", "b-run:running", "c-due:due", "f-unknown:due", "d-paused:paused", "e-ok:ok"}; !reflect.DeepEqual(names, want) || page.Total != 6 {
		t.Errorf("SitePage = %v (%d), want %v", names, page.Total, want)
	}
	if want := map[string]int{"failing": 1, "running": 1, "due": 2, "paused": 1, "ok": 1}; !reflect.DeepEqual(page.Counts, want) {
		t.Errorf("counts %v, want %v", page.Counts, want)
	}
	page, err = st.SitePage(ctx, state.SiteQuery{Search: "u", State: state.SiteDue, Limit: 1, Offset: 1, Now: now})
	must(t, err)
	if len(page.Sites) != 1 || page.Sites[0].Name != "f-unknown" || page.Total != 2 {
		t.Errorf("SitePage(u, due, second) = %+v", page)
	}
	if page, err := st.SitePage(ctx, state.SiteQuery{Search: "%_", Limit: 10, Now: now}); err != nil || len(page.Sites) != 0 {
		t.Errorf("a search for %%_ matched %+v, %v", page.Sites, err)
	}
	for range 3 {
		id, err := st.BeginRun(ctx, state.Run{Mode: "incremental", Source: srcA, Site: "e-ok", Started: at(4)})
		must(t, err)
		must(t, st.FinishRun(ctx, id, at(5), "ok", nil))
	}
	runs, err := st.SiteRuns(ctx, "e-ok", 0, 2)
	must(t, err)
	if len(runs) != 2 || runs[0].ID <= runs[1].ID {
		t.Fatalf("SiteRuns = %+v", runs)
	}
	older, err := st.SiteRuns(ctx, "e-ok", runs[1].ID, 10)
	must(t, err)
	if len(older) != 2 || older[0].ID >= runs[1].ID {
		t.Errorf("the page before run %d: %+v", runs[1].ID, older)
	}
	if r, ok, err := st.RunningRun(ctx, "b-run"); err != nil || !ok || r.ID != running {
		t.Errorf("RunningRun = %+v, %v, %v", r, ok, err)
	}
	if _, ok, err := st.RunningRun(ctx, "e-ok"); err != nil || ok {
		t.Errorf("RunningRun of a site at rest: %v, %v", ok, err)
	}
	counts, err := st.RunCounts(ctx)
	must(t, err)
	if counts["ok"] != 7 || counts["failed"] != 1 || counts["running"] != 1 {
		t.Errorf("RunCounts = %v", counts)
	}
	for i := range 3 {
		must(t, st.AddEvent(ctx, state.Event{At: at(10 + i), Operation: "action", Site: "e-ok", Message: strconv.Itoa(i)}))
	}
	must(t, st.AddEvent(ctx, state.Event{At: at(20), Operation: "started"}))
	evs, err := st.SiteEvents(ctx, "e-ok", 2)
	must(t, err)
	if len(evs) != 2 || evs[0].Message != "2" || evs[1].Message != "1" {
		t.Errorf("SiteEvents = %+v", evs)
	}
	// A harvest recorded makes the next harvest unknown again.
	must(t, st.SiteHarvested(ctx, "e-ok", at(6), "ok", running))
	if due, err := st.DueSites(ctx, now); err != nil || !slices.ContainsFunc(due, func(s state.Site) bool { return s.Name == "e-ok" }) {
		t.Errorf("a site just harvested is not a due candidate: %v", err)
	}
}

// testPruneLog thins a harvest log of three sites (and runs of none) by
// age and by count per site, two rows a transaction: the runs beyond what
// is kept lose their reports and failures but stay, a run under way is
// never touched, and the log lines older than the oldest run kept go.
func testPruneLog[S Snapshot](t *testing.T, h Harness[S]) {
	ctx := t.Context()
	day := func(i int) time.Time { return at(0).Add(time.Duration(i) * 24 * time.Hour) }
	// build fills a store: site a's runs on days 1..5 and one left running
	// since day 0, b's on days 4 and 5, one of no site on day 1; each
	// finished run with a report and a failure, and a log line per run.
	build := func(t *testing.T) (Store[S], map[string][]int64, int64) {
		st, _ := openStore(t, h)
		ids := map[string][]int64{}
		running, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: srcA, Site: "a", Started: day(0)})
		must(t, err)
		add := func(site string, d int) {
			id, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: srcA, Site: site, Started: day(d)})
			must(t, err)
			must(t, st.AddFailures(ctx, []state.Failure{{RunID: id, URI: "r", Stage: "verify", Error: "x", Permanent: true, At: day(d)}}))
			must(t, st.FinishRun(ctx, id, day(d).Add(time.Minute), "ok", []byte(`{"status":"ok"}`)))
			must(t, st.AddEvent(ctx, state.Event{At: day(d), Operation: "harvest", Site: site, Message: "run"}))
			ids[site] = append(ids[site], id)
		}
		add("", 1)
		for d := 1; d <= 5; d++ {
			add("a", d)
		}
		add("b", 4)
		add("b", 5)
		return st, ids, running
	}
	// kept reports whether run id still has its report and its failure.
	kept := func(t *testing.T, st Store[S], id int64) bool {
		t.Helper()
		r, err := st.Run(ctx, id)
		must(t, err)
		fs, _, err := st.Failures(ctx, id, 1000)
		must(t, err)
		if (len(r.Report) > 0) != (len(fs) > 0) {
			t.Fatalf("run %d: report %q, %d failures: thinned by half", id, r.Report, len(fs))
		}
		return len(r.Report) > 0
	}
	lines := func(t *testing.T, st Store[S]) int {
		t.Helper()
		evs, err := st.Events(ctx, time.Time{}, "")
		must(t, err)
		return len(evs)
	}
	for _, tc := range []struct {
		name   string
		keep   state.LogKeep
		thin   map[string]int // runs thinned, the oldest of each site
		pruned state.Pruned
		lines  int // log lines left, of 8
	}{
		{"everything", state.LogKeep{}, map[string]int{}, state.Pruned{}, 8},
		{"two days", state.LogKeep{Age: 2 * 24 * time.Hour}, map[string]int{"": 1, "a": 3}, state.Pruned{Runs: 4, Failures: 4, Events: 4}, 4},
		{"two a site", state.LogKeep{PerSite: 2}, map[string]int{"a": 3}, state.Pruned{Runs: 3, Failures: 3, Events: 3}, 5},
		{"one a site", state.LogKeep{PerSite: 1}, map[string]int{"a": 4, "b": 1}, state.Pruned{Runs: 5, Failures: 5, Events: 5}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ids, running := build(t)
			got, err := st.PruneLog(ctx, tc.keep, day(5).Add(time.Hour), 2)
			must(t, err)
			if got != tc.pruned {
				t.Errorf("PruneLog = %+v, want %+v", got, tc.pruned)
			}
			for site, runs := range ids {
				for i, id := range runs {
					if want := i >= tc.thin[site]; kept(t, st, id) != want {
						t.Errorf("site %q, run %d of %d: kept = %v, want %v", site, i+1, len(runs), !want, want)
					}
				}
			}
			if r, err := st.Run(ctx, running); err != nil || r.Status != state.StatusRunning {
				t.Errorf("the run under way: %+v, %v", r, err)
			}
			if n := lines(t, st); n != tc.lines {
				t.Errorf("%d log lines left, want %d", n, tc.lines)
			}
			// Again: nothing more to do.
			if again, err := st.PruneLog(ctx, tc.keep, day(5).Add(time.Hour), 2); err != nil || again != (state.Pruned{}) {
				t.Errorf("PruneLog again = %+v, %v; want nothing", again, err)
			}
		})
	}
}
