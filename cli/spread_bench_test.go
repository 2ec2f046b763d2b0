package cli

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/sink/s3/s3test"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// BenchmarkSpread measures one source's harvest spread over 1, 2 and 4
// worker processes (issue 32, item 7): daemons sharing a registry kept in
// one PostgreSQL (Debian's, started here) and writing to one MinIO, each
// executing one unit at a time at --concurrency 1, against a generated
// source of 64 packages served with a per-connection throttle, so that
// each connection, not the 2 cores, limits. It reports the time of each
// and the speed-ups; checks that the state and the bucket each leaves are
// those of one process harvesting the same source (every object's
// sha-256; resources and changes equal but for their stamps); does the
// same with 4 workers while a random worker is killed with SIGKILL 5 times
// (and another started in its place); and harvests an OAI-PMH repository
// with a latency per response with 1, 2 and 4 workers. Run it once:
//
//	go test -run XXX -bench Spread -benchtime 1x -timeout 30m -v ./cli/
func BenchmarkSpread(b *testing.B) {
	const (
		packages    = 64
		perPackage  = 16
		size        = 16 << 10  // bytes per resource: 256 KiB a package
		perConn     = 512 << 10 // bytes per second per connection
		oaiRecords  = 8000
		oaiPage     = 50
		oaiLatency  = 100 * time.Millisecond
		killsPerRun = 5
		killEvery   = 1200 * time.Millisecond
	)
	ctx := b.Context()
	bin := crashBuildBinary(b)
	pgServer := startPostgres(b)
	mio := s3test.ForTest(b, s3test.Options{Memory: true})
	bucket, err := mio.NewBucket(ctx)
	if err != nil {
		b.Fatal(err)
	}
	creds := []string{"AWS_ACCESS_KEY_ID=" + s3test.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3test.SecretKey, "AWS_SESSION_TOKEN="}
	env := append(os.Environ(), creds...)
	sinkOf := func(prefix string) string {
		return "s3://" + bucket + "/" + prefix + "?endpoint=" + mio.Endpoint() + "&secure=false"
	}
	rsh := func(args ...string) {
		b.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("rsharvest %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// The source: 64 packages of 256 KiB, each response at 512 KiB/s.
	dir := b.TempDir()
	gen, err := bench.Generate(ctx, bench.GenOptions{Dir: dir, Resources: packages * perPackage, Packages: packages, MeanSize: size,
		SizeDist: bench.Fixed, CompressibleShare: -1, NoOddNames: true})
	if err != nil {
		b.Fatal(err)
	}
	h := bench.NewHandler(dir, bench.ServeOptions{Wrap: harness.ConnWrap(perConn)})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	source := srv.URL + "/.well-known/resourcesync"
	b.Logf("source: %d packages, %d resources, %d package bytes, %d KiB/s per connection", gen.Packages, gen.Resources, gen.PackageBytes, perConn>>10)

	// One process, the reference.
	refState := filepath.Join(b.TempDir(), "ref.db")
	began := time.Now()
	rsh("sync", "--source", source, "--sink", sinkOf("ref"), "--state", refState, "--concurrency", "8", "--progress", "none")
	b.Logf("one process (sync --concurrency 8): %v", time.Since(began).Round(10*time.Millisecond))
	want := harvested(b, refState, source, mio.Client(), bucket, "ref")

	// A site spread over n daemons, killing some as it goes.
	spread := func(name, src, protocol string, n, kills int) (time.Duration, string) {
		b.Helper()
		db := pgDatabase(b, pgServer, name)
		var procs []*daemonProc
		startOne := func() {
			procs = append(procs, startDaemon(b, ctx, bin, creds, "--state", db, "--tick", "200ms", "--units", "1", "--sites-concurrency", "1",
				"--rescue-after", "2s", "--listen", "", "--log-level", "warn"))
		}
		defer func() {
			for _, p := range procs {
				p.stop()
			}
		}()
		var alive []int // the indexes in procs of the daemons alive
		for range n {
			startOne()
			alive = append(alive, len(procs)-1)
		}
		// Timed from when the site is added, every daemon alive and the
		// schedule running: River's leader starts its periodic jobs about
		// 2 s after it is elected, once when the daemons start, a delay
		// that is not the harvest's.
		for deadline := time.Now().Add(time.Minute); workersAlive(b, db) < n || !scheduleRan(b, db); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%s: %d daemons not all alive, or no schedule run, after a minute", name, n)
			}
		}
		// The site's status is read through one store, opened once, as a
		// status page reads it: not a store opened every poll.
		st, err := state.Open(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		status := func() string {
			s, err := site.Registry{Store: st}.Site(ctx, name)
			if err != nil {
				return ""
			}
			return s.LastStatus
		}
		began := time.Now()
		rsh("sites", "add", name, "--source", src, "--protocol", protocol, "--sink", sinkOf(name), "--concurrency", "1", "--every", "1d", "--spread", "--state", db)
		rnd := rand.New(rand.NewPCG(uint64(n), uint64(kills)))
		next := began.Add(killEvery)
		for deadline := began.Add(10 * time.Minute); status() != "ok"; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%s: not harvested in 10 minutes", name)
			}
			if kills > 0 && time.Now().After(next) {
				i := alive[rnd.IntN(len(alive))] // one of the n alive
				procs[i].kill()
				alive = slices.DeleteFunc(alive, func(j int) bool { return j == i })
				startOne()
				alive = append(alive, len(procs)-1)
				kills--
				next = time.Now().Add(killEvery)
			}
		}
		took := time.Since(began)
		if kills > 0 {
			b.Errorf("%s: harvested before all kills were made (%d left)", name, kills)
		}
		units, mean, busy, first, last := unitRuns(b, db)
		b.Logf("%s: %d unit runs, %v each on average, the workers busy with units %.0f%% of the time; the first unit began %v after the site was added, the last ended %v before the harvest was seen ended",
			name, units, mean.Round(time.Millisecond), 100*busy.Seconds()/(float64(n)*took.Seconds()), first.Sub(began).Round(time.Millisecond), began.Add(took).Sub(last).Round(time.Millisecond))
		return took, db
	}

	var t1 time.Duration
	for _, n := range []int{1, 2, 4} {
		name := fmt.Sprintf("dump%d", n)
		took, db := spread(name, source, "resourcesync", n, 0)
		if n == 1 {
			t1 = took
		}
		b.Logf("%d worker(s): %v, speed-up %.2f (target %.1f)", n, took.Round(10*time.Millisecond), t1.Seconds()/took.Seconds(), 0.8*float64(n))
		b.ReportMetric(took.Seconds(), fmt.Sprintf("s/%d-workers", n))
		if n > 1 {
			b.ReportMetric(t1.Seconds()/took.Seconds(), fmt.Sprintf("speedup-%d", n))
		}
		sameHarvest(b, name, want, harvested(b, db, source, mio.Client(), bucket, name))
	}
	took, db := spread("killed", source, "resourcesync", 4, killsPerRun)
	b.Logf("4 workers, one killed with SIGKILL %d times: %v", killsPerRun, took.Round(10*time.Millisecond))
	sameHarvest(b, "killed", want, harvested(b, db, source, mio.Client(), bucket, "killed"))

	// The OAI-PMH repository, a latency per response.
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: oaiRecords, PageSize: oaiPage})
	oai := httptest.NewServer(harness.Wrap(0, oaiLatency)(repo))
	defer oai.Close()
	var o1 time.Duration
	for _, n := range []int{1, 2, 4} {
		name := fmt.Sprintf("oai%d", n)
		took, db := spread(name, oai.URL+"/oai", "oai-pmh", n, 0)
		if n == 1 {
			o1 = took
		}
		b.Logf("OAI-PMH, %d worker(s): %v, speed-up %.2f", n, took.Round(10*time.Millisecond), o1.Seconds()/took.Seconds())
		b.ReportMetric(took.Seconds(), fmt.Sprintf("oai-s/%d-workers", n))
		if n > 1 {
			b.ReportMetric(o1.Seconds()/took.Seconds(), fmt.Sprintf("oai-speedup-%d", n))
		}
		if got := harvested(b, db, oai.URL+"/oai", mio.Client(), bucket, name); len(got.objects) != oaiRecords {
			b.Errorf("%s: %d objects, want %d", name, len(got.objects), oaiRecords)
		}
	}
}

// unitRuns reads the runs of units from the state at db (but those a
// killed worker left): how many, their mean time, and their total time.
func unitRuns(b *testing.B, db string) (n int, mean, total time.Duration, first, last time.Time) {
	b.Helper()
	st, err := state.Open(b.Context(), db)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(b.Context(), 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range runs {
		if r.Site == "" && !r.Finished.IsZero() && r.Status != state.StatusInterrupted {
			n++
			total += r.Finished.Sub(r.Started)
			if first.IsZero() || r.Started.Before(first) {
				first = r.Started
			}
			if r.Finished.After(last) {
				last = r.Finished
			}
		}
	}
	return n, total / time.Duration(max(n, 1)), total, first, last
}

// workersAlive counts the daemons alive on the registry at db (their
// worker leases).
func workersAlive(b *testing.B, db string) int {
	b.Helper()
	st, err := state.Open(b.Context(), db)
	if err != nil {
		return 0 // not made yet
	}
	defer st.Close()
	n, err := st.Workers(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// scheduleRan reports whether the daemons sharing the state at db have run
// their schedule job once (in the jobs schema "rsharvest", the default).
func scheduleRan(b *testing.B, db string) bool {
	b.Helper()
	conn, err := sql.Open("pgx", db)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	var n int
	err = conn.QueryRowContext(b.Context(), "SELECT count(*) FROM rsharvest.river_job WHERE kind = 'rsharvest_schedule' AND state = 'completed'").Scan(&n)
	return err == nil && n > 0 // no table yet: not yet
}

// leftBy is what a harvest left: the state's resources and changes (but
// for their stamps and runs) and the bucket's objects under a prefix (key
// below it → sha-256).
type leftBy struct {
	resources, changes map[string]int
	objects            map[string]string
}

// harvested reads what the harvest of source into the state at db and
// the bucket's prefix left.
func harvested(b *testing.B, db, source string, mc *minio.Client, bucket, prefix string) leftBy {
	b.Helper()
	ctx := b.Context()
	st, err := state.Open(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	h := leftBy{resources: map[string]int{}, changes: map[string]int{}, objects: map[string]string{}}
	err = st.WalkResources(ctx, source, func(r state.Resource) error {
		h.resources[fmt.Sprintf("%s %d %x %x %v", r.URI, r.Length, r.Hashes.SHA256, r.Hashes.MD5, r.Deleted)]++
		return nil
	})
	if err == nil {
		err = st.View(ctx, func(s *state.Snapshot) error {
			return s.WalkChanges(ctx, state.ChangeQuery{Source: source}, func(c state.ChangeRecord) error {
				h.changes[fmt.Sprintf("%s %s %d %x", c.URI, c.Change, c.Length, c.Hashes.SHA256)]++
				return nil
			})
		})
	}
	if err != nil {
		b.Fatal(err)
	}
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
		if o.Err != nil {
			b.Fatal(o.Err)
		}
		obj, err := mc.GetObject(ctx, bucket, o.Key, minio.GetObjectOptions{})
		if err != nil {
			b.Fatal(err)
		}
		sum := sha256.New()
		_, err = io.Copy(sum, obj)
		obj.Close()
		if err != nil {
			b.Fatal(err)
		}
		h.objects[strings.TrimPrefix(o.Key, prefix+"/")] = hex.EncodeToString(sum.Sum(nil))
	}
	return h
}

// sameHarvest checks that got left what want did.
func sameHarvest(b *testing.B, name string, want, got leftBy) {
	b.Helper()
	for _, c := range []struct {
		what      string
		got, want map[string]int
	}{{"resources", got.resources, want.resources}, {"changes", got.changes, want.changes}} {
		if d := diffCounts(c.got, c.want); d != "" {
			b.Errorf("%s: the %s differ from one process's: %s", name, c.what, d)
		}
	}
	if len(got.objects) != len(want.objects) {
		b.Errorf("%s: %d objects, one process's %d", name, len(got.objects), len(want.objects))
	}
	for k, sum := range want.objects {
		if got.objects[k] != sum {
			b.Errorf("%s: object %s: sha-256 %q, one process's %s", name, k, got.objects[k], sum)
			break
		}
	}
}

// diffCounts says how two multisets differ ("" when they do not).
func diffCounts(got, want map[string]int) string {
	var d []string
	for k, n := range want {
		if got[k] != n {
			d = append(d, fmt.Sprintf("%s: %d, want %d", k, got[k], n))
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s: %d, want none", k, n))
		}
	}
	if len(d) > 3 {
		d = append(d[:3], fmt.Sprintf("… %d in all", len(d)))
	}
	return strings.Join(d, "; ")
}
