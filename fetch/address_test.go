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
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rsharvest/rsharvest/errclass"
)

// stubResolver maps public-looking names to the addresses a test wants
// them to resolve to; any other name does not exist.
type stubResolver map[string][]netip.Addr

func (s stubResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if as, ok := s[host]; ok {
		return as, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// network is the test's network: every address it is asked to dial is
// recorded, and the public addresses in route reach the test server on
// 127.0.0.1 (nothing is ever sent anywhere else).
type network struct {
	mu     sync.Mutex
	dialed []string
	route  map[netip.Addr]string // address → the test server's host:port
}

func (n *network) dial(ctx context.Context, nw, addr string) (net.Conn, error) {
	n.mu.Lock()
	n.dialed = append(n.dialed, addr)
	n.mu.Unlock()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	to := addr
	if r, ok := n.route[ap.Addr()]; ok {
		to = r
	} else if !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("test network: %s is not routed", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, nw, to)
}

func (n *network) dials() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.dialed...)
}

// TestAddressRule: a resource, a mirror or a redirect whose host resolves
// to a loopback, link-local, private, unspecified or cloud metadata
// address is refused before any connection is attempted — permanently,
// naming the rule and the flag — unless the source is served from that
// kind of address or the operator allows it.
func TestAddressRule(t *testing.T) {
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		io.WriteString(w, "hello")
	})
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	public, source := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.10")
	res := stubResolver{
		"source.example":   {source},
		"public.example":   {public},
		"intranet.example": {netip.MustParseAddr("10.1.2.3")},
		"ula.example":      {netip.MustParseAddr("fd12:3456::1")},
		"metadata.example": {netip.MustParseAddr("169.254.169.254")},
		"link.example":     {netip.MustParseAddr("169.254.10.1")},
		"zero.example":     {netip.MustParseAddr("0.0.0.0")},
		"local.example":    {netip.MustParseAddr("127.0.0.1")},
		"local6.example":   {netip.MustParseAddr("::1")},
		"mapped.example":   {netip.MustParseAddr("::ffff:10.0.0.1")},
		"cgnat.example":    {netip.MustParseAddr("100.64.1.1")},
		// A name with a public and a private address: only the public
		// one is dialled.
		"mixed.example": {netip.MustParseAddr("192.168.1.1"), public},
		// A source whose name has a public and a loopback address is
		// public: it may not lead inward.
		"mixedlocal.example": {netip.MustParseAddr("127.0.0.1"), source},
		// A name with only local addresses is a local source.
		"localonly.example": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
	}
	at := func(host string) string { return fmt.Sprintf("http://%s:%d/x", host, port) }
	loopbackURL := fmt.Sprintf("http://127.0.0.1:%d/x", port)
	tests := []struct {
		name, source, url string
		allow             bool
		class             AddressClass // "": allowed
	}{
		{"public", at("source.example"), at("public.example"), false, ""},
		{"private (RFC 1918)", at("source.example"), at("intranet.example"), false, ClassPrivate},
		{"private (RFC 4193)", at("source.example"), at("ula.example"), false, ClassPrivate},
		{"shared address space", at("source.example"), at("cgnat.example"), false, ClassPrivate},
		{"IPv4-mapped private", at("source.example"), at("mapped.example"), false, ClassPrivate},
		{"cloud metadata by name", at("source.example"), at("metadata.example"), false, ClassMetadata},
		{"cloud metadata by address", at("source.example"), "http://169.254.169.254/latest/meta-data/", false, ClassMetadata},
		{"link-local", at("source.example"), at("link.example"), false, ClassLinkLocal},
		{"unspecified", at("source.example"), at("zero.example"), false, ClassUnspecified},
		{"loopback by name", at("source.example"), at("local.example"), false, ClassLoopback},
		{"loopback IPv6", at("source.example"), at("local6.example"), false, ClassLoopback},
		{"loopback by address", at("source.example"), loopbackURL, false, ClassLoopback},
		{"a redirect inward", at("source.example"), at("public.example") + "?to=" + loopbackURL, false, ClassLoopback},
		{"a mixed name dials its public address", at("source.example"), at("mixed.example"), false, ""},
		{"a source on loopback may list loopback", loopbackURL, at("local.example"), false, ""},
		{"a source on loopback still may not list metadata", loopbackURL, at("metadata.example"), false, ClassMetadata},
		{"a source on the intranet may list the intranet", at("intranet.example"), at("intranet.example"), false, ""},
		{"a source named with a public and a loopback address is public", at("mixedlocal.example"), at("local.example"), false, ClassLoopback},
		{"a source named with a public and a private address is public", at("mixed.example"), at("intranet.example"), false, ClassPrivate},
		{"a source named with only loopback addresses may list loopback", at("localonly.example"), at("local.example"), false, ""},
		{"allowed by the operator", at("source.example"), at("local.example"), true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &network{route: map[netip.Addr]string{
				public:                                 srv.Listener.Addr().String(),
				source:                                 srv.Listener.Addr().String(),
				netip.MustParseAddr("10.1.2.3"):        srv.Listener.Addr().String(), // only "the intranet" source dials it
				netip.MustParseAddr("169.254.169.254"): srv.Listener.Addr().String(), // only when allowed
			}}
			c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: tc.source, Allow: tc.allow, Resolver: res, Dial: n.dial}})
			body, err := c.Open(context.Background(), tc.url)
			if tc.class == "" {
				if err != nil {
					t.Fatalf("Open(%s): %v", tc.url, err)
				}
				b, _ := io.ReadAll(body)
				body.Close()
				if string(b) != "hello" {
					t.Fatalf("body %q", b)
				}
				return
			}
			if err == nil {
				body.Close()
				t.Fatalf("Open(%s) was allowed; want a refusal of a %s address", tc.url, tc.class)
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Class != tc.class || !errors.Is(err, ErrAddressRefused) {
				t.Fatalf("error %v; want a RefusedError of class %s", err, tc.class)
			}
			if !errclass.IsPermanent(err) {
				t.Errorf("error %v is %s; want permanent", err, errclass.Of(err))
			}
			for _, want := range []string{article(string(tc.class)) + " address", "--allow-private-addresses"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			// Nothing was dialled but the public hop before a redirect.
			for _, d := range n.dials() {
				ap := netip.MustParseAddrPort(d)
				if ClassOf(ap.Addr()) != ClassPublic {
					t.Errorf("dialled %s before refusing", d)
				}
			}
		})
	}
}

func TestClassOf(t *testing.T) {
	for addr, want := range map[string]AddressClass{
		"8.8.8.8": ClassPublic, "2001:db8::1": ClassPublic, "127.0.0.2": ClassLoopback, "::1": ClassLoopback,
		"10.0.0.1": ClassPrivate, "172.16.5.4": ClassPrivate, "172.32.0.1": ClassPublic, "192.168.0.1": ClassPrivate,
		"fc00::1": ClassPrivate, "fe80::1": ClassLinkLocal, "169.254.1.1": ClassLinkLocal, "169.254.169.254": ClassMetadata,
		"fd00:ec2::254": ClassMetadata, "0.0.0.0": ClassUnspecified, "::": ClassUnspecified, "::ffff:127.0.0.1": ClassLoopback,
	} {
		if got := ClassOf(netip.MustParseAddr(addr)); got != want {
			t.Errorf("ClassOf(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestAddressRuleMixedSource: the source's own name, with a public and a
// loopback address, is dialled at its public address only.
func TestAddressRuleMixedSource(t *testing.T) {
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	public := netip.MustParseAddr("203.0.113.10")
	res := stubResolver{"mixedlocal.example": {netip.MustParseAddr("127.0.0.1"), public}}
	n := &network{route: map[netip.Addr]string{public: srv.Listener.Addr().String()}}
	src := fmt.Sprintf("http://mixedlocal.example:%d/x", port)
	c := New(Options{Retries: -1, Addresses: &AddressPolicy{Source: src, Resolver: res, Dial: n.dial}})
	for range 3 {
		body, err := c.Open(t.Context(), src)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, body)
		body.Close()
	}
	for _, d := range n.dials() {
		if ap := netip.MustParseAddrPort(d); ap.Addr() != public {
			t.Errorf("dialled %s; want only the public address %s", d, public)
		}
	}
}

// TestAddressRuleThroughProxy: with a proxy, each target is checked
// before the proxy is asked for it (the proxy resolves it again, so a
// name with any refused address is refused); the proxy itself, on
// loopback, is the operator's and is dialled.
func TestAddressRuleThroughProxy(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	proxy := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.String())
		mu.Unlock()
		io.WriteString(w, "via proxy")
	})
	proxyURL, _ := url.Parse(proxy.URL)
	public, source := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.10")
	res := stubResolver{
		"source.example": {source},
		"public.example": {public},
		"local.example":  {netip.MustParseAddr("127.0.0.1")},
		"mixed.example":  {public, netip.MustParseAddr("10.0.0.1")},
		"meta.example":   {netip.MustParseAddr("169.254.169.254")},
	}
	tests := []struct {
		target string
		class  AddressClass // "": asked of the proxy
	}{
		{"http://public.example/x", ""},
		{"https://public.example/x", ""},
		{"http://local.example/x", ClassLoopback},
		{"http://127.0.0.1:9/x", ClassLoopback},
		{"http://mixed.example/x", ClassPrivate},
		{"http://meta.example/latest", ClassMetadata},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			var d net.Dialer
			c := New(Options{Retries: -1, Addresses: &AddressPolicy{
				Source: "http://source.example/", Resolver: res, Dial: d.DialContext,
				Proxy: func(*http.Request) (*url.URL, error) { return proxyURL, nil },
			}})
			if strings.HasPrefix(tc.target, "https:") {
				// A CONNECT to the proxy: the test proxy refuses it, so
				// only whether it was asked is checked.
				body, err := c.Open(t.Context(), tc.target)
				if err == nil {
					body.Close()
				}
				if errors.Is(err, ErrAddressRefused) {
					t.Fatalf("Open(%s): %v; want it asked of the proxy", tc.target, err)
				}
				return
			}
			body, err := c.Open(t.Context(), tc.target)
			mu.Lock()
			got := slices.Clone(asked)
			mu.Unlock()
			if tc.class == "" {
				if err != nil {
					t.Fatalf("Open(%s): %v", tc.target, err)
				}
				b, _ := io.ReadAll(body)
				body.Close()
				if string(b) != "via proxy" || len(got) != 1 || got[0] != tc.target {
					t.Fatalf("body %q, proxy asked for %q", b, got)
				}
				return
			}
			if err == nil {
				body.Close()
				t.Fatalf("Open(%s) went through the proxy; want a refusal", tc.target)
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Class != tc.class || !re.Proxied || !errclass.IsPermanent(err) {
				t.Fatalf("error %v; want a permanent RefusedError of class %s, proxied", err, tc.class)
			}
			if len(got) != 0 {
				t.Errorf("the proxy was asked for %q", got)
			}
		})
	}
}

func TestArticle(t *testing.T) {
	for class, want := range map[AddressClass]string{ClassUnspecified: "an unspecified", ClassLoopback: "a loopback", ClassPrivate: "a private", ClassMetadata: "a cloud metadata"} {
		if got := article(string(class)); got != want {
			t.Errorf("article(%s) = %q, want %q", class, got, want)
		}
	}
}
