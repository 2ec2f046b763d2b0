package cli

import (
	"net/mail"
	"os"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/state"
)

// reportFlags are the flags of run and daemon that say where reports go.
type reportFlags struct {
	dir, smtp, from, user, tls, admin, ca string
}

func (f *reportFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.dir, "report-dir", "", "write every site's report and the composite report here, as text and HTML")
	fl.StringVar(&f.smtp, "smtp", "", "send the reports by e-mail through this SMTP server, HOST:PORT (password: $RSHARVEST_SMTP_PASSWORD)")
	fl.StringVar(&f.from, "smtp-from", "", "the reports' sender address (required with --smtp)")
	fl.StringVar(&f.user, "smtp-user", "", "authenticate to the SMTP server as this user")
	fl.StringVar(&f.tls, "smtp-tls", "starttls", "how the SMTP connection is protected: starttls (required), tls, none")
	fl.StringVar(&f.admin, "admin", "", "send the composite report of the harvests to this address")
	fl.StringVar(&f.ca, "smtp-ca", "", "trust the SMTP server's certificate if signed by the CA in this PEM file (default: the system's roots)")
}

// sender returns the reports' sender the flags describe.
func (f *reportFlags) sender(st *state.Store) (*notify.Sender, error) {
	s := &notify.Sender{Dir: f.dir, Store: st, Admin: f.admin}
	if f.admin != "" {
		if _, err := mail.ParseAddress(f.admin); err != nil {
			return nil, usagef("--admin %q: %v", f.admin, err)
		}
	}
	if f.smtp == "" {
		return s, nil
	}
	if _, err := mail.ParseAddress(f.from); err != nil {
		return nil, usagef("--smtp-from %q: want the sender's address: %v", f.from, err)
	}
	switch f.tls {
	case "starttls", "tls", "none":
	default:
		return nil, usagef("--smtp-tls: want starttls, tls or none")
	}
	m := &notify.SMTP{Addr: f.smtp, From: f.from, Username: f.user, Password: os.Getenv("RSHARVEST_SMTP_PASSWORD"), TLS: f.tls}
	if f.ca != "" {
		if err := m.TrustCA(f.ca); err != nil {
			return nil, usagef("--smtp-ca %v", err)
		}
	}
	s.Mail = m
	return s, nil
}
