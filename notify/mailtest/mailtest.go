// Package mailtest starts a real SMTP server for tests — Mailpit, built
// from the module proxy by scripts/servers.sh and cached like MinIO — on
// 127.0.0.1, with STARTTLS (a certificate made for the test) and
// authentication, and reads back through Mailpit's HTTP API what it
// received.
package mailtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

// Version is the Mailpit release scripts/servers.sh builds (keep in step
// with MAILPIT_VERSION there).
const Version = "v1.27.11"

// Server is a running Mailpit.
type Server struct {
	// SMTP is its SMTP address (host:port); API its HTTP API's base URL.
	SMTP, API string
	// TLS trusts its certificate (for STARTTLS).
	TLS *tls.Config
	// Username and Password are accepted for authentication.
	Username, Password string
	// CAFile is a PEM file of the certificate's CA (for clients that
	// read one, as rsharvest's --smtp-ca).
	CAFile string
}

// Start starts Mailpit for the test, stopped when it ends. A Mailpit that
// cannot be built or started fails the test.
func Start(t *testing.T) *Server {
	t.Helper()
	bin, err := Binary(t.Context())
	if err != nil {
		t.Fatalf("no Mailpit: %v\n(build it with scripts/servers.sh mailpit, or point RSHARVEST_MAILPIT at a mailpit binary)", err)
	}
	dir := t.TempDir()
	cert, key, pool := certificate(t)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := &Server{SMTP: freeAddr(t), TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}, Username: "rsharvest", Password: "s3cret", CAFile: certFile}
	auth := filepath.Join(dir, "auth")
	if err := os.WriteFile(auth, []byte(srv.Username+":"+srv.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api := freeAddr(t)
	srv.API = "http://" + api
	cmd := exec.Command(bin, "--smtp", srv.SMTP, "--listen", api, "--database", filepath.Join(dir, "mail.db"),
		"--smtp-tls-cert", certFile, "--smtp-tls-key", keyFile, "--smtp-require-starttls", "--smtp-auth-file", auth,
		"--smtp-disable-rdns", "--disable-version-check", "--quiet")
	logf, err := os.Create(filepath.Join(dir, "mailpit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Mailpit: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(srv.API + "/api/v1/messages")
		if err == nil {
			resp.Body.Close()
			if c, err := net.Dial("tcp", srv.SMTP); err == nil {
				c.Close()
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("Mailpit not ready after 30 s\n%s", log)
		}
	}
	return srv
}

// Message is one message Mailpit received.
type Message struct {
	ID, Subject, Text, HTML string
	To                      []string
}

// Messages returns every message received, oldest first, with its text
// and HTML.
func (s *Server) Messages(ctx context.Context) ([]Message, error) {
	var list struct {
		Messages []struct {
			ID      string
			Subject string
			To      []struct{ Address string }
		} `json:"messages"`
	}
	if err := s.get(ctx, "/api/v1/messages?limit=1000", &list); err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(list.Messages))
	for i := len(list.Messages) - 1; i >= 0; i-- { // the API lists newest first
		m := list.Messages[i]
		var full struct{ Text, HTML string }
		if err := s.get(ctx, "/api/v1/message/"+m.ID, &full); err != nil {
			return nil, err
		}
		msg := Message{ID: m.ID, Subject: m.Subject, Text: full.Text, HTML: full.HTML}
		for _, to := range m.To {
			msg.To = append(msg.To, to.Address)
		}
		out = append(out, msg)
	}
	return out, nil
}

func (s *Server) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.API+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mailpit %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// freeAddr returns a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// certificate makes a self-signed certificate for 127.0.0.1, and a pool
// that trusts it.
func certificate(t *testing.T) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), pool
}

// Binary returns the path of the Mailpit binary: $RSHARVEST_MAILPIT, or
// the one scripts/servers.sh builds and caches (see testbin.Path).
func Binary(ctx context.Context) (string, error) {
	return testbin.Path(ctx, "RSHARVEST_MAILPIT", "mailpit", Version)
}
