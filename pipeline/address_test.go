package pipeline_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
)

// names is a resolver stub: public-looking names mapped to the addresses
// a hostile source wants the harvester to reach.
type names map[string]netip.Addr

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestAddressRuleInList: a source on 127.0.0.1 whose Resource List points
// at a cloud metadata service and an intranet host, directly and through a
// mirror: each such resource is its own permanent failure naming the rule
// and the flag, refused before any connection to those addresses, and
// every other resource is delivered.
func TestAddressRuleInList(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	hostileEntry := func(loc string) *manifest.Entry {
		e := listEntry(t, "unused", "secret")
		e.Loc = loc
		return e
	}
	listSource(t, dir,
		map[string]string{"r/a.txt": "a v1", "r/b.txt": "b v1"},
		[]*manifest.Entry{
			listEntry(t, "r/a.txt", "a v1"),
			hostileEntry("http://metadata.example/latest/meta-data/iam"),
			hostileEntry("http://intranet.example/admin"),
			hostileEntry("http://169.254.169.254/latest/user-data"),
			func() *manifest.Entry { // the primary fails; its mirror points inward
				e := listEntry(t, "missing/b.txt", "b v1")
				l := manifest.NewLink("duplicate", "http://intranet.example/b.txt")
				l.Pri = 1
				e.Links = append(e.Links, l)
				return e
			}(),
			listEntry(t, "r/b.txt", "b v1"),
		}, nil)
	srv, err := bench.Serve(ctx, dir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	source := srv.URL + "capabilitylist.xml"
	var mu sync.Mutex
	var dialed []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	resolver := names{"metadata.example": netip.MustParseAddr("169.254.169.254"), "intranet.example": netip.MustParseAddr("10.0.0.7")}
	h := newHarness(t)
	rep := h.baseline(ctx, source, func(o *pipeline.Options) {
		o.Client = fetch.New(fetch.Options{Retries: 1, Addresses: &fetch.AddressPolicy{Source: source, Resolver: resolver, Dial: dial}})
	})
	if rep.Resources.Written != 2 || rep.Resources.Failed != 4 {
		t.Fatalf("%s", rep.Summary())
	}
	refused := 0
	for _, f := range rep.Failures {
		if strings.Contains(f.Error, "missing/b.txt") && !strings.Contains(f.Error, "refused") {
			t.Errorf("failure of the mirrored resource names only its primary: %+v", f)
		}
		if strings.Contains(f.Error, "--allow-private-addresses") {
			refused++
			if !f.Permanent {
				t.Errorf("a refusal is not permanent: %+v", f)
			}
		}
	}
	if refused != 4 {
		t.Errorf("%d refusals naming the flag, want 4: %+v", refused, rep.Failures)
	}
	got := h.held(ctx)
	if len(got) != 2 || string(got[srv.URL+"r/a.txt"]) != "a v1" || string(got[srv.URL+"r/b.txt"]) != "b v1" {
		t.Errorf("held %v", keys(got))
	}
	for _, d := range dialed {
		if a := netip.MustParseAddrPort(d).Addr(); !a.IsLoopback() {
			t.Errorf("dialled %s: the rule must refuse before connecting", d)
		}
	}
}
