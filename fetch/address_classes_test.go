package fetch

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
)

// TestZonedAddressClassed: an IPv6 address with a zone ("[addr%25zone]"
// in a URL) is the same address: the zone does not change its class
// (netip's prefix and equality checks see a zoned address as another).
func TestZonedAddressClassed(t *testing.T) {
	for _, s := range []string{
		"64:ff9b::7f00:1",    // NAT64 of 127.0.0.1
		"64:ff9b::a9fe:a9fe", // NAT64 of 169.254.169.254
		"64:ff9b::a00:1",     // NAT64 of 10.0.0.1
		"64:ff9b:1::a00:1",   // a local NAT64 translator's
		"2002:7f00:1::1",     // 6to4 of 127.0.0.1
		"fd00:ec2::254",      // AWS metadata over IPv6
		"::",                 // unspecified: connecting to it reaches this host
		"::1",
		"fe80::1",
	} {
		plain := netip.MustParseAddr(s)
		zoned := plain.WithZone("1")
		if got, want := ClassOf(zoned), ClassOf(plain); got != want {
			t.Errorf("ClassOf(%s) = %s; ClassOf(%s) = %s", zoned, got, plain, want)
		}
	}
}

// TestZonedAddressRefused: end to end, a resource URL naming a refused
// address with a zone is refused before connecting.
func TestZonedAddressRefused(t *testing.T) {
	res := stubResolver{"source.example": {netip.MustParseAddr("203.0.113.10")}}
	n := &network{route: map[netip.Addr]string{}}
	c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: "http://source.example/", Resolver: res, Dial: n.dial}})
	for _, u := range []string{
		"http://[64:ff9b::7f00:1%251]/",           // 127.0.0.1
		"http://[64:ff9b::a9fe:a9fe%251]/latest/", // 169.254.169.254
		"http://[::%251]/",                        // unspecified: this host, as "http://[::]/" is
	} {
		body, err := c.Open(t.Context(), u)
		if err == nil {
			body.Close()
		}
		if !errors.Is(err, ErrAddressRefused) {
			t.Errorf("Open(%s): %v (dialled %v); want it refused before connecting", u, err, n.dials())
		}
	}
}

// TestIPv6MetadataKin: the metadata services' IPv6 addresses (Google
// Cloud's, the AWS EKS Pod Identity agent's) are metadata, not private: a
// source on the intranet does not open them.
func TestIPv6MetadataKin(t *testing.T) {
	for _, s := range []string{"fd20:ce::254", "fd00:ec2::23", "169.254.170.23"} {
		if got := ClassOf(netip.MustParseAddr(s)); got != ClassMetadata {
			t.Errorf("ClassOf(%s) = %s; want %s", s, got, ClassMetadata)
		}
	}
	res := stubResolver{
		"intranet.example": {netip.MustParseAddr("10.1.2.3")},
		"gcp.example":      {netip.MustParseAddr("fd20:ce::254")},
	}
	n := &network{route: map[netip.Addr]string{}}
	c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: "http://intranet.example/", Resolver: res, Dial: n.dial}})
	body, err := c.Open(t.Context(), "http://gcp.example/computeMetadata/v1/")
	if err == nil {
		body.Close()
	}
	if !errors.Is(err, ErrAddressRefused) {
		t.Errorf("Open: %v (dialled %v); want the metadata address refused without the flag", err, n.dials())
	}
}

// TestMixedNameStaysPublic: a name with a public and a local address is
// public even when the source is local (its classes allowed): its local
// address is never dialled, when the public one does not answer either,
// and it is not asked of a proxy (which could dial that one).
func TestMixedNameStaysPublic(t *testing.T) {
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inside") })
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	public := netip.MustParseAddr("198.51.100.7") // not routed: the dial fails
	res := stubResolver{"mixed.example": {public, netip.MustParseAddr("127.0.0.1")}}
	src := fmt.Sprintf("http://127.0.0.1:%d/", port)
	t.Run("direct", func(t *testing.T) {
		n := &network{route: map[netip.Addr]string{}}
		c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: src, Resolver: res, Dial: n.dial}})
		body, err := c.Open(t.Context(), fmt.Sprintf("http://mixed.example:%d/x", port))
		if err == nil {
			b, _ := io.ReadAll(body)
			body.Close()
			t.Errorf("mixed.example (public and loopback) was reached at a local address: body %q, dialled %v", b, n.dials())
		}
		for _, d := range n.dials() {
			if ap := netip.MustParseAddrPort(d); ClassOf(ap.Addr()) != ClassPublic {
				t.Errorf("dialled %s, an address of a name that has a public one", d)
			}
		}
	})
	t.Run("proxy", func(t *testing.T) {
		var asked atomic.Int32
		proxy := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) { asked.Add(1); io.WriteString(w, "via proxy") })
		proxyURL, _ := url.Parse(proxy.URL)
		var d net.Dialer
		c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: src, Resolver: res, Dial: d.DialContext,
			Proxy: func(*http.Request) (*url.URL, error) { return proxyURL, nil }}})
		body, err := c.Open(t.Context(), "http://mixed.example/x")
		if err == nil {
			body.Close()
		}
		var r *RefusedError
		if !errors.As(err, &r) || !r.Proxied || !r.Mixed || asked.Load() != 0 {
			t.Errorf("Open through a proxy: %v (proxy asked %d times); want it refused, not asked of the proxy", err, asked.Load())
		}
	})
}

// TestInternationalSourceName: a local source whose name is not ASCII is
// looked up as a request dials it (its ASCII form), so that it is local:
// its own resources are fetched.
func TestInternationalSourceName(t *testing.T) {
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inside") })
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := stubResolver{"xn--bcher-kva.example": {netip.MustParseAddr("127.0.0.1")}}
	n := &network{route: map[netip.Addr]string{}}
	src := fmt.Sprintf("http://bücher.example:%d/", port)
	c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: src, Resolver: res, Dial: n.dial}})
	body, err := c.Open(t.Context(), src+"x")
	if err != nil {
		t.Fatalf("Open of the local source's own resource: %v (dialled %v)", err, n.dials())
	}
	b, _ := io.ReadAll(body)
	body.Close()
	if string(b) != "inside" {
		t.Errorf("body %q", b)
	}
}
