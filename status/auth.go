package status

import (
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Credentials are one role's: a bearer token, or a user and password
// (HTTP basic authentication), or both.
type Credentials struct {
	// Token is accepted as "Authorization: Bearer TOKEN".
	Token string
	// User and Password are accepted as HTTP basic authentication.
	User, Password string
}

// IsSet reports whether c holds a token or a user with a password.
func (c Credentials) IsSet() bool { return c.Token != "" || (c.User != "" && c.Password != "") }

// The roles of a credential.
const (
	roleOperator = "operator"
	roleViewer   = "viewer"
)

// principal is who a request authenticated as.
type principal struct {
	role string
	// name is the basic user name, or which token.
	name string
}

func (p principal) String() string { return p.name + " (" + p.role + ")" }

type principalKey struct{}

// who returns the principal auth put in r's context.
func who(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// match returns who r authenticates as with c in role, comparing in
// constant time.
func match(r *http.Request, c Credentials, role string) (principal, bool) {
	if c.Token != "" {
		got := r.Header.Get("Authorization")
		if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+c.Token)) == 1 {
			return principal{role: role, name: role + " token"}, true
		}
	}
	if c.User != "" && c.Password != "" {
		u, pw, has := r.BasicAuth()
		userOK := subtle.ConstantTimeCompare([]byte(u), []byte(c.User))
		pwOK := subtle.ConstantTimeCompare([]byte(pw), []byte(c.Password))
		if has && userOK&pwOK == 1 {
			return principal{role: role, name: u}, true
		}
	}
	return principal{}, false
}

// The failed attempts a client (by address) may make: a burst, then one
// more every failureEvery; beyond that it is answered 429 whatever it
// sends, right credentials included, until its allowance refills.
const (
	failureBurst = 10
	failureEvery = 6 * time.Second
	// maxClients bounds the clients whose failures are remembered.
	maxClients = 4096
)

// failures limits each client's failed authentications. It remembers at
// most maxClients clients, forgetting, when a new one comes, the one heard
// from least recently if its allowance is whole again; else the newcomer
// shares one allowance with every other newcomer (overflow) until room is
// made: a flood of one-off addresses can neither wipe out the allowance of
// a client that keeps failing nor win fresh allowances of its own.
type failures struct {
	mu       sync.Mutex
	by       map[string]*list.Element // of *client, in order
	order    list.List                // most recently heard first
	overflow *rate.Limiter
}

type client struct {
	host string
	lim  *rate.Limiter
}

// limiters returns the allowances a request's client spends a failure
// of: its address's; for IPv6, its /64 (RFC 4291's interface ids: it may
// take any address of it) and its /48 (an ordinary site's allocation,
// whose 65,536 /64s would otherwise each win an allowance).
func (f *failures) limiters(r *http.Request) []*rate.Limiter {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	keys := []string{host}
	if a, err := netip.ParseAddr(host); err == nil && a.Unmap().Is6() {
		keys = keys[:0]
		for _, bits := range []int{64, 48} {
			if p, err := a.Prefix(bits); err == nil {
				keys = append(keys, p.String())
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*rate.Limiter, 0, len(keys))
	for _, k := range keys {
		out = append(out, f.limiterLocked(k))
	}
	return out
}

func (f *failures) limiterLocked(host string) *rate.Limiter {
	if e, ok := f.by[host]; ok {
		f.order.MoveToFront(e)
		return e.Value.(*client).lim
	}
	if f.by == nil {
		f.by = map[string]*list.Element{}
		f.overflow = rate.NewLimiter(rate.Every(failureEvery), failureBurst)
	}
	if len(f.by) >= maxClients {
		oldest := f.order.Back()
		if oldest.Value.(*client).lim.Tokens() < failureBurst {
			return f.overflow // the oldest still remembers failures
		}
		f.order.Remove(oldest)
		delete(f.by, oldest.Value.(*client).host)
	}
	c := &client{host: host, lim: rate.NewLimiter(rate.Every(failureEvery), failureBurst)}
	f.by[host] = f.order.PushFront(c)
	return c.lim
}

// auth refuses a request without the operator's or the viewer's
// credentials, and a client that failed too often; it gives the handler
// who asked (who).
func (p *pages) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A failure is reserved before the credentials are compared, so
		// that attempts made at once cannot all pass one last allowance;
		// a success gives it back.
		// (Given back as at the moment it was taken: a reservation already
		// due is not given back later.)
		now := time.Now()
		var held []*rate.Reservation
		giveBack := func() {
			for _, res := range held {
				res.CancelAt(now)
			}
		}
		for _, lim := range p.failures.limiters(r) {
			res := lim.ReserveN(now, 1)
			held = append(held, res)
			if !res.OK() || res.DelayFrom(now) > 0 {
				giveBack()
				w.Header().Set("Retry-After", "6")
				http.Error(w, "too many failed attempts: try again later", http.StatusTooManyRequests)
				return
			}
		}
		id, ok := match(r, p.opts.Operator, roleOperator)
		if !ok {
			id, ok = match(r, p.opts.Viewer, roleViewer)
		}
		if ok {
			giveBack()
		} else {
			if p.opts.Operator.User != "" || p.opts.Viewer.User != "" {
				w.Header().Set("WWW-Authenticate", `Basic realm="rsharvest"`)
			}
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, id)))
	})
}

// csrfToken is the token the forms served to id carry: a MAC of who it
// is under the handler's secret, so a page of another site cannot know it.
func (p *pages) csrfToken(id principal) string {
	mac := hmac.New(sha256.New, p.secret)
	mac.Write([]byte(id.role + "\x00" + id.name))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// secure sets the headers every response carries: no framing, no script,
// forms posted only here, styles only from here.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
