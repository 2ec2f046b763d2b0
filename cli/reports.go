package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/report"
	"github.com/rsharvest/rsharvest/site"
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
func (f *reportFlags) sender(st *state.Store) (*report.Sender, error) {
	s := &report.Sender{Dir: f.dir, Store: st, Admin: f.admin}
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
	m := &report.SMTP{Addr: f.smtp, From: f.from, Username: f.user, Password: os.Getenv("RSHARVEST_SMTP_PASSWORD"), TLS: f.tls}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, usagef("--smtp-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--smtp-ca %s: no PEM certificate in it", f.ca)
		}
		host, _, _ := net.SplitHostPort(f.smtp)
		m.TLSConfig = &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}
	}
	s.Mail = m
	return s, nil
}

// siteReport is the report of site s's harvest: its status (see
// harvestStatus), its run's report (nil when it failed before it began)
// and error, its failures from the state (the first
// report.MaxFailures), and its next harvest.
func siteReport(ctx context.Context, st *state.Store, s *site.Site, started time.Time, status string, rep *pipeline.Report, runErr error) (report.Site, error) {
	r := report.Site{Name: s.Name, Source: s.Source, Contact: s.Contact, Notify: s.Notify, Status: status, Started: started,
		Next: s.When.Next(started, time.Local)}
	if rep != nil {
		r.RunID, r.Mode, r.Started, r.Finished = rep.RunID, rep.Mode, rep.Started, rep.Finished
		c := rep.Resources
		r.Written, r.Deleted, r.Unchanged, r.Failed, r.Skipped = c.Written, c.Deleted, c.Unchanged, c.Failed, c.Skipped
		r.Error = rep.Error
	}
	if r.Mode == "" {
		r.Mode = "sync"
	}
	if runErr != nil && r.Error == "" {
		r.Error = runErr.Error()
	}
	if r.RunID > 0 {
		fails, err := st.Failures(ctx, r.RunID)
		if err != nil {
			return r, err
		}
		for i, f := range fails {
			if i == report.MaxFailures {
				r.MoreFailures = len(fails) - i
				break
			}
			r.Failures = append(r.Failures, report.Failure{URI: f.URI, Stage: f.Stage, Error: f.Error, Temporary: !f.Permanent})
		}
	}
	return r, nil
}

// dailyReport sends the composite report of the day's harvests (those
// begun in the 24 hours up to now), once per day.
func dailyReport(ctx context.Context, st *state.Store, rs *report.Sender, now time.Time) error {
	runs, err := st.RunsSince(ctx, now.Add(-24*time.Hour), "")
	if err != nil {
		return err
	}
	reg := site.Registry{Store: st}
	a := report.Admin{Key: "day:" + now.UTC().Format("2006-01-02"), Title: "harvests of the day up to " + now.UTC().Format("2006-01-02 15:04 UTC")}
	for _, run := range runs {
		if run.Site == "" || run.Status == state.StatusRunning {
			continue
		}
		s, err := reg.Site(ctx, run.Site)
		if errors.Is(err, state.ErrNoSite) {
			continue
		} else if err != nil {
			return err
		}
		var rep pipeline.Report
		if run.Report == nil || json.Unmarshal(run.Report, &rep) != nil {
			rep = pipeline.Report{Mode: run.Mode, Source: run.Source, RunID: run.ID, Started: run.Started, Finished: run.Finished}
		}
		r, err := siteReport(ctx, st, s, run.Started, run.Status, &rep, nil)
		if err != nil {
			return err
		}
		a.Sites = append(a.Sites, r)
	}
	if len(a.Sites) == 0 {
		return nil
	}
	if err := rs.Composite(ctx, &a); err != nil {
		return fmt.Errorf("daily report: %w", err)
	}
	return nil
}

// sendReport writes and sends a site's report; a failure to send is
// logged, not the harvest's.
func (a *app) sendReport(ctx context.Context, rs *report.Sender, r *report.Site) {
	if rs == nil {
		return
	}
	if err := rs.Site(context.WithoutCancel(ctx), r); err != nil {
		level := "permanent"
		if errclass.IsRetryable(err) {
			level = "temporary"
		}
		a.logger().Warn("the site's report could not be sent", "site", r.Name, "failure", level, "error", err)
	}
}
