package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// baseFile is the file of a generated source's directory that records the
// base URL it was generated for (see NewBase).
const baseFile = ".rsharvest-base"

// BaseOf returns the base URL the source in dir was generated for, as
// RecordBase recorded it; "" when none was (a source written with
// Placeholder, which the server rewrites, or one not generated).
func BaseOf(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, baseFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	base := strings.TrimSpace(string(b))
	if u, err := url.Parse(base); err != nil || u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("%s: not a base URL: %q", filepath.Join(dir, baseFile), base)
	}
	return base, nil
}

// RecordBase records in dir the base URL its source was generated for:
// where Serve's callers serve it (ServeOptions.BaseURL).
func RecordBase(dir, base string) error {
	return os.WriteFile(filepath.Join(dir, baseFile), []byte(base+"\n"), 0o644)
}

// NewBase returns a base URL for a source to be generated into dir and
// served on this machine: a loopback port free now, out of the range the
// system gives connections (so that none takes it meanwhile), and a path
// of the source's own — the directory's name and a digest of its absolute
// path — so that two sources generated into two directories never share a
// URI, whatever ports they are served at.
func NewBase(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	name := regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(filepath.Base(abs), "-")
	path := strings.Trim(name, "-.") + "-" + hex.EncodeToString(sum[:3])
	for range 100 {
		port := 20000 + rand.IntN(12000) // below Linux's ephemeral range (32768–60999)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		if err := ln.Close(); err != nil {
			return "", err
		}
		return fmt.Sprintf("http://127.0.0.1:%d/%s/", port, path), nil
	}
	return "", errors.New("no free loopback port found for the source: give --base")
}
