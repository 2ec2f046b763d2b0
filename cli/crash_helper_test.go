//go:build unix

package cli

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/sink/s3"
	"github.com/rsharvest/rsharvest/sink/s3/s3test"
	"github.com/rsharvest/rsharvest/state"
)

// This file holds the machinery of the crash tests (crash_test.go): building
// the real binary, running it as a child process that is killed with
// SIGKILL, and auditing what a killed child left behind.

// crashSinkTmpDir is the fs sink's directory of files being written (see
// sink/fs/layout.go); it is the only place a partial body may be.
const crashSinkTmpDir = ".rsharvest-tmp"

// crashBuildBinary builds ./cmd/rsharvest, without the race detector (SQLite
// is many times slower under it), into a directory of the test.
func crashBuildBinary(t testing.TB) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command to build the binary (the crash tests need it):", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goCmd, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not in a module")
	}
	bin := filepath.Join(t.TempDir(), "rsharvest")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", bin, "./cmd/rsharvest")
	cmd.Dir = filepath.Dir(gomod)
	// Whatever flags the test was run with, the child is a plain build.
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rsharvest: %v\n%s", err, b)
	}
	return bin
}

// crashSeed returns the seed of the test's random choices:
// RSHARVEST_CRASH_SEED when set, else a new one. It is logged so that a
// failure can be replayed.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RSHARVEST_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RSHARVEST_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with RSHARVEST_CRASH_SEED=%d)", seed, seed)
	return seed
}

// crashBudget returns how many kills a test makes and for how long at most:
// def kills in budget, fewer with -short; RSHARVEST_CRASH_ITERATIONS sets the
// number and lifts the time limit. The limit keeps the test bounded on a
// slow or busy machine; the test logs how many kills it made.
func crashBudget(t *testing.T, def int, budget time.Duration) (int, time.Duration) {
	t.Helper()
	if s := os.Getenv("RSHARVEST_CRASH_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RSHARVEST_CRASH_ITERATIONS=%q: want a positive number", s)
		}
		return n, 24 * time.Hour
	}
	if testing.Short() {
		return max(1, def/4), budget / 3
	}
	return def, budget
}

// crashSums are the digests of one body.
type crashSums struct{ sha256, md5 string }

func crashSumOf(r io.Reader) (crashSums, error) {
	h, m := sha256.New(), md5.New()
	if _, err := io.Copy(io.MultiWriter(h, m), r); err != nil {
		return crashSums{}, err
	}
	return crashSums{hex.EncodeToString(h.Sum(nil)), hex.EncodeToString(m.Sum(nil))}, nil
}

// crashTruth collects bench.TruthAfter(opts, k): every resource's URI and
// digests after Change Dump packages 1 to k.
func crashTruth(t *testing.T, opts bench.GenOptions, k int) map[string]crashSums {
	t.Helper()
	m := map[string]crashSums{}
	err := bench.TruthAfter(t.Context(), opts, k, func(uri string, body io.Reader) error {
		s, err := crashSumOf(body)
		m[uri] = s
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// crashRig is one harvester's working directory: the state store, the
// spool directory and the child's TMPDIR, all under work, and its sink: an
// fs mirror under work too, or a bucket of the test's MinIO.
type crashRig struct {
	bin    string
	source string
	work   string
	sink   crashSink
	runs   int // children started
}

func newCrashRig(t *testing.T, bin, source string, tg *crashTarget) *crashRig {
	t.Helper()
	rg := &crashRig{bin: bin, source: source, work: t.TempDir()}
	for _, d := range []string{rg.spool(), rg.tmp()} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rg.sink = tg.newSink(t, rg.work)
	return rg
}

func (rg *crashRig) db() string    { return filepath.Join(rg.work, "state.db") }
func (rg *crashRig) spool() string { return filepath.Join(rg.work, "spool") }
func (rg *crashRig) tmp() string   { return filepath.Join(rg.work, "tmp") }

// auditSink reads what the rig's sink holds (see crashSink.audit).
func (rg *crashRig) auditSink(t *testing.T) map[string]crashSums {
	t.Helper()
	return rg.sink.audit(t)
}

// crashTarget makes the sinks of one test's rigs: fs mirrors, or buckets of
// a MinIO server the test started on 127.0.0.1.
type crashTarget struct {
	kind  string         // "fs" or "s3"
	minio *s3test.Server // s3 only
	// keys maps every object key a bucket may hold to its URI: the key of
	// every URI the source ever has, and the URI object of a hashed key.
	keys map[string]string
}

// crashS3Prefix is the key prefix the s3 sinks of the crash tests write
// under.
const crashS3Prefix = "mirror"

// newCrashTarget returns the target of kind "fs" or "s3"; for s3 it starts
// MinIO (stopped when t ends) and computes the key of each of uris, every
// URI the source ever has.
func newCrashTarget(t *testing.T, kind string, uris []string) *crashTarget {
	t.Helper()
	tg := &crashTarget{kind: kind}
	switch kind {
	case "fs":
	case "s3":
		tg.minio = s3test.ForTest(t, s3test.Options{Memory: true})
		// An S3 sink computes keys; it needs a bucket that exists.
		bucket, err := tg.minio.NewBucket(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sk, err := s3.New(t.Context(), tg.s3Options(bucket))
		if err != nil {
			t.Fatal(err)
		}
		defer sk.Close(t.Context())
		tg.keys = map[string]string{}
		for _, uri := range uris {
			key := sk.Key(uri)
			if other, dup := tg.keys[key]; dup {
				t.Fatalf("%s and %s have the same key %s", other, uri, key)
			}
			tg.keys[key] = uri
			if strings.HasPrefix(key, crashS3Prefix+"/_long/") {
				tg.keys[key+".uri"] = ""
			}
		}
	default:
		t.Fatalf("crash target: unknown sink kind %q", kind)
	}
	return tg
}

// s3Options are the options of an s3 sink over bucket, for the test's own
// use (the child gets a spec and credentials in its environment).
func (tg *crashTarget) s3Options(bucket string) s3.Options {
	return s3.Options{Endpoint: tg.minio.Endpoint(), Bucket: bucket, Prefix: crashS3Prefix,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey}
}

// newSink returns a new, empty sink for the rig working in work.
func (tg *crashTarget) newSink(t *testing.T, work string) crashSink {
	t.Helper()
	if tg.kind == "fs" {
		return fsCrashSink{dir: filepath.Join(work, "mirror")}
	}
	bucket, err := tg.minio.NewBucket(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return &s3CrashSink{tg: tg, bucket: bucket}
}

// crashSink is the sink of one rig, as the child is given it and as the
// test audits it.
type crashSink interface {
	// spec is the child's --sink argument, env what the child's
	// environment needs besides.
	spec() string
	env() []string
	// audit reads what the sink holds, raw and through the sink's own
	// Inventory, and returns URI → digests. It fails the test on anything
	// that is not a whole body at a key or path of the layout: a foreign
	// or half-named entry, a URI held twice, raw and Inventory views that
	// disagree, an object whose stored digests do not match its bytes.
	audit(t *testing.T) map[string]crashSums
	// partial counts the writes in progress a killed child left behind,
	// invisible to audit: the fs sink's temporary files, the bucket's
	// incomplete multipart uploads.
	partial(t *testing.T) int
	// partialCleaned says whether the next run removes what partial
	// counts.
	partialCleaned() bool
	// partialName names what partial counts, for the log.
	partialName() string
}

// fsCrashSink is an fs mirror in the rig's directory.
type fsCrashSink struct{ dir string }

func (fk fsCrashSink) spec() string         { return "fs:" + fk.dir }
func (fk fsCrashSink) env() []string        { return nil }
func (fk fsCrashSink) partialCleaned() bool { return true } // by fs.New
func (fk fsCrashSink) partialName() string {
	return "temporary files in the sink's " + crashSinkTmpDir
}

// partial counts the files under the sink's temporary directory (each
// process writes in a directory of its own there).
func (fk fsCrashSink) partial(t *testing.T) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(fk.dir, crashSinkTmpDir), func(_ string, d iofs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		t.Fatal(err)
	}
	return n
}

// s3CrashSink is a bucket of the test's MinIO, written under
// crashS3Prefix.
type s3CrashSink struct {
	tg     *crashTarget
	bucket string
	// verified are the digests of the object versions an audit has read
	// whole: a later audit reads only the objects written since.
	verified map[crashObject]crashSums
}

func (sk *s3CrashSink) spec() string {
	return "s3://" + sk.bucket + "/" + crashS3Prefix + "?endpoint=" + sk.tg.minio.Endpoint() + "&secure=false"
}

func (sk *s3CrashSink) env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s3test.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3test.SecretKey, "AWS_SESSION_TOKEN="}
}

// A lifecycle rule, not the next run, removes incomplete uploads.
func (sk *s3CrashSink) partialCleaned() bool { return false }
func (sk *s3CrashSink) partialName() string  { return "incomplete multipart uploads in the bucket" }

func (sk *s3CrashSink) partial(t *testing.T) int {
	t.Helper()
	n := 0
	for u := range sk.tg.minio.Client().ListIncompleteUploads(t.Context(), sk.bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("ListIncompleteUploads: %v", u.Err)
		}
		n++
	}
	return n
}

// crashObject is what a raw listing says of one object: its key, and the
// ETag, stored sha-256, size and time of the version it lists.
type crashObject struct {
	key, etag, sha256 string
	size              int64
	modified          time.Time
}

// audit lists the bucket raw (every key must be one the source's URIs map
// to, or a hashed key's URI object; nothing outside the prefix), then
// walks the sink's own Inventory (s3.New + Walk) and reads through it (Get)
// every object version no earlier audit of this bucket read. The raw and
// Inventory views must agree on the set of URIs, and each object's bytes
// must match the digests the raw listing shows for it: its ETag (the MD5
// MinIO computed of a single PUT's bytes) and the sha-256 the sink stored
// in its metadata. It returns URI → digests.
//
// A request the child had sent whole before it was killed may still be
// completing in MinIO while the audit reads: a disagreement between the
// views is looked at again, a few times, before it fails the test.
func (sk *s3CrashSink) audit(t *testing.T) map[string]crashSums {
	t.Helper()
	const attempts = 6
	for attempt := 1; ; attempt++ {
		got, err := sk.auditOnce(t)
		if err == nil {
			if attempt > 1 {
				t.Logf("bucket %s settled after %d audits: %d objects", sk.bucket, attempt, len(got))
			}
			return got
		}
		if attempt == attempts {
			t.Fatalf("bucket %s, after %d audits: %v", sk.bucket, attempt, err)
		}
		t.Logf("bucket %s, audit %d: %v; looking again", sk.bucket, attempt, err)
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// auditOnce is one look of audit. It fails t on what cannot be the work of
// a request still completing (a foreign key, a URI held twice), and
// returns the other disagreements as an error.
func (sk *s3CrashSink) auditOnce(t *testing.T) (map[string]crashSums, error) {
	t.Helper()
	ctx := t.Context()
	raw := map[string]crashObject{}
	for obj := range sk.tg.minio.Client().ListObjects(ctx, sk.bucket, minio.ListObjectsOptions{Recursive: true, WithMetadata: true}) {
		if obj.Err != nil {
			t.Fatalf("listing bucket %s: %v", sk.bucket, obj.Err)
		}
		uri, ok := sk.tg.keys[obj.Key]
		switch {
		case path.Base(obj.Key) == "!rsharvest-sink":
			continue // the sink's marker (see sink/s3's package documentation)
		case !ok:
			t.Fatalf("bucket %s: key %q is not the key of any URI of the source", sk.bucket, obj.Key)
		case uri == "":
			continue // the URI object of a hashed key
		}
		if prev, dup := raw[uri]; dup {
			t.Fatalf("bucket %s: %s is held twice, at %q and %q", sk.bucket, uri, prev.key, obj.Key)
		}
		o := crashObject{key: obj.Key, etag: strings.Trim(obj.ETag, `"`), size: obj.Size, modified: obj.LastModified}
		for k, v := range obj.UserMetadata {
			if strings.EqualFold(strings.TrimPrefix(strings.ToLower(k), "x-amz-meta-"), "rsharvest-sha256") {
				o.sha256 = v
			}
		}
		raw[uri] = o
	}
	// The sink's view.
	s, err := s3.New(ctx, sk.tg.s3Options(sk.bucket))
	if err != nil {
		t.Fatalf("s3.New after a kill: %v", err)
	}
	defer s.Close(ctx)
	var uris []string
	if err := s.Walk(ctx, func(uri string) error { uris = append(uris, uri); return nil }); err != nil {
		t.Fatal(err)
	}
	viaSink := make(map[string]crashSums, len(uris))
	if sk.verified == nil {
		sk.verified = map[crashObject]crashSums{}
	}
	// The versions read before are not read again; the others are, with a
	// few requests in flight.
	var walkedTwice, read []string
	for _, uri := range uris {
		if _, dup := viaSink[uri]; dup {
			walkedTwice = append(walkedTwice, uri)
			continue
		}
		viaSink[uri] = crashSums{}
		if o, ok := raw[uri]; ok {
			if sums, ok := sk.verified[o]; ok {
				viaSink[uri] = sums
				continue
			}
		}
		read = append(read, uri)
	}
	if len(walkedTwice) > 0 {
		t.Fatalf("the sink's Walk reports %q twice", walkedTwice)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, uri := range read {
		g.Go(func() error {
			rc, err := s.Get(gctx, uri)
			if err != nil {
				return fmt.Errorf("Get %q: %w", uri, err)
			}
			defer rc.Close()
			sums, err := crashSumOf(rc)
			if err != nil {
				return fmt.Errorf("Get %q: %w", uri, err)
			}
			mu.Lock()
			defer mu.Unlock()
			viaSink[uri] = sums
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err // deleted meanwhile?
	}
	if len(raw) != len(viaSink) {
		return nil, fmt.Errorf("the sink's Inventory holds %d resources, its bucket %d objects", len(viaSink), len(raw))
	}
	for uri, o := range raw {
		got, ok := viaSink[uri]
		switch {
		case !ok:
			return nil, fmt.Errorf("the sink's Inventory lacks %s, which is in its bucket at %q", uri, o.key)
		case o.sha256 != got.sha256:
			return nil, fmt.Errorf("object %q: metadata sha-256 %q, its bytes %s (half-written?)", o.key, o.sha256, got.sha256)
		case !strings.Contains(o.etag, "-") && o.etag != got.md5:
			return nil, fmt.Errorf("object %q: ETag %s, the MD5 of its bytes %s (half-written?)", o.key, o.etag, got.md5)
		}
	}
	for uri, o := range raw {
		sk.verified[o] = viaSink[uri]
	}
	return viaSink, nil
}

// crashChildResult is how a child ended.
type crashChildResult struct {
	killed  bool // by our SIGKILL
	code    int  // exit code when not killed
	elapsed time.Duration
	output  string
}

// syncChild runs "rsharvest MODE" (baseline or sync) and kills it with
// SIGKILL after killAfter (never, when killAfter < 0). The child has at most
// two minutes.
func (rg *crashRig) syncChild(t *testing.T, mode string, killAfter time.Duration) crashChildResult {
	t.Helper()
	rg.runs++
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rg.bin, mode, "--source", rg.source, "--sink", rg.sink.spec(),
		"--state", rg.db(), "--spool-dir", rg.spool(), "--progress", "none", "--log-level", "warn",
		"--concurrency", "2", "--workers", "2")
	cmd.Env = append(append(os.Environ(), "TMPDIR="+rg.tmp()), rg.sink.env()...)
	cmd.Dir = rg.work
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rg.bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	if killAfter >= 0 {
		timer := time.NewTimer(killAfter)
		select {
		case waitErr = <-done:
			timer.Stop()
		case <-timer.C:
			_ = cmd.Process.Kill() // SIGKILL
			waitErr = <-done
		}
	} else {
		waitErr = <-done
	}
	res := crashChildResult{elapsed: time.Since(start), output: out.String()}
	if ctx.Err() != nil {
		t.Fatalf("child run %d did not finish within its deadline\n%s", rg.runs, res.output)
	}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		res.code = ee.ExitCode()
	default:
		t.Fatalf("child run %d: %v", rg.runs, waitErr)
	}
	// ExitCode is -1 for a process ended by a signal: ours.
	res.killed = res.code == -1
	return res
}

// finishChild runs a child to its end and requires exit 0.
func (rg *crashRig) finishChild(t *testing.T, mode string) crashChildResult {
	t.Helper()
	res := rg.syncChild(t, mode, -1)
	if res.killed || res.code != ExitOK {
		t.Fatalf("run %d: exit %d (killed %v), want 0\n%s", rg.runs, res.code, res.killed, res.output)
	}
	return res
}

var crashDigits = regexp.MustCompile(`[0-9]+`)

// crashLeftovers counts what killed children left outside the sink's
// content: partial writes in the sink (see crashSink.partial), spool files
// and files in the child's TMPDIR. It also checks that nothing but the
// rig's own entries exists in its directory.
type crashLeftovers struct {
	sinkTmp, spool, tmp int
	names               []string // of the spool and TMPDIR files, digits as "*"
}

func (rg *crashRig) leftovers(t *testing.T) crashLeftovers {
	t.Helper()
	ents, err := os.ReadDir(rg.work)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"mirror": true, "state.db": true, "state.db-wal": true, "state.db-shm": true,
		"state.db-journal": true, "state.db.lock": true, "spool": true, "tmp": true}
	for _, e := range ents {
		if !known[e.Name()] {
			t.Errorf("unexpected %q next to the mirror and the state store", e.Name())
		}
	}
	var lo crashLeftovers
	count := func(dir string) int {
		es, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range es {
			lo.names = append(lo.names, crashDigits.ReplaceAllString(e.Name(), "*"))
		}
		return len(es)
	}
	lo.sinkTmp = rg.sink.partial(t)
	lo.spool = count(rg.spool())
	lo.tmp = count(rg.tmp())
	return lo
}

// audit lists the mirror raw, every regular file under it but the
// sink's temporary directory (each must be at a path of the layout: nothing
// foreign, nothing half-named), then reads it through the sink's own
// Inventory (fs.New + Walk + Get). Both must agree. It returns URI → digests.
func (fk fsCrashSink) audit(t *testing.T) map[string]crashSums {
	t.Helper()
	raw := map[string]bool{}
	if _, err := os.Stat(fk.dir); errors.Is(err, iofs.ErrNotExist) {
		return map[string]crashSums{} // killed before the sink was opened
	}
	err := filepath.WalkDir(fk.dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(fk.dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			if rel == crashSinkTmpDir {
				return filepath.SkipDir
			}
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("mirror: %s is not a regular file (%v)", rel, d.Type())
		}
		uri, err := fs.Decode(rel)
		if err != nil {
			return fmt.Errorf("mirror: %s is not a path of the layout: %v", rel, err)
		}
		raw[uri] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The sink's view. fs.New removes the temporary files of a killed
	// process, exactly as the next child would.
	ctx := t.Context()
	sk, err := fs.New(fk.dir, fs.Options{})
	if err != nil {
		t.Fatalf("fs.New after a kill: %v", err)
	}
	defer sk.Close(ctx)
	viaSink := map[string]crashSums{}
	err = sk.Walk(ctx, func(uri string) error {
		rc, err := sk.Get(ctx, uri)
		if err != nil {
			return fmt.Errorf("Get %q: %w", uri, err)
		}
		defer rc.Close()
		s, err := crashSumOf(rc)
		viaSink[uri] = s
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != len(viaSink) {
		t.Fatalf("the sink's Inventory holds %d resources, its directory %d files", len(viaSink), len(raw))
	}
	for uri := range raw {
		if _, ok := viaSink[uri]; !ok {
			t.Fatalf("the sink's Inventory lacks %s, which is in its directory", uri)
		}
	}
	return viaSink
}

// crashResRow is the part of a state store resource row that must not depend on
// how often the harvester was interrupted: not run ids, times of recording,
// nor "written" versus "unchanged" (a resource delivered by a killed run is
// found unchanged by the next).
type crashResRow struct {
	Source, ResourceSet string
	Length              int64
	MD5, SHA1, SHA256   string
	Type                string
	Lastmod, Change     time.Time
	Package             string
	Outcome             string // "held", "deleted" or "failed"
	Deleted             bool
}

// crashCPRow is a checkpoint without its run id and time of recording.
type crashCPRow struct {
	Next, Baseline time.Time
	Open           bool
}

// crashStateSnap is a state store's content as far as it must be independent of
// interruptions.
type crashStateSnap struct {
	resources   map[string]crashResRow
	checkpoints map[string]crashCPRow // "source capability-list"
	deliveries  int                   // rows of partial deliveries (none with one sink)
	runs        map[string]int        // status → count
	changes     map[string]int        // change log: "uri change datetime package" → records
}

// snapState opens the state store as the next child would (state.Open must
// succeed: a kill never corrupts it), checks SQLite's integrity and reads it.
// full chooses SQLite's integrity_check over the faster quick_check.
func (rg *crashRig) snapState(t *testing.T, full bool) crashStateSnap {
	t.Helper()
	ctx := t.Context()
	snap := crashStateSnap{resources: map[string]crashResRow{}, checkpoints: map[string]crashCPRow{}, runs: map[string]int{}, changes: map[string]int{}}
	st, err := state.Open(ctx, rg.db())
	if err != nil {
		t.Fatalf("state.Open after run %d: %v", rg.runs, err)
	}
	err = st.WalkResources(ctx, "", func(r state.Resource) error {
		out := r.Outcome
		if out == state.OutcomeWritten || out == state.OutcomeUnchanged {
			out = "held"
		}
		snap.resources[r.URI] = crashResRow{Source: r.Source, ResourceSet: r.ResourceSet, Length: r.Length,
			MD5: hex.EncodeToString(r.Hashes.MD5), SHA1: hex.EncodeToString(r.Hashes.SHA1), SHA256: hex.EncodeToString(r.Hashes.SHA256),
			Type: r.Type, Lastmod: r.Lastmod, Change: r.ChangeTime, Package: r.Package, Outcome: out, Deleted: r.Deleted}
		return nil
	})
	if err == nil {
		var runs []state.Run
		runs, err = st.Runs(ctx, 0)
		for _, r := range runs {
			snap.runs[r.Status]++
		}
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("reading the state store after run %d: %v", rg.runs, err)
	}
	// Raw SQL: the integrity check, and every checkpoint (the Store has
	// no listing of them).
	db, err := sql.Open("sqlite", rg.db())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check := "quick_check"
	if full {
		check = "integrity_check"
	}
	var ok string
	if err := db.QueryRowContext(ctx, "PRAGMA "+check).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("state store %s after run %d: %q %v", check, rg.runs, ok, err)
	}
	rows, err := db.QueryContext(ctx, "SELECT source, resource_set, coalesce(next, ''), coalesce(baseline, ''), open FROM checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var src, cl, next, base string
		var open bool
		if err := rows.Scan(&src, &cl, &next, &base, &open); err != nil {
			t.Fatal(err)
		}
		snap.checkpoints[src+" "+cl] = crashCPRow{Next: crashStateTime(t, next), Baseline: crashStateTime(t, base), Open: open}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM deliveries").Scan(&snap.deliveries); err != nil {
		t.Fatal(err)
	}
	crows, err := db.QueryContext(ctx, "SELECT uri || ' ' || change || ' ' || coalesce(datetime, '') || ' ' || package FROM changes")
	if err != nil {
		t.Fatal(err)
	}
	defer crows.Close()
	for crows.Next() {
		var c string
		if err := crows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		snap.changes[c]++
	}
	if err := crows.Err(); err != nil {
		t.Fatal(err)
	}
	return snap
}

func crashStateTime(t *testing.T, s string) time.Time {
	t.Helper()
	if s == "" {
		return time.Time{}
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("state store time %q: %v", s, err)
	}
	return v.UTC()
}

// crashDiffSinks describes how got differs from want (at most a few lines).
func crashDiffSinks(got, want map[string]crashSums) string {
	var b strings.Builder
	n := 0
	for _, uri := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[uri]; !ok {
			fmt.Fprintf(&b, "\n  missing %s", uri)
			n++
		} else if g != want[uri] {
			fmt.Fprintf(&b, "\n  wrong body %s", uri)
			n++
		}
		if n == 5 {
			return b.String() + "\n  …"
		}
	}
	for _, uri := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[uri]; !ok {
			fmt.Fprintf(&b, "\n  unexpected %s", uri)
			if n++; n == 5 {
				return b.String() + "\n  …"
			}
		}
	}
	return b.String()
}

// crashDiffStates describes how got differs from want (at most a few lines).
func crashDiffStates(got, want crashStateSnap) string {
	var b strings.Builder
	n := 0
	line := func(format string, a ...any) bool {
		fmt.Fprintf(&b, "\n  "+format, a...)
		n++
		return n >= 6
	}
	for _, uri := range slices.Sorted(maps.Keys(want.resources)) {
		g, ok := got.resources[uri]
		if !ok && line("resource %s: missing", uri) {
			return b.String()
		}
		if ok && g != want.resources[uri] && line("resource %s:\n    got  %+v\n    want %+v", uri, g, want.resources[uri]) {
			return b.String()
		}
	}
	for _, uri := range slices.Sorted(maps.Keys(got.resources)) {
		if _, ok := want.resources[uri]; !ok && line("resource %s: unexpected %+v", uri, got.resources[uri]) {
			return b.String()
		}
	}
	if !maps.Equal(got.checkpoints, want.checkpoints) {
		line("checkpoints:\n    got  %+v\n    want %+v", got.checkpoints, want.checkpoints)
	}
	if got.deliveries != want.deliveries {
		line("%d partial deliveries recorded, want %d", got.deliveries, want.deliveries)
	}
	// The change log holds every change applied, none invented; how often
	// one is recorded may differ (a change re-applied after a kill).
	for _, c := range slices.Sorted(maps.Keys(want.changes)) {
		if got.changes[c] == 0 && line("change log: missing %s", c) {
			return b.String()
		}
	}
	for _, c := range slices.Sorted(maps.Keys(got.changes)) {
		if want.changes[c] == 0 && line("change log: unexpected %s", c) {
			return b.String()
		}
	}
	return b.String()
}

// crashKillDelay draws when to kill a child: uniformly in [0, 1.25×span×0.7^i]
// for the i-th kill in a row (0-based), as a run resumed after kills has
// less left to do than a whole run taking span. Some children end before
// their kill: the kills cover the whole run, its last moments included.
func crashKillDelay(r *rand.Rand, span time.Duration, i int) time.Duration {
	d := 1.25 * float64(span)
	for range i {
		d *= 0.7
	}
	return time.Duration(r.Int64N(int64(d) + 1))
}

// crashAdaptSpan follows how long a whole run takes on this machine, which may be
// busy: a first run in a row (a whole run) that ended by itself took
// res.elapsed; one killed at delay took longer than delay.
func crashAdaptSpan(span, delay time.Duration, res crashChildResult) time.Duration {
	switch {
	case !res.killed:
		return (span + res.elapsed) / 2
	case delay > span:
		return (span + delay) / 2
	}
	return span
}

// crashExtraChanges counts the change records of got beyond those of want.
func crashExtraChanges(got, want crashStateSnap) int {
	n := 0
	for c, k := range got.changes {
		n += max(0, k-want.changes[c])
	}
	return n
}
