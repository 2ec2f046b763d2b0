package pipeline_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// TestVerifyStrongest: by default an entry's bytes are checked against the
// strongest digest it lists (with its length and CRC-32), so a wrong md5
// beside a right sha-256 passes and a wrong sha-256 beside a right md5
// fails; with VerifyAll (--verify all) every digest listed must match.
// Either way the state records the digests the entry lists.
func TestVerifyStrongest(t *testing.T) {
	flip := func(h []byte) { h[0] ^= 0xff }
	changes := []change{
		{uri: res(1), kind: manifest.Created, at: "2013-01-03T09:00:00Z", body: "every digest right"},
		{uri: res(2), kind: manifest.Created, at: "2013-01-03T09:01:00Z", body: "md5 wrong, sha-256 right",
			raw: func(e *manifest.Entry) { flip(e.Metadata.Hashes.MD5) }},
		{uri: res(3), kind: manifest.Created, at: "2013-01-03T09:02:00Z", body: "md5 right, sha-256 wrong",
			raw: func(e *manifest.Entry) { flip(e.Metadata.Hashes.SHA256) }},
		{uri: res(4), kind: manifest.Created, at: "2013-01-03T09:03:00Z", body: "md5 only, wrong",
			raw: func(e *manifest.Entry) { e.Metadata.Hashes.SHA256 = nil; flip(e.Metadata.Hashes.MD5) }},
	}
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{{from: "2013-01-03T00:00:00Z", until: "2013-01-04T00:00:00Z", changes: changes}}, false)
	srv := serve(t, src)
	for _, tc := range []struct {
		name    string
		all     bool
		written []string
		failed  map[string]string // uri → what its failure names
	}{
		{"strongest (default)", false, []string{res(1), res(2)}, map[string]string{res(3): "sha-256", res(4): "md5"}},
		{"all", true, []string{res(1)}, map[string]string{res(2): "md5", res(3): "sha-256", res(4): "md5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t)
			opts := h.options(srv.URL + "changedump.xml")
			opts.VerifyAll = tc.all
			rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{From: mustTime(t, "2013-01-01T00:00:00Z")})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Status != runreport.StatusPartial || rep.Resources.Written != int64(len(tc.written)) || rep.Resources.Failed != int64(len(tc.failed)) {
				t.Fatalf("%s", rep.Summary())
			}
			got := h.held(ctx)
			for _, uri := range tc.written {
				if _, ok := got[uri]; !ok {
					t.Errorf("%s not delivered", uri)
				}
				r, ok, err := recordOf(ctx, h.store, uri)
				if err != nil || !ok || r.Verified != state.VerifiedHash || r.Hashes.MD5 == nil || r.Hashes.SHA256 == nil {
					t.Errorf("%s recorded as %+v (%v): want both digests listed, verified by hash", uri, r, err)
				}
			}
			for _, f := range rep.Failures {
				want, ok := tc.failed[f.URI]
				if !ok || !strings.Contains(f.Error, want) || !f.Permanent {
					t.Errorf("failure %+v, want one naming %q", f, want)
				}
				if _, held := got[f.URI]; held {
					t.Errorf("%s failed but is held", f.URI)
				}
			}
		})
	}
}

// TestOwnDigest: the sha-256 of every body written is computed as it is
// written and kept in the state beside the digests the source gave — for a
// resource the source gave no hash, and one it gave only md5 — while the
// report still counts the resource the source left unverified.
func TestOwnDigest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	noHash := listEntry(t, "r/none.txt", "no hash given")
	noHash.Metadata.Hashes = fixity.Hashes{}
	md5Only := listEntry(t, "r/md5.txt", "md5 only")
	md5Only.Metadata.Hashes.SHA256 = nil
	listSource(t, dir, map[string]string{"r/none.txt": "no hash given", "r/md5.txt": "md5 only"},
		[]*manifest.Entry{noHash, md5Only}, nil)
	srv, err := bench.Serve(ctx, dir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newHarness(t)
	rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", nil)
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 2 || rep.Resources.Unverified != 1 {
		t.Fatalf("%s", rep.Summary())
	}
	for path, body := range map[string]string{"r/none.txt": "no hash given", "r/md5.txt": "md5 only"} {
		r, ok, err := recordOf(ctx, h.store, srv.URL+path)
		want := sha256.Sum256([]byte(body))
		if err != nil || !ok || !bytes.Equal(r.Hashes.SHA256, want[:]) {
			t.Errorf("%s recorded %+v (%v): want its own sha-256", path, r.Hashes, err)
		}
		if path == "r/md5.txt" && r.Hashes.MD5 == nil {
			t.Errorf("%s: the md5 the source gave is not kept", path)
		}
	}
	// Synced again, unchanged: the digests stay.
	rep = h.baseline(ctx, srv.URL+"capabilitylist.xml", nil)
	if rep.Resources.Written != 0 {
		t.Fatalf("second run: %s", rep.Summary())
	}
	for path, body := range map[string]string{"r/none.txt": "no hash given", "r/md5.txt": "md5 only"} {
		r, _, _ := recordOf(ctx, h.store, srv.URL+path)
		if want := sha256.Sum256([]byte(body)); !bytes.Equal(r.Hashes.SHA256, want[:]) {
			t.Errorf("%s: its sha-256 is not kept by a run that found it unchanged: %+v", path, r.Hashes)
		}
	}
}
