package harness

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/unzip"
)

// necessaryWork measures the necessary-work limit: every core doing only
// what the job cannot avoid — receiving each package from the server,
// inflating every entry with this build's inflater (package unzip's:
// libdeflate, or klauspost/compress), hashing it as rsharvest checks it
// (the strongest digest the bench's manifests list, sha-256; with all,
// md5 too) and writing it to a file of its own — and nothing else: no
// spool, no state, no manifest, no package-level hash, no directories. A
// package is received whole into one of two buffers, allocated and touched
// before the clock starts (one package received while the other is
// unpacked).
func necessaryWork(ctx context.Context, url, workDir string, all bool, d Dump) (Row, error) {
	files, err := packageFiles(d)
	if err != nil {
		return Row{}, err
	}
	var largest int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return Row{}, err
		}
		largest = max(largest, fi.Size())
	}
	dir, err := os.MkdirTemp(workDir, "limit-")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	free := make(chan []byte, 2)
	for range cap(free) {
		b := make([]byte, largest+1) // +1: a longer body is noticed
		for i := range b {
			b[i] = 1 // resident before the clock starts
		}
		free <- b
	}
	type pkg struct {
		buf  []byte
		data []byte
	}
	type entry struct {
		f    *unzip.File
		name string
		left *atomic.Int64 // entries of its package not yet written
		buf  []byte        // its package's buffer, freed by the last
	}
	before := selfUsage()
	start := time.Now()
	pkgs := make(chan pkg, 1)
	entries := make(chan entry, 256)
	var downloaded atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(pkgs)
		for _, f := range files {
			var buf []byte
			select {
			case buf = <-free:
			case <-gctx.Done():
				return gctx.Err()
			}
			n, err := getInto(gctx, url+"packages/"+filepath.Base(f), buf)
			if err != nil {
				return err
			}
			downloaded.Add(int64(n))
			select {
			case pkgs <- pkg{buf, buf[:n]}:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error {
		defer close(entries)
		i := 0
		for p := range pkgs {
			a, err := unzip.Open(bytes.NewReader(p.data), int64(len(p.data)), unzip.Limits{})
			if err != nil {
				return err
			}
			names := a.Unreferenced()
			left := &atomic.Int64{}
			left.Store(int64(len(names)))
			for _, name := range names {
				f, err := a.Lookup(name)
				if err != nil {
					return err
				}
				i++
				select {
				case entries <- entry{f, strconv.Itoa(i), left, p.buf}:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
		}
		return nil
	})
	for range runtime.GOMAXPROCS(0) {
		g.Go(func() error {
			hs := []hash.Hash{sha256.New()}
			if all {
				hs = append(hs, md5.New())
			}
			var sum [sha256.Size]byte
			for e := range entries {
				if err := writeEntry(e.f, filepath.Join(dir, e.name), hs...); err != nil {
					return err
				}
				for _, h := range hs {
					h.Sum(sum[:0])
				}
				if e.left.Add(-1) == 0 {
					free <- e.buf // never blocks: two buffers, two places
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Row{}, err
	}
	elapsed := time.Since(start)
	after := selfUsage()
	row := measured(elapsed, after.cpu-before.cpu, after.maxRSS, downloaded.Load(), d)
	hashed := "sha-256"
	if all {
		hashed = "md5 + sha-256"
	}
	row.Note = fmt.Sprintf("%d goroutines: receive, inflate (%s), %s, write each file; nothing else", runtime.GOMAXPROCS(0), unzip.Inflater(), hashed)
	return row, nil
}

// getInto GETs url into buf, which must be large enough, and returns its
// length.
func getInto(ctx context.Context, url string, buf []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	n, err := io.ReadFull(resp.Body, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	} else if err == nil {
		return 0, fmt.Errorf("GET %s: longer than the package file", url)
	}
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	return n, nil
}

// writeEntry inflates f into the file path and the hashes.
func writeEntry(f *unzip.File, path string, hs ...hash.Hash) error {
	for _, h := range hs {
		h.Reset()
	}
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	defer rc.Close()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	ws := []io.Writer{out}
	for _, h := range hs {
		ws = append(ws, h)
	}
	// Through a buffer, as the fs sink copies: the entry's reader does not
	// write to the file itself (its WriteTo), so that the profile of
	// --stages tells reading the package from writing the file.
	if _, err := io.Copy(io.MultiWriter(ws...), struct{ io.Reader }{rc}); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	return out.Close()
}

// naiveScript fetches, unpacks and hashes one package as rsharvest checks
// it by default (sha-256, the strongest digest the bench's manifests
// list): $1 the URL, $2 the ZIP file, $3 the directory to unpack into.
const naiveScript = `curl -sf -o "$2" "$1" && unzip -q -o "$2" -d "$3" && cd "$3" &&
find . -type f ! -name manifest.xml -print0 | xargs -0 sha256sum >/dev/null`

// naive runs naiveScript over every package, one at a time, from the
// server at url.
func naive(ctx context.Context, url, workDir string, d Dump) (Row, error) {
	for _, tool := range []string{"sh", "curl", "unzip", "sha256sum", "xargs", "find"} {
		if _, err := exec.LookPath(tool); err != nil {
			return Row{Skipped: true, Note: tool + " not found"}, nil
		}
	}
	files, err := packageFiles(d)
	if err != nil {
		return Row{}, err
	}
	dir, err := os.MkdirTemp(workDir, "naive-")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	var total usage
	var downloaded int64
	exact := true
	before := selfUsage()
	start := time.Now()
	for _, f := range files {
		name := filepath.Base(f)
		zipPath := filepath.Join(dir, name)
		u, ok, err := command(ctx, dir, "sh", "-c", naiveScript, "naive", url+"packages/"+name, zipPath,
			filepath.Join(dir, name+".d"))
		if err != nil {
			return Row{}, fmt.Errorf("package %s: %w", name, err)
		}
		total.cpu += u.cpu
		total.maxRSS = max(total.maxRSS, u.maxRSS)
		exact = exact && ok
		fi, err := os.Stat(zipPath)
		if err != nil {
			return Row{}, err
		}
		downloaded += fi.Size()
	}
	elapsed := time.Since(start)
	server := selfUsage().cpu - before.cpu
	row := measured(elapsed, total.cpu+server, total.maxRSS, downloaded, d)
	row.Note = "one package at a time via sh -c; CPU includes the loopback server's; " + rssNote(exact)
	return row, nil
}

// pythonJob runs the job written plainly in Python (bench.PythonJob: one
// process per package, as many at once as there are cores, each
// downloading its package, inflating, checking and writing every entry)
// against the server at url.
func pythonJob(ctx context.Context, url, workDir string, all bool, d Dump) (Row, error) {
	if _, err := exec.LookPath("python3"); err != nil {
		return Row{Skipped: true, Note: "python3 not found"}, nil
	}
	files, err := packageFiles(d)
	if err != nil {
		return Row{}, err
	}
	dir, err := os.MkdirTemp(workDir, "python-")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	verify := "strongest"
	if all {
		verify = "all"
	}
	args := []string{"-c", bench.PythonJob(), verify, url, filepath.Join(dir, "out")}
	for _, f := range files {
		args = append(args, filepath.Base(f))
	}
	before := selfUsage()
	start := time.Now()
	u, exact, err := command(ctx, dir, "python3", args...)
	if err != nil {
		return Row{}, err
	}
	elapsed := time.Since(start)
	server := selfUsage().cpu - before.cpu
	row := measured(elapsed, u.cpu+server, u.maxRSS, d.PackageBytes, d)
	row.Note = fmt.Sprintf("bench/pyjob.py %s: one process per package, %d at once; CPU includes the loopback server's; %s", verify, runtime.NumCPU(), rssNote(exact))
	return row, nil
}

// otherBuild runs another rsharvest binary's baseline against the server
// at url, at concurrency c, into a fresh directory: a row to compare this
// build with (the commit before a change, a build without libdeflate) in
// the same run.
func otherBuild(ctx context.Context, bin, url, workDir string, c int, d Dump) (Row, error) {
	dir, err := os.MkdirTemp(workDir, "other-")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	spool := filepath.Join(dir, "spool")
	if err := os.Mkdir(spool, 0o755); err != nil {
		return Row{}, err
	}
	before := selfUsage()
	start := time.Now()
	u, exact, err := command(ctx, dir, bin, "baseline", "--source", url, "--sink", "fs:"+filepath.Join(dir, "mirror"),
		"--state", filepath.Join(dir, "state.db"), "--spool-dir", spool, "--concurrency", strconv.Itoa(c),
		"--progress", "none", "--log-level", "warn")
	if err != nil {
		return Row{}, err
	}
	elapsed := time.Since(start)
	server := selfUsage().cpu - before.cpu
	row := measured(elapsed, u.cpu+server, u.maxRSS, d.PackageBytes, d)
	row.Name = fmt.Sprintf("%s -c %d", bin, c)
	row.Kind = KindCompare
	row.Concurrency = c
	row.Note = "another build's baseline command; CPU includes the loopback server's; " + rssNote(exact)
	return row, nil
}

// gnuTime is GNU time, which measures a command's peak RSS from a small
// process of its own.
const gnuTime = "/usr/bin/time"

// command runs a command to completion in dir and returns its resource
// usage (its own and that of the descendants it waited for). On Linux a
// process started directly by this one reports this one's peak RSS as a
// floor (the kernel records the old address space's peak at exec), so the
// peak RSS comes from GNU time when it is installed; without it the figure
// is only an upper bound, and exact is false.
func command(ctx context.Context, dir, name string, args ...string) (u usage, exact bool, err error) {
	rssFile := ""
	if _, err := os.Stat(gnuTime); err == nil {
		f, err := os.CreateTemp(dir, "rss-")
		if err != nil {
			return usage{}, false, err
		}
		f.Close()
		defer os.Remove(f.Name())
		rssFile = f.Name()
		args = append([]string{"-f", "%M", "-o", rssFile, name}, args...)
		name = gnuTime
	}
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := string(out)
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return usage{}, false, fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return usage{}, false, errors.New("no resource usage for " + name)
	}
	u = usage{
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		maxRSS: ru.Maxrss * 1024,
	}
	if rssFile == "" {
		return u, false, nil
	}
	b, err := os.ReadFile(rssFile)
	if err != nil {
		return usage{}, false, err
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return usage{}, false, fmt.Errorf("%s output %q: %w", gnuTime, b, err)
	}
	u.maxRSS = kb * 1024
	return u, true, nil
}

// rssNote is the note on an external command's peak RSS.
func rssNote(exact bool) string {
	if exact {
		return "peak RSS by " + gnuTime
	}
	return "peak RSS is an upper bound (includes this process's, " + gnuTime + " not found)"
}
