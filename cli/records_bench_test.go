package cli

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// BenchmarkRecords measures the cost of one record (issue 33): an
// OAI-PMH repository of 20,000 oai_dc records of about 400 bytes (served
// by "rsharvest serve --oai" in a process of its own, 100 records a page,
// with no added latency and with 20 ms per response) harvested into an fs
// sink with the state on the same machine (on /dev/shm when it is there,
// as tmpfs), by rsharvest ("sync", in a process of its own, as a user
// runs it: one file a record, and the packed layout) and by the same job
// written plainly — the yardsticks: in Go, in this process, and in Python
// (bench/oaijob.py, in a process of its own): ListRecords through its
// resumption tokens, one list at a time, each record's metadata written
// to a file of its own; each job's CPU time (user and system) is that of
// its process. Then the same with no added latency on the disk,
// each job's time including the writing out of its dirty pages. And a
// Resource List of 20,000 small resources and a harvest list (seed 004's
// document list) of 20,000 documents (served by "rsharvest serve", each
// harvested twice, the second measured: see syncWarm).
// Each job is measured in rounds (see rounds), each row the median of
// its rounds. It reports µs of CPU per record and records a second for
// each, and the ratios; for the OAI-PMH jobs also the server's CPU per record and, with
// no added latency, the most CPU per record rsharvest could use and still
// be 1.5× as fast as the plain job on this machine's cores (a bound set by
// the CPU that it and the server need). Run it once:
//
//	go test -run XXX -bench Records -benchtime 1x -v ./cli/
func BenchmarkRecords(b *testing.B) {
	const records = 20000
	bin := crashBuildBinary(b)
	work := b.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if work, err = os.MkdirTemp("/dev/shm", "rsharvest-records-"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(work)
	}
	for _, latency := range []time.Duration{0, 20 * time.Millisecond} {
		srv := serveProcess(b, bin, "serve", "--oai", "--oai-records", fmt.Sprint(records), "--oai-page-size", "100", "--latency", latency.String())
		base := srv.url
		name := fmt.Sprintf("oai-%dms", latency.Milliseconds())
		dir := filepath.Join(work, name)
		var ours, wide, packed, plain, py cost
		inRounds(b, func(round string) {
			ours.add(srv.served(b, func() cost { return syncOAI(b, bin, base, dir, "rsharvest"+round, records) }))
			wide.add(srv.served(b, func() cost { return syncOAI(b, bin, base, dir, "rsharvest-8"+round, records, "--concurrency", "8") }))
			packed.add(srv.served(b, func() cost { return syncOAI(b, bin, base, dir, "rsharvest-packed"+round, records, "?layout=packed") }))
			plain.add(srv.served(b, func() cost {
				return measure(b, records, func() { plainOAI(b, base, filepath.Join(dir, "plain"+round), records) })
			}))
			py.add(srv.served(b, func() cost { return pythonOAI(b, base, filepath.Join(dir, "python"+round), records) }))
			drop(b, dir)
		})
		b.Logf("OAI-PMH, %v per response: rsharvest %s; with --concurrency 8 %s; packed %s; the plain job %s; rsharvest %.2f× as fast (%.2f× with --concurrency 8, %.2f× packed), %.2f× the CPU per record",
			latency, ours, wide, packed, plain, plain.wall.Seconds()/ours.wall.Seconds(), plain.wall.Seconds()/wide.wall.Seconds(),
			plain.wall.Seconds()/packed.wall.Seconds(), ours.cpuPerRecord()/plain.cpuPerRecord())
		b.Logf("OAI-PMH, %v per response: the job in Python %s; rsharvest %.2f× as fast (%.2f× with --concurrency 8, %.2f× packed)",
			latency, py, py.wall.Seconds()/ours.wall.Seconds(), py.wall.Seconds()/wide.wall.Seconds(), py.wall.Seconds()/packed.wall.Seconds())
		b.ReportMetric(py.cpuPerRecord(), name+"-python-µs/record")
		b.ReportMetric(py.wall.Seconds()/ours.wall.Seconds(), name+"-speedup-python")
		b.ReportMetric(ours.cpuPerRecord(), name+"-µs/record")
		b.ReportMetric(ours.perSecond(), name+"-records/s")
		b.ReportMetric(packed.cpuPerRecord(), name+"-packed-µs/record")
		b.ReportMetric(plain.cpuPerRecord(), name+"-plain-µs/record")
		b.ReportMetric(plain.wall.Seconds()/ours.wall.Seconds(), name+"-speedup")
		b.ReportMetric(plain.wall.Seconds()/wide.wall.Seconds(), name+"-speedup-c8")
		b.ReportMetric(plain.wall.Seconds()/packed.wall.Seconds(), name+"-speedup-packed")
		if latency == 0 {
			// With nothing to wait for, a harvest is bound by the CPU
			// it and the server need: on n cores it takes at least
			// their sum over n. So rsharvest can be 1.5× the plain job
			// only with at most n·(the plain job's time)/1.5 less the
			// server's CPU, per record.
			n := runtime.NumCPU()
			need := (float64(n)*plain.wall.Seconds()/1.5 - ours.server.Seconds()) * 1e6 / float64(records)
			b.Logf("OAI-PMH, no added latency, the bound: on %d cores, with the server's %.0f µs of CPU per record, rsharvest is 1.5× the plain job only at %.0f µs of CPU per record or less; it uses %.0f, the plain job %.0f",
				n, float64(ours.server.Microseconds())/records, need, ours.cpuPerRecord(), plain.cpuPerRecord())
			b.ReportMetric(need, name+"-1.5x-needs-µs/record")
		}
		if latency != 0 {
			continue
		}
		// On the disk: the same with the sink and the state in a
		// directory of the disk, each job after the dirty pages of the one
		// before are written out (sync), its own included in its time.
		disk := filepath.Join(b.TempDir(), name)
		onDisk := func(job func() cost) cost {
			syscall.Sync()
			t0 := time.Now()
			c := job()
			syscall.Sync()
			c.wall = time.Since(t0)
			return c
		}
		ours, packed, plain = cost{}, cost{}, cost{}
		inRounds(b, func(round string) {
			ours.add(onDisk(func() cost { return syncOAI(b, bin, base, disk, "rsharvest"+round, records) }))
			packed.add(onDisk(func() cost { return syncOAI(b, bin, base, disk, "rsharvest-packed"+round, records, "?layout=packed") }))
			plain.add(onDisk(func() cost {
				return measure(b, records, func() { plainOAI(b, base, filepath.Join(disk, "plain"+round), records) })
			}))
			drop(b, disk)
		})
		b.Logf("OAI-PMH on the disk, written out: rsharvest %s; packed %s; the plain job %s; rsharvest %.2f× as fast, %.2f× packed",
			ours, packed, plain, plain.wall.Seconds()/ours.wall.Seconds(), plain.wall.Seconds()/packed.wall.Seconds())
		b.ReportMetric(plain.wall.Seconds()/ours.wall.Seconds(), name+"-disk-speedup")
		b.ReportMetric(plain.wall.Seconds()/packed.wall.Seconds(), name+"-disk-speedup-packed")
	}
	// A Resource List of small resources.
	src := filepath.Join(work, "list-source")
	if _, err := bench.Generate(b.Context(), bench.GenOptions{Dir: src, Resources: records, MeanSize: 400, SizeDist: bench.Fixed, WriteResources: true, NoOddNames: true}); err != nil {
		b.Fatal(err)
	}
	base := serveProcess(b, bin, "serve", "--dir", src).url
	ours := syncWarm(b, bin, filepath.Join(work, "list"), records, "--source", base, "--prefer", "list")
	b.Logf("Resource List of %d resources of 400 bytes: rsharvest %s", records, ours)
	b.ReportMetric(ours.cpuPerRecord(), "list-µs/record")
	b.ReportMetric(ours.perSecond(), "list-records/s")

	// A harvest list (seed 004's document list) of as many documents.
	src = filepath.Join(work, "harvestlist-source")
	if err := bench.GenerateHarvestList(b.Context(), bench.HarvestListOptions{Dir: src, Documents: records}); err != nil {
		b.Fatal(err)
	}
	base = serveProcess(b, bin, "serve", "--dir", src).url
	ours = syncWarm(b, bin, filepath.Join(work, "harvestlist"), records, "--source", base+"/harvestlist.xml", "--protocol", "harvest-list")
	b.Logf("harvest list of %d documents: rsharvest %s", records, ours)
	b.ReportMetric(ours.cpuPerRecord(), "harvestlist-µs/record")
	b.ReportMetric(ours.perSecond(), "harvestlist-records/s")
}

// syncWarm harvests a source served by "rsharvest serve --dir" twice with
// "rsharvest sync ARGS…", each time into a new fs sink and state under
// dir, and says what the second harvest cost: the server writes its copy
// of each XML document with its own address the first time it serves it
// (see bench.Handler), work of the server's that the first harvest waits
// for and the second does not.
func syncWarm(b *testing.B, bin, dir string, records int, args ...string) cost {
	b.Helper()
	harvest := func(round string) cost {
		sub := filepath.Join(dir, round)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		c := measureProcess(b, records, bin, append([]string{"sync", "--sink", "fs:" + filepath.Join(sub, "rsharvest"),
			"--state", filepath.Join(sub, "state.db"), "--progress", "none", "-q"}, args...)...)
		if n := countFiles(b, filepath.Join(sub, "rsharvest")); n != records {
			b.Fatalf("%s: rsharvest's mirror holds %d records, want %d", round, n, records)
		}
		return c
	}
	harvest("warm-up")
	drop(b, dir)
	var c cost
	inRounds(b, func(round string) {
		c.add(harvest("measured" + round))
		drop(b, dir)
	})
	return c
}

// drop removes what the jobs of a round wrote in dir, once measured, so
// that a round (and the jobs after it) start from the same empty file
// system: hundreds of thousands of files left behind slow the file
// system's work for the rest.
func drop(b *testing.B, dir string) {
	b.Helper()
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
}

// rounds is how many times BenchmarkRecords measures each job, round
// after round; each row is the median of its rounds (the machines are
// shared and noisy).
const rounds = 3

// inRounds calls measure once a round, with the round's name ("-1", …) to
// keep the rounds' mirrors apart.
func inRounds(b *testing.B, measure func(round string)) {
	b.Helper()
	for i := range rounds {
		measure(fmt.Sprintf("-%d", i+1))
	}
}

// add adds the cost of one round; the cost is then its rounds' median
// (wall time, CPU and the server's CPU each).
func (c *cost) add(r cost) {
	c.rounds = append(c.rounds, r)
	med := func(f func(cost) time.Duration) time.Duration {
		v := make([]time.Duration, len(c.rounds))
		for i, x := range c.rounds {
			v[i] = f(x)
		}
		slices.Sort(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	c.records = r.records
	c.wall = med(func(x cost) time.Duration { return x.wall })
	c.cpu = med(func(x cost) time.Duration { return x.cpu })
	c.server = med(func(x cost) time.Duration { return x.server })
}

// syncOAI harvests the OAI-PMH repository at base with "rsharvest sync"
// into the fs sink dir/sub, its state beside it, and says what that cost.
// An extra argument starting with "?" is the sink's options; the others
// are flags.
func syncOAI(b *testing.B, bin, base, dir, sub string, records int, extra ...string) cost {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	spec, packed := "fs:"+filepath.Join(dir, sub), false
	var flags []string
	for _, e := range extra {
		if strings.HasPrefix(e, "?") {
			spec, packed = spec+e, strings.Contains(e, "layout=packed")
			continue
		}
		flags = append(flags, e)
	}
	c := measureProcess(b, records, bin, append([]string{"sync", "--source", base, "--protocol", "oai-pmh", "--sink", spec,
		"--state", filepath.Join(dir, sub+".db"), "--progress", "none", "-q"}, flags...)...)
	n := 0
	if packed {
		n = len(heldPacked(b, filepath.Join(dir, sub)))
	} else {
		n = countFiles(b, filepath.Join(dir, sub))
	}
	if n != records {
		b.Fatalf("rsharvest's mirror %s holds %d records, want %d", sub, n, records)
	}
	return c
}

// serveProcess starts "rsharvest ARGS…" (a serve command) on a free
// loopback port, stopped when b ends, and returns the URL it serves at and
// the process.
func serveProcess(b *testing.B, bin string, args ...string) server {
	b.Helper()
	cmd := exec.Command(bin, append(args, "--listen", "127.0.0.1:0")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if strings.HasPrefix(f, "http://") {
				go func() { _, _ = io.Copy(io.Discard, out) }()
				return server{url: f, pid: cmd.Process.Pid}
			}
		}
	}
	b.Fatalf("rsharvest %s said no URL", strings.Join(args, " "))
	return server{}
}

// server is a serving process serveProcess started.
type server struct {
	url string
	pid int
}

// cpu returns the CPU time (user and system) the server has used so far,
// to the clock tick, from /proc.
func (s server) cpu(b *testing.B) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses:
	// utime and stime are the 12th and 13th, in ticks of 1/100 s (the
	// USER_HZ Linux shows every program).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat: %v", s.pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// served runs job, a harvest of s, and adds to its cost the CPU time the
// server spent meanwhile.
func (s server) served(b *testing.B, job func() cost) cost {
	b.Helper()
	before := s.cpu(b)
	c := job()
	c.server = s.cpu(b) - before
	return c
}

// cost is what a job cost: its wall time, its process's CPU time and, when
// measured (see server.served), the server's.
type cost struct {
	records           int
	wall, cpu, server time.Duration
	rounds            []cost // when measured in rounds (see add)
}

func (c cost) cpuPerRecord() float64 { return float64(c.cpu.Microseconds()) / float64(c.records) }
func (c cost) perSecond() float64    { return float64(c.records) / c.wall.Seconds() }
func (c cost) String() string {
	s := fmt.Sprintf("%v, %.0f records/s, %.0f µs of CPU per record", c.wall.Round(10*time.Millisecond), c.perSecond(), c.cpuPerRecord())
	if c.server > 0 {
		s += fmt.Sprintf(" (the server %.0f)", float64(c.server.Microseconds())/float64(c.records))
	}
	if len(c.rounds) > 1 {
		var each []string
		for _, r := range c.rounds {
			each = append(each, fmt.Sprintf("%.0f", r.cpuPerRecord()))
		}
		s += fmt.Sprintf(" [median of %d rounds; µs per record %s]", len(c.rounds), strings.Join(each, ", "))
	}
	return s
}

// measure runs job and says what it cost.
func measure(b *testing.B, records int, job func()) cost {
	b.Helper()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, t0 := cpu(), time.Now()
	job()
	return cost{records: records, wall: time.Since(t0), cpu: cpu() - c0}
}

// measureProcess runs "rsharvest ARGS…" (bin) in a process of its own,
// as a user runs it, and says what that cost: its wall time and the
// process's CPU time.
func measureProcess(b *testing.B, records int, bin string, args ...string) cost {
	b.Helper()
	c, _ := measureCommand(b, records, bin, args...)
	return c
}

// measureCommand runs the program prog with args in a process of its own
// and says what that cost, and what it wrote (standard output and error).
func measureCommand(b *testing.B, records int, prog string, args ...string) (cost, string) {
	b.Helper()
	cmd := exec.Command(prog, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %s: %v\n%s", filepath.Base(prog), strings.Join(args, " "), err, out.String())
	}
	return cost{records: records, wall: time.Since(t0), cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}, out.String()
}

// pythonOAI runs the same job written plainly in Python
// (bench.PythonOAIJob) into dir, in a process of its own, and says what
// that cost.
func pythonOAI(b *testing.B, base, dir string, want int) cost {
	b.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Fatal("no python3 for the job in Python:", err)
	}
	c, out := measureCommand(b, want, py, "-c", bench.PythonOAIJob(), base, dir)
	if n := strings.TrimSpace(out); n != strconv.Itoa(want) {
		b.Fatalf("the job in Python harvested %s records, want %d", n, want)
	}
	return c
}

// plainOAI is the yardstick: base's ListRecords (oai_dc) through its
// resumption tokens, one list at a time, each record's metadata written
// to a file of its own, named by its identifier's SHA-1, in dir.
func plainOAI(b *testing.B, base, dir string, want int) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	type record struct {
		ID       string `xml:"header>identifier"`
		Metadata struct {
			Inner []byte `xml:",innerxml"`
		} `xml:"metadata"`
	}
	n := 0
	q := url.Values{"verb": {"ListRecords"}, "metadataPrefix": {"oai_dc"}}
	for page := 0; page < 100000; page++ {
		resp, err := http.Get(base + "?" + q.Encode())
		if err != nil {
			b.Fatal(err)
		}
		dec := xml.NewDecoder(resp.Body)
		token := ""
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			se, ok := tok.(xml.StartElement)
			if !ok {
				continue
			}
			switch se.Name.Local {
			case "record":
				var r record
				if err := dec.DecodeElement(&r, &se); err != nil {
					b.Fatal(err)
				}
				sum := sha1.Sum([]byte(r.ID))
				if err := os.WriteFile(filepath.Join(dir, hex.EncodeToString(sum[:])), r.Metadata.Inner, 0o644); err != nil {
					b.Fatal(err)
				}
				n++
			case "resumptionToken":
				if err := dec.DecodeElement(&token, &se); err != nil {
					b.Fatal(err)
				}
			}
		}
		resp.Body.Close()
		if token == "" {
			break
		}
		q = url.Values{"verb": {"ListRecords"}, "resumptionToken": {token}}
	}
	if n != want {
		b.Fatalf("the plain job harvested %d records, want %d", n, want)
	}
}
