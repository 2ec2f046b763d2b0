package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"

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
	netip.MustParseAddr("169.254.170.23"),  // AWS EKS Pod Identity agent
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),    // AWS EKS Pod Identity agent over IPv6
	netip.MustParseAddr("fd20:ce::254"),    // Google Cloud over IPv6
}

// cgnat is RFC 6598's shared address space, kept with the private ranges.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// The IPv6 prefixes that stand for IPv4 addresses, which a gateway on the
// harvester's network may connect to on its behalf.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052: the IPv4 address in the last 32 bits
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215: a local translator's, any layout
	sixToFour  = netip.MustParsePrefix("2002::/16")      // RFC 3056: the IPv4 address in bits 16 to 47
)

// ClassOf returns the class of address a: unspecified (0.0.0.0, ::),
// loopback (127/8, ::1), a known cloud metadata address, link-local
// (169.254/16, fe80::/10), private (RFC 1918, RFC 4193's fc00::/7, RFC
// 6598's 100.64/10) or public. An IPv6 address that stands for an IPv4
// one — mapped (::ffff:0:0/96), NAT64's (64:ff9b::/96) or 6to4's
// (2002::/16) — is classed as that IPv4 address; a local NAT64
// translator's (64:ff9b:1::/48) as private.
func ClassOf(a netip.Addr) AddressClass {
	a = a.Unmap().WithZone("") // a zone names an interface, not another address
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return ClassOf(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return ClassOf(netip.AddrFrom4([4]byte(b[2:6])))
		case nat64Local.Contains(a):
			return ClassPrivate
		}
	}
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
// service, and read the answer back through a republished copy.
//
// A loopback, link-local, private or unspecified address is dialled only
// when Allow is set, or when the source is itself local: its URL's host is
// such an address, or a name that resolves only to such addresses (a test
// source on 127.0.0.1, a harvester inside an intranet) — then the classes
// of its addresses are allowed. A name with any public address is public:
// its other addresses are never dialled, nor those of any other name. A
// cloud metadata address is allowed only by Allow. Every connection's
// address is checked after the name is resolved, and the address checked
// is the one dialled (so a name that resolves differently the next time,
// DNS rebinding, cannot slip past).
//
// Through a proxy (HTTP_PROXY, HTTPS_PROXY), the proxy resolves the name
// again, so a target is asked for only when every address its name has
// here is one the rule allows; the proxy itself, the operator's choice, is
// dialled whatever its address.
type AddressPolicy struct {
	// Allow turns the rule off (--allow-private-addresses).
	Allow bool
	// Source is the URL of the source harvested: when its host is a
	// local address, or a name whose every address is local, the classes
	// of those addresses are allowed (looked up once, at the first
	// connection, before any other lookup); the source's name is then
	// dialled only at the addresses that lookup gave, so that a name
	// server answering each query differently cannot have the source
	// classed by one answer and reached at another.
	Source string
	// Resolver resolves host names (nil: net.DefaultResolver). Tests give
	// a stub.
	Resolver Resolver
	// Dial connects to an address the rule allowed (nil: a net.Dialer).
	// Tests give one that counts.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy chooses the proxy of a request (nil: http.ProxyFromEnvironment).
	// Tests give a fixed one.
	Proxy func(*http.Request) (*url.URL, error)
}

// guard is an AddressPolicy at work: the transport's DialContext and Proxy.
type guard struct {
	p       AddressPolicy
	once    sync.Once
	allowed map[AddressClass]bool
	// srcHost is the source's host name (lower case, no final dot) and
	// srcAddrs the addresses it is dialled at, when it is a local name.
	srcHost  string
	srcAddrs []netip.Addr

	mu      sync.Mutex
	proxies map[string]bool // host:port of each proxy chosen so far
}

func newGuard(p AddressPolicy) *guard {
	if p.Resolver == nil {
		p.Resolver = net.DefaultResolver
	}
	if p.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		p.Dial = d.DialContext
	}
	if p.Proxy == nil {
		p.Proxy = http.ProxyFromEnvironment
	}
	return &guard{p: p, proxies: map[string]bool{}}
}

// sourceClasses looks up, once, the classes the source's own addresses
// allow: public always; a local source's classes too (see AddressPolicy).
func (g *guard) sourceClasses(ctx context.Context) map[AddressClass]bool {
	g.once.Do(func() {
		g.allowed = map[AddressClass]bool{ClassPublic: true}
		u, err := url.Parse(g.p.Source)
		if err != nil || u.Hostname() == "" {
			return
		}
		host := u.Hostname()
		if ascii, err := idna.Lookup.ToASCII(host); err == nil {
			host = ascii // the name as a request dials it
		}
		as, _ := g.resolve(ctx, host)
		local := map[AddressClass]bool{}
		for _, a := range as {
			c := ClassOf(a)
			if c == ClassPublic {
				return // a name with a public address is public
			}
			if c != ClassMetadata {
				local[c] = true
			}
		}
		for c := range local {
			g.allowed[c] = true
		}
		if len(local) > 0 {
			g.srcHost, g.srcAddrs = hostName(host), as
		}
	})
	return g.allowed
}

// hostName is host as the guard compares names: lower case, without a
// final dot.
func hostName(host string) string {
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// refuses returns the refusal of address a of host, or nil when the rule
// allows it.
func (g *guard) refuses(ctx context.Context, host string, a netip.Addr) *RefusedError {
	if c := ClassOf(a); !g.p.Allow && !g.sourceClasses(ctx)[c] {
		return &RefusedError{Host: host, Addr: a, Class: c}
	}
	return nil
}

// resolve returns host's addresses: itself when it is one.
func (g *guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	return g.p.Resolver.LookupNetIP(ctx, "ip", host)
}

// dial resolves addr's host, checks each address against the rule and
// dials the first allowed one that answers, by its address. A proxy the
// guard chose is dialled unchecked: its target was checked (see proxy).
func (g *guard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: port %q: %w", addr, portText, err)
	}
	// The source's own lookup comes first: a local source's name is
	// dialled at the addresses that classed it, not at a later answer.
	g.sourceClasses(ctx)
	addrs := g.srcAddrs
	if g.srcHost == "" || hostName(host) != g.srcHost {
		if addrs, err = g.resolve(ctx, host); err != nil {
			return nil, err
		}
	}
	proxy := g.isProxy(addr)
	if !g.p.Allow && !proxy {
		addrs = publicOnly(addrs)
	}
	var refused *RefusedError
	var last error
	for _, a := range addrs {
		if r := g.refuses(ctx, host, a); r != nil && !proxy {
			if refused == nil {
				refused = r
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

// proxy is the transport's Proxy: the proxy the policy chooses for req,
// once req's target passed the rule. The proxy resolves the target's name
// again, so every address the name has here must be allowed.
func (g *guard) proxy(req *http.Request) (*url.URL, error) {
	u, err := g.p.Proxy(req)
	if err != nil {
		return nil, err
	}
	target := hostPort(req.URL)
	if u == nil && !g.isProxy(target) {
		return nil, nil // dialled directly, checked by dial
	}
	if u != nil {
		g.mu.Lock()
		g.proxies[hostPort(u)] = true
		g.mu.Unlock()
	}
	host := req.URL.Hostname()
	addrs, err := g.resolve(req.Context(), host)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		r := g.refuses(req.Context(), host, a)
		if r == nil && !g.p.Allow && len(publicOnly(addrs)) < len(addrs) && ClassOf(a) != ClassPublic {
			// Allowed for a local source, but the name has a public
			// address too: it is public, and the proxy may dial this one.
			r = &RefusedError{Host: host, Addr: a, Class: ClassOf(a), Mixed: true}
		}
		if r != nil {
			r.Proxied = true
			return nil, errclass.NewPermanent(r)
		}
	}
	return u, nil
}

// publicOnly returns the public addresses of addrs when it has any (a name
// with a public address is public: its other addresses are never
// dialled), else addrs.
func publicOnly(addrs []netip.Addr) []netip.Addr {
	if !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return ClassOf(a) == ClassPublic }) {
		return addrs
	}
	return slices.DeleteFunc(slices.Clone(addrs), func(a netip.Addr) bool { return ClassOf(a) != ClassPublic })
}

// isProxy reports whether addr (host:port) is a proxy the guard chose.
func (g *guard) isProxy(addr string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proxies[strings.ToLower(addr)]
}

// hostPort is u's host:port, the scheme's default port when it names none,
// in lower case, its host spelled as the transport dials it: a name not
// in ASCII mapped to its IDNA form (full-width "１２７．０．０．１" is
// "127.0.0.1"), as net/http does.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080" // a proxy's, as net/http dials it
		default:
			port = "80"
		}
	}
	host := u.Hostname()
	if !isASCII(host) {
		if a, err := idna.Lookup.ToASCII(host); err == nil {
			host = a
		}
	}
	return strings.ToLower(net.JoinHostPort(host, port))
}

// isASCII reports whether s is all ASCII.
func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// RefusedError is the error of a connection the address rule refused
// (classified permanent); it wraps ErrAddressRefused.
type RefusedError struct {
	Host  string
	Addr  netip.Addr
	Class AddressClass
	// Proxied: the request would have gone through a proxy, which
	// resolves the name again (see AddressPolicy).
	Proxied bool
	// Mixed: the address is of a class the source allows, but its name
	// has a public address too, so the name is public.
	Mixed bool
}

// Error names the host, its address, the rule and the flag that lifts it.
func (e *RefusedError) Error() string {
	who := e.Addr.String()
	if e.Host != who {
		who = e.Host + " (" + who + ")"
	}
	how := "refused before connecting"
	if e.Proxied {
		how = "not asked of the proxy"
	}
	why := "the source is not served from one"
	if e.Mixed {
		why = "the name has a public address too, so it is public"
	}
	return fmt.Sprintf("%s: %s is %s address and %s; %s (--allow-private-addresses allows it)",
		ErrAddressRefused, who, article(string(e.Class)), why, how)
}

// Unwrap returns ErrAddressRefused.
func (e *RefusedError) Unwrap() error { return ErrAddressRefused }

// article is "a word" or "an word", as word begins.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}
