package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// ErrAddressRefused is wrapped by the (permanent) error of a request whose
// host resolves to an address of a class the harvester does not reach on
// a source's say-so (see AddressPolicy).
var ErrAddressRefused = errors.New("address refused")

// AddressClass is the kind of network an IP address belongs to, for the
// address rule (see AddressPolicy).
type AddressClass string

// The address classes. Public is every address that is none of the others.
const (
	ClassPublic      AddressClass = "public"
	ClassLoopback    AddressClass = "loopback"
	ClassLinkLocal   AddressClass = "link-local"
	ClassPrivate     AddressClass = "private"
	ClassUnspecified AddressClass = "unspecified"
	ClassMetadata    AddressClass = "cloud metadata"
)

// metadataAddrs are the cloud providers' instance metadata services.
var metadataAddrs = [...]netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, DigitalOcean, …
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
}

// cgnat is RFC 6598's shared address space, kept with the private ranges.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// ClassOf returns the class of address a: unspecified (0.0.0.0, ::),
// loopback (127/8, ::1), a known cloud metadata address, link-local
// (169.254/16, fe80::/10), private (RFC 1918, RFC 4193's fc00::/7, RFC
// 6598's 100.64/10) or public. An IPv4 address mapped into IPv6 is
// classed as the IPv4 address.
func ClassOf(a netip.Addr) AddressClass {
	a = a.Unmap()
	for _, m := range metadataAddrs {
		if a == m {
			return ClassMetadata
		}
	}
	switch {
	case a.IsUnspecified():
		return ClassUnspecified
	case a.IsLoopback():
		return ClassLoopback
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return ClassLinkLocal
	case a.IsPrivate(), cgnat.Contains(a):
		return ClassPrivate
	}
	return ClassPublic
}

// Resolver finds the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// AddressPolicy is the address rule (server-side request forgery): a
// source lists the URLs the harvester fetches, so a hostile one could make
// it fetch from the machine itself, the intranet or a cloud metadata
// service, and read the answer back through a republished copy. Every
// connection's address is checked after the name is resolved, on the very
// address then dialled (so a name that resolves differently the next time,
// DNS rebinding, cannot slip past): an address that is not public is
// refused before any connection is attempted, unless the source itself is
// served from an address of that class (a harvester inside an intranet, or
// every test on 127.0.0.1) or Allow is set. A cloud metadata address is
// allowed only by Allow.
type AddressPolicy struct {
	// Allow turns the rule off (--allow-private-addresses).
	Allow bool
	// Source is the URL of the source harvested: the classes of the
	// addresses its host resolves to are allowed (looked up once, at the
	// first connection).
	Source string
	// Resolver resolves host names (nil: net.DefaultResolver). Tests give
	// a stub.
	Resolver Resolver
	// Dial connects to an address the rule allowed (nil: a net.Dialer).
	// Tests give one that counts.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// guard is an AddressPolicy at work: the transport's DialContext.
type guard struct {
	p       AddressPolicy
	once    sync.Once
	allowed map[AddressClass]bool
}

func newGuard(p AddressPolicy) *guard {
	if p.Resolver == nil {
		p.Resolver = net.DefaultResolver
	}
	if p.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		p.Dial = d.DialContext
	}
	return &guard{p: p}
}

// sourceClasses looks up, once, the classes of the source's addresses.
func (g *guard) sourceClasses(ctx context.Context) map[AddressClass]bool {
	g.once.Do(func() {
		g.allowed = map[AddressClass]bool{ClassPublic: true}
		u, err := url.Parse(g.p.Source)
		if err != nil || u.Hostname() == "" {
			return
		}
		as, _ := g.resolve(ctx, u.Hostname())
		for _, a := range as {
			if c := ClassOf(a); c != ClassMetadata {
				g.allowed[c] = true
			}
		}
	})
	return g.allowed
}

// resolve returns host's addresses: itself when it is one.
func (g *guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	return g.p.Resolver.LookupNetIP(ctx, "ip", host)
}

// dial resolves addr's host, checks each address against the rule and
// dials the first allowed one that answers, by its address.
func (g *guard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: port %q: %w", addr, portText, err)
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var refused *RefusedError
	var last error
	for _, a := range addrs {
		if c := ClassOf(a); !g.p.Allow && !g.sourceClasses(ctx)[c] {
			if refused == nil {
				refused = &RefusedError{Host: host, Addr: a, Class: c}
			}
			continue
		}
		conn, err := g.p.Dial(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		last = err
	}
	if last != nil {
		return nil, last
	}
	if refused != nil {
		return nil, errclass.NewPermanent(refused)
	}
	return nil, fmt.Errorf("dial %s: no address", host)
}

// RefusedError is the error of a connection the address rule refused
// (classified permanent); it wraps ErrAddressRefused.
type RefusedError struct {
	Host  string
	Addr  netip.Addr
	Class AddressClass
}

// Error names the host, its address, the rule and the flag that lifts it.
func (e *RefusedError) Error() string {
	who := e.Addr.String()
	if e.Host != who {
		who = e.Host + " (" + who + ")"
	}
	return fmt.Sprintf("%s: %s is a %s address and the source is not served from one; refused before connecting (--allow-private-addresses allows it)",
		ErrAddressRefused, who, e.Class)
}

// Unwrap returns ErrAddressRefused.
func (e *RefusedError) Unwrap() error { return ErrAddressRefused }
