package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/rsharvest/rsharvest/errclass"
)

// SMTP sends reports through an SMTP server (github.com/wneessen/go-mail).
type SMTP struct {
	// Addr is the server, host:port.
	Addr string
	// From is the sender's address.
	From string
	// Username and Password authenticate (the mechanism the server
	// offers; none when Username is "").
	Username, Password string
	// TLS is how the connection is protected: "starttls" (the default:
	// STARTTLS, required), "tls" (TLS from the start) or "none".
	TLS string
	// TLSConfig verifies the server (nil: the system's roots).
	TLSConfig *tls.Config
	// Timeout bounds one message's whole exchange with the server, from
	// the dial to the end of the data (0: DefaultSMTPTimeout): a server
	// that takes the connection and never answers does not hold the
	// harvest that mails.
	Timeout time.Duration
}

// DefaultSMTPTimeout is SMTP.Timeout's default: time for the largest
// report over a slow link.
const DefaultSMTPTimeout = 2 * time.Minute

var _ Mailer = (*SMTP)(nil)

// TrustCA makes m trust the server's certificate when the CA in the PEM
// file caFile signed it (instead of the system's roots).
func (m *SMTP) TrustCA(caFile string) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s: no PEM certificate in it", caFile)
	}
	host, _, _ := net.SplitHostPort(m.Addr)
	m.TLSConfig = &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}
	return nil
}

// Send sends one message with a text and an HTML part.
func (m *SMTP) Send(ctx context.Context, to []string, subject, text, html string) error {
	host, portText, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return errclass.Permanentf("smtp %q: want HOST:PORT: %w", m.Addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return errclass.Permanentf("smtp %q: want HOST:PORT", m.Addr)
	}
	cfg := m.TLSConfig
	if cfg == nil {
		cfg = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultSMTPTimeout
	}
	opts := []mail.Option{mail.WithPort(port), mail.WithTimeout(timeout), mail.WithTLSConfig(cfg)}
	implicitTLS := false
	switch m.TLS {
	case "", "starttls":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case "tls":
		// TLS from the start, done by dial below; go-mail then finds
		// the connection encrypted, and asks for no STARTTLS.
		implicitTLS = true
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	case "none":
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	default:
		return errclass.Permanentf("smtp: TLS %q: want starttls, tls or none", m.TLS)
	}
	// The connection carries the deadline of the whole exchange, which
	// go-mail's own (set again at each step) cannot move later, and is
	// closed when ctx ends.
	var mu sync.Mutex
	var stops []func() bool // the AfterFuncs of the connections dialled
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, stop := range stops {
			stop()
		}
	}()
	dial := func(dctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn = &deadlineConn{Conn: conn, end: time.Now().Add(timeout)}
		_ = conn.SetDeadline(time.Time{})
		mu.Lock()
		stops = append(stops, context.AfterFunc(ctx, func() { conn.Close() }))
		mu.Unlock()
		if !implicitTLS {
			return conn, nil
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
	opts = append(opts, mail.WithDialContextFunc(dial))
	if m.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover), mail.WithUsername(m.Username), mail.WithPassword(m.Password))
	}
	c, err := mail.NewClient(host, opts...)
	if err != nil {
		return errclass.Permanentf("smtp: %w", err)
	}
	msg := mail.NewMsg()
	if err := msg.From(m.From); err != nil {
		return errclass.Permanentf("smtp: from %q: %w", m.From, err)
	}
	if err := msg.To(to...); err != nil {
		return errclass.Permanentf("smtp: to %v: %w", to, err)
	}
	msg.Subject(subject)
	msg.SetBodyString(mail.TypeTextPlain, text)
	msg.AddAlternativeString(mail.TypeTextHTML, html)
	client, err := c.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return errclass.Retryablef("smtp %s: %w", m.Addr, err)
	}
	if err := c.SendWithSMTPClient(client, msg); err != nil {
		_ = c.CloseWithSMTPClient(client)
		return errclass.Retryablef("smtp %s: %w", m.Addr, err)
	}
	// The server took the message (it answered the data): a connection
	// lost at QUIT does not make it unsent, which would send it again.
	_ = c.CloseWithSMTPClient(client)
	return nil
}

// deadlineConn is a connection whose deadlines are never later than end:
// the deadline of a message's whole exchange, which go-mail, setting its
// own at each step, cannot extend.
type deadlineConn struct {
	net.Conn
	end time.Time
}

func (c *deadlineConn) clamp(t time.Time) time.Time {
	if t.IsZero() || t.After(c.end) {
		return c.end
	}
	return t
}

func (c *deadlineConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.clamp(t)) }

func (c *deadlineConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t)) }

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(t))
}

// String names the server, for messages.
func (m *SMTP) String() string { return fmt.Sprintf("smtp %s (from %s)", m.Addr, m.From) }
