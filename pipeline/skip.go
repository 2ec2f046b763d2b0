package pipeline

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// Skipping whole packages on a re-sync.
//
// When a baseline run has delivered every resource of a dump package to
// the run's sinks — no failure of the run recorded in the state names the
// package, and none names no package — it records the package's fingerprint: the length and
// hashes the Resource Dump declares for it. A later baseline whose dump
// declares the same fingerprint for the same URL, delivering to the same
// sinks, skips the package without reading anything of it: not its
// manifest copy, not its central directory, not one state record per
// resource. A changed package (new hashes), a new set of sinks, or a state
// that forgot resources (audit repair) reads it again.
//
// A package whose dump entry gives no hash is fingerprinted by its declared
// length (or none) and the validators its server sent with it (ETag,
// Last-Modified): a later baseline asks the server with a conditional GET
// whether it changed, and a 304 skips it without a byte of its body. Many
// sources are static web servers that send Last-Modified and nothing else.
//
// Records are written when the run finishes, after the commit stage has
// committed every outcome: a run killed before then leaves none, so a
// record never stands for an outcome not in the state.

// packageBook tracks, during a run, what is needed to record packages;
// which packages failed is read from the state when the run finishes.
type packageBook struct {
	mu sync.Mutex
	// done are the packages processed to the end: URL -> fingerprint.
	done map[string]string
	// resources counts committed outcomes per package URL.
	resources map[string]int64
	// validators are those of the packages downloaded, by URL.
	validators map[string]fetch.Validators
}

// noteValidators keeps the validators package url was downloaded with.
func (b *packageBook) noteValidators(url string, v fetch.Validators) {
	if v.IsZero() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.validators == nil {
		b.validators = map[string]fetch.Validators{}
	}
	b.validators[url] = v
}

// fingerprintOf returns package j's fingerprint: its declared hashes, or
// else its validators (see validatorFingerprint), or "" when it has neither.
func (b *packageBook) fingerprintOf(j source.Package) string {
	if fp := fingerprint(j); fp != "" {
		return fp
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return validatorFingerprint(j.Expect.Length, b.validators[j.URL])
}

func (b *packageBook) noteDone(url, fp string) {
	if fp == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		b.done = map[string]string{}
	}
	b.done[url] = fp
}

// noteOutcomes counts n committed outcomes of package pkg.
func (b *packageBook) noteOutcomes(pkg string, n int64) {
	if pkg == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.resources == nil {
		b.resources = map[string]int64{}
	}
	b.resources[pkg] += n
}

// records returns the packages to record: done, not failed, with at least
// one resource.
func (b *packageBook) records(sinks string, runID int64, failed map[string]bool) []state.PackageRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []state.PackageRecord
	for url, fp := range b.done {
		if failed[url] || b.resources[url] == 0 {
			continue
		}
		out = append(out, state.PackageRecord{URL: url, Sinks: sinks, Fingerprint: fp, Resources: b.resources[url], RunID: runID})
	}
	return out
}

// fingerprint identifies a package by the length and hashes its dump
// declares, or is "" when the dump gives no hash.
func fingerprint(j source.Package) string {
	h := j.Expect.Hashes
	if h.IsZero() {
		return ""
	}
	var b strings.Builder
	b.WriteString("length:")
	b.WriteString(strconv.FormatInt(j.Expect.Length, 10))
	for _, d := range []struct {
		name string
		sum  []byte
	}{{"md5", h.MD5}, {"sha-1", h.SHA1}, {"sha-256", h.SHA256}, {"sha-512", h.SHA512}} {
		if d.sum != nil {
			b.WriteString(" " + d.name + ":" + hex.EncodeToString(d.sum))
		}
	}
	return b.String()
}

// validatorFingerprint identifies a package whose dump gives no hash by
// its declared length and its validators; "" without validators.
func validatorFingerprint(length int64, v fetch.Validators) string {
	if v.IsZero() {
		return ""
	}
	return "length:" + strconv.FormatInt(length, 10) + "\netag:" + v.ETag + "\nlast-modified:" + v.LastModified
}

// parseValidatorFingerprint reads back what validatorFingerprint wrote.
func parseValidatorFingerprint(fp string) (int64, fetch.Validators, bool) {
	l, rest, ok := strings.Cut(fp, "\netag:")
	if !ok {
		return 0, fetch.Validators{}, false
	}
	etag, lm, ok := strings.Cut(rest, "\nlast-modified:")
	n, err := strconv.ParseInt(strings.TrimPrefix(l, "length:"), 10, 64)
	if !ok || err != nil || !strings.HasPrefix(l, "length:") {
		return 0, fetch.Validators{}, false
	}
	return n, fetch.Validators{ETag: etag, LastModified: lm}, true
}

// sinkKey names the run's set of sinks, in order.
func (r *run) sinkKey() string {
	names := make([]string, len(r.sinks))
	for i, s := range r.sinks {
		names[i] = s.name
	}
	return strings.Join(names, "\n")
}

// skipPackage reports whether the state records package j, as the dump
// now declares it, delivered in full to this run's sinks; it then counts
// the package's resources as unchanged. A package read for its winners
// (j.Wins) is never recorded so: whether its winners are held decides
// (see readPackage). An audit's listing skips no package (it does not
// ask).
func (r *run) skipPackage(ctx context.Context, j source.Package) (bool, error) {
	if r.opts.DisablePackageSkip || j.List || len(j.Wins) > 0 {
		return false, nil
	}
	rec, ok, err := r.opts.Store.PackageDone(ctx, j.URL, r.sinkKey())
	if err != nil || !ok {
		return false, err
	}
	if fp := fingerprint(j); fp != "" {
		if rec.Fingerprint != fp {
			return false, nil
		}
	} else {
		length, held, ok := parseValidatorFingerprint(rec.Fingerprint)
		if !ok || length != j.Expect.Length {
			return false, nil
		}
		if same, err := r.notModified(ctx, j.URL, held); err != nil || !same {
			return false, err
		}
	}
	r.log.Debug("package skipped: delivered unchanged before", "package", j.URL, "resources", rec.Resources, "run", rec.RunID)
	r.counts.PackageBytesDone.Add(max(j.Expect.Length, 0))
	r.book.noteDone(j.URL, rec.Fingerprint)
	r.book.noteOutcomes(j.URL, rec.Resources)
	return true, r.send(ctx, result{held: rec.Resources, pkgDone: true})
}

// notModified asks the server, with a conditional GET, whether the package
// at url is still the one held validated; it reads none of a changed
// package's body (the download that follows reads it). An error is
// returned only when it is fatal or ctx ended: any other failure is left to
// that download to meet and record.
func (r *run) notModified(ctx context.Context, url string, held fetch.Validators) (bool, error) {
	b, err := r.opts.Client.OpenIfChanged(ctx, url, held.ETag, held.LastModified)
	switch {
	case errors.Is(err, fetch.ErrNotModified):
		return true, nil
	case err == nil:
		b.Close()
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errclass.IsFatal(err):
		return false, err
	}
	r.log.Debug("conditional request for a package failed; downloading it", "package", url, "error", err)
	return false, nil
}

// recordPackages records the packages this run delivered in full; called
// once every outcome (and failure) is committed. A failure that names no
// package records none.
func (r *run) recordPackages(ctx context.Context) error {
	failed, unattributed, err := r.opts.Store.FailedPackages(ctx, r.runID)
	if err != nil || unattributed {
		return err
	}
	return r.opts.Store.SetPackagesDone(ctx, r.book.records(r.sinkKey(), r.runID, failed))
}
