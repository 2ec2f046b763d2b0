package harness

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zip"
	"golang.org/x/sync/errgroup"
)

// manifestName is the package manifest, which is not a resource.
const manifestName = "manifest.xml"

// machineLimit reads, inflates and hashes (md5 and sha-256) every entry of
// the local package files on GOMAXPROCS goroutines, doing nothing else.
func machineLimit(ctx context.Context, d Dump) (Row, error) {
	files, err := packageFiles(d)
	if err != nil {
		return Row{}, err
	}
	type job struct {
		pkg   int
		entry int
	}
	readers := make([]*zip.ReadCloser, len(files))
	defer func() {
		for _, r := range readers {
			if r != nil {
				r.Close()
			}
		}
	}()
	var jobs []job
	for i, f := range files {
		if readers[i], err = zip.OpenReader(f); err != nil {
			return Row{}, fmt.Errorf("%s: %w", f, err)
		}
		for k, e := range readers[i].File {
			if e.Name != manifestName {
				jobs = append(jobs, job{i, k})
			}
		}
	}
	before := selfUsage()
	start := time.Now()
	ch := make(chan job)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(ch)
		for _, j := range jobs {
			select {
			case ch <- j:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range runtime.GOMAXPROCS(0) {
		g.Go(func() error {
			buf := make([]byte, 256<<10)
			m, s := md5.New(), sha256.New()
			w := io.MultiWriter(m, s)
			for j := range ch {
				if err := hashEntry(readers[j.pkg].File[j.entry], w, buf, m, s); err != nil {
					return err
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
	row := measured(elapsed, after.cpu-before.cpu, after.maxRSS, 0, d)
	row.Note = fmt.Sprintf("%d goroutines inflating and hashing local packages", runtime.GOMAXPROCS(0))
	return row, nil
}

// hashEntry inflates one entry into both hashes.
func hashEntry(f *zip.File, w io.Writer, buf []byte, hs ...hash.Hash) error {
	for _, h := range hs {
		h.Reset()
	}
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	defer rc.Close()
	if _, err := io.CopyBuffer(w, rc, buf); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	for _, h := range hs {
		h.Sum(buf[:0])
	}
	return nil
}

// naiveScript fetches, unpacks and hashes one package, as bench/baseline.sh
// does: $1 the URL, $2 the ZIP file, $3 the directory to unpack into.
const naiveScript = `curl -sf -o "$2" "$1" && unzip -q -o "$2" -d "$3" && cd "$3" &&
find . -type f ! -name manifest.xml -print0 | xargs -0 md5sum >/dev/null &&
find . -type f ! -name manifest.xml -print0 | xargs -0 sha256sum >/dev/null`

// naive runs naiveScript over every package, one at a time, from the
// server at url.
func naive(ctx context.Context, url, workDir string, d Dump) (Row, error) {
	for _, tool := range []string{"sh", "curl", "unzip", "md5sum", "sha256sum", "xargs", "find"} {
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
	row := measured(time.Since(start), total.cpu, total.maxRSS, downloaded, d)
	row.Note = "one package at a time via sh -c; " + rssNote(exact)
	return row, nil
}

// pythonScript hashes (md5 and sha-256) every entry of the packages given
// as arguments.
const pythonScript = `import hashlib, sys, zipfile
for p in sys.argv[1:]:
    with zipfile.ZipFile(p) as z:
        for i in z.infolist():
            if i.filename == "manifest.xml":
                continue
            m, s = hashlib.md5(), hashlib.sha256()
            with z.open(i) as f:
                while True:
                    b = f.read(1 << 18)
                    if not b:
                        break
                    m.update(b)
                    s.update(b)
            m.hexdigest(); s.hexdigest()
`

// python hashes every entry of the local packages in one python3 process.
func python(ctx context.Context, workDir string, d Dump) (Row, error) {
	if _, err := exec.LookPath("python3"); err != nil {
		return Row{Skipped: true, Note: "python3 not found"}, nil
	}
	files, err := packageFiles(d)
	if err != nil {
		return Row{}, err
	}
	start := time.Now()
	u, exact, err := command(ctx, workDir, "python3", append([]string{"-c", pythonScript}, files...)...)
	if err != nil {
		return Row{}, err
	}
	row := measured(time.Since(start), u.cpu, u.maxRSS, 0, d)
	row.Note = "one process, local packages; " + rssNote(exact)
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
