package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// seqResolver answers the n-th lookup of a name (from 0) with seq[n], and
// every later one with the last answer: a hostile name server that
// answers each query of its own name as it likes (TTL 0).
type seqResolver struct {
	mu    sync.Mutex
	calls map[string]int
	seq   map[string][][]netip.Addr
}

func (s *seqResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	answers, ok := s.seq[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	n := s.calls[host]
	s.calls[host]++
	return answers[min(n, len(answers)-1)], nil
}

// TestSourceRebindingCannotMakeItLocal: a public source whose own name
// server answers one query of its name with a loopback address (DNS
// rebinding) is not classed as a local source: the harvester, which
// reaches it on its public address, never dials loopback for it, nor for
// a loopback URL it lists ("a name that resolves only to such addresses",
// "the address checked is the address dialled").
func TestSourceRebindingCannotMakeItLocal(t *testing.T) {
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/admin" {
			io.WriteString(w, "the machine's own admin page")
			return
		}
		io.WriteString(w, "a capability list")
	})
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	public := netip.MustParseAddr("203.0.113.10")
	loopback := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		name string
		seq  [][]netip.Addr // the answers to successive queries of the source's name
	}{
		// Successive queries of the source's name answer its public
		// address, then loopback: whichever lookup comes first, a
		// loopback answer must not make a source reached on its public
		// address local.
		{"public, then loopback", [][]netip.Addr{{public}, {loopback}, {public}}},
		{"public, then loopback twice", [][]netip.Addr{{public}, {loopback}, {loopback}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &seqResolver{calls: map[string]int{}, seq: map[string][][]netip.Addr{"source.example": tc.seq}}
			n := &network{route: map[netip.Addr]string{public: srv.Listener.Addr().String()}}
			src := fmt.Sprintf("http://source.example:%d/cl.xml", port)
			c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: src, Resolver: res, Dial: n.dial}})
			// The source is reached on its public address, or refused
			// where its name answered loopback: never dialled there.
			if body, err := c.Open(t.Context(), src); err == nil {
				io.Copy(io.Discard, body)
				body.Close()
			} else if !errors.Is(err, ErrAddressRefused) {
				t.Fatalf("Open(%s): %v", src, err)
			}
			for _, d := range n.dials() {
				if netip.MustParseAddrPort(d).Addr() != public {
					t.Fatalf("the source was dialled at %s; the test wants it reached on its public address only", d)
				}
			}
			// What the source (served from a public address) lists.
			target := fmt.Sprintf("http://127.0.0.1:%d/admin", port)
			body, err := c.Open(t.Context(), target)
			if err == nil {
				b, _ := io.ReadAll(body)
				body.Close()
				t.Fatalf("a source reached on public %s made the harvester fetch %s (%q); dials %v; want it refused",
					public, target, b, n.dials())
			}
			if !errors.Is(err, ErrAddressRefused) {
				t.Fatalf("Open(%s): %v; want ErrAddressRefused", target, err)
			}
		})
	}
}

// TestEmbeddedIPv4Classed: an IPv6 address of the NAT64 well-known
// prefix 64:ff9b::/96 (RFC 6052) embeds an IPv4 address, which a NAT64
// gateway on the harvester's network connects to on its behalf. One that
// embeds a loopback, private, link-local or metadata address must be
// refused as that address is, as an IPv4-mapped one (::ffff:a.b.c.d) is.
func TestEmbeddedIPv4Classed(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want AddressClass
	}{
		{"64:ff9b::7f00:1", ClassLoopback},    // 127.0.0.1
		{"64:ff9b::a00:1", ClassPrivate},      // 10.0.0.1
		{"64:ff9b::c0a8:101", ClassPrivate},   // 192.168.1.1
		{"64:ff9b::a9fe:a9fe", ClassMetadata}, // 169.254.169.254
		{"64:ff9b::a9fe:101", ClassLinkLocal}, // 169.254.1.1
		{"64:ff9b:1::a00:1", ClassPrivate},    // a local translator's
		{"2002:7f00:1::1", ClassLoopback},     // 6to4 of 127.0.0.1
		{"2002:a00:1::1", ClassPrivate},       // 6to4 of 10.0.0.1
	} {
		t.Run(tc.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tc.addr)
			if got := ClassOf(a); got != tc.want {
				t.Errorf("ClassOf(%s) = %s, want %s", tc.addr, got, tc.want)
			}
			res := stubResolver{"source.example": {netip.MustParseAddr("203.0.113.10")}, "nat64.example": {a}}
			n := &network{route: map[netip.Addr]string{}}
			c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: "http://source.example/", Resolver: res, Dial: n.dial}})
			body, err := c.Open(t.Context(), "http://nat64.example/latest/meta-data/")
			if err == nil {
				body.Close()
			}
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Errorf("Open: %v (dialled %v); want it refused before connecting, as a %s address", err, n.dials(), tc.want)
			}
		})
	}
}

// TestProxyAddressSpelledOtherwise: the operator's proxy (here on
// loopback, as a local Squid is) is dialled unchecked, because its target
// was checked. A URL a source lists that the transport dials at the
// proxy's own host:port, but spelled another way (full-width digits and
// dots, which IDNA maps to "127.0.0.1"), is not sent to the proxy (only
// https is proxied, as with HTTPS_PROXY alone), so nothing checks it, and
// the dial takes it for the proxy's: the source reaches the proxy itself
// as an origin server (its cache manager, /squid-internal-mgr/, answers
// such requests from localhost). It must be refused as "http://127.0.0.1:PORT/"
// is (or fail otherwise), never reach the proxy.
func TestProxyAddressSpelledOtherwise(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	proxy := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.String())
		mu.Unlock()
		io.WriteString(w, "the proxy's own page")
	})
	pu, _ := url.Parse(proxy.URL)
	res := stubResolver{"source.example": {netip.MustParseAddr("203.0.113.10")}, "public.example": {netip.MustParseAddr("198.51.100.7")}}
	var d net.Dialer
	c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: "http://source.example/", Resolver: res, Dial: d.DialContext,
		Proxy: func(r *http.Request) (*url.URL, error) {
			if r.URL.Scheme == "https" { // HTTPS_PROXY alone
				return pu, nil
			}
			return nil, nil
		}}})
	// Any https request goes through the proxy (the test proxy does not
	// tunnel; only that it was chosen matters).
	if b, err := c.Open(t.Context(), "https://public.example/x"); err == nil {
		b.Close()
	}
	fullWidth := strings.NewReplacer("1", "１", "2", "２", "7", "７", "0", "０", ".", "．").Replace("127.0.0.1")
	for _, target := range []string{
		"http://127.0.0.1:" + pu.Port() + "/squid-internal-mgr/menu",
		"http://" + fullWidth + ":" + pu.Port() + "/squid-internal-mgr/menu",
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		b, err := c.Open(t.Context(), target)
		if err == nil {
			got, _ := io.ReadAll(b)
			b.Close()
			mu.Lock()
			t.Errorf("Open(%s) reached the proxy as an origin server (it saw %q, answered %q); want it refused", target, asked, got)
			mu.Unlock()
			continue
		}
		mu.Lock()
		if len(asked) > 0 {
			t.Errorf("Open(%s): %v, but the proxy was asked %q as an origin server", target, err, asked)
		}
		mu.Unlock()
	}
}
