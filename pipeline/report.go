package pipeline

import (
	"sync"
	"sync/atomic"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/runreport"
)

// Counts are the live counters of a run. Every field is updated atomically,
// so a progress display may read them while the run goes on.
type Counts struct {
	PackagesTotal  atomic.Int64
	PackagesDone   atomic.Int64
	PackagesFailed atomic.Int64
	Written        atomic.Int64
	Deleted        atomic.Int64
	Unchanged      atomic.Int64
	Failed         atomic.Int64
	Skipped        atomic.Int64
	// Unverified counts the written resources that had no digest to check
	// (only their length and, in a package, CRC-32): a subset of Written.
	Unverified      atomic.Int64
	BytesDownloaded atomic.Int64
	BytesWritten    atomic.Int64

	// For a progress display: the declared lengths of the packages the run
	// will read (PackagesUnsized counts those whose length is not
	// declared: then the total is unknown), and the bytes of them received
	// so far, live, or skipped as held already.
	PackageBytesTotal atomic.Int64
	PackagesUnsized   atomic.Int64
	PackageBytesDone  atomic.Int64

	// Planned counts the resources the run has handed to its workers so
	// far (a list's records, a package's entries as its manifest is read);
	// PlanRead says every package and list has been read, so Planned is
	// the run's whole work.
	Planned  atomic.Int64
	PlanRead atomic.Bool

	// client is the run's HTTP client, whose bytes received Received reads.
	client atomic.Pointer[fetch.Client]
}

// Received is the body bytes the run has received so far: packages,
// resources, and the documents and pages that list them.
func (c *Counts) Received() int64 {
	n := c.BytesDownloaded.Load()
	if cl := c.client.Load(); cl != nil {
		n = max(n, cl.Stats().BytesDownloaded)
	}
	return n
}

// Done is how many resources the run has finished with, whatever the
// outcome: written, deleted, unchanged, failed or skipped.
func (c *Counts) Done() int64 {
	return c.Written.Load() + c.Deleted.Load() + c.Unchanged.Load() + c.Failed.Load() + c.Skipped.Load()
}

// notePackage counts a package the run will read in the display totals.
func (c *Counts) notePackage(length int64) {
	c.PackagesTotal.Add(1)
	if length >= 0 {
		c.PackageBytesTotal.Add(length)
	} else {
		c.PackagesUnsized.Add(1)
	}
}

// recorder collects failures and skips from many goroutines.
type recorder struct {
	mu        sync.Mutex
	failures  []runreport.Failure
	truncated int64
	skips     []runreport.Skip
	// docs and versions are what the run did to records with versions.
	docs     []runreport.Document
	versions [3]int64 // inserted, updated, held
}

// document records what the run did to a record with a version.
func (r *recorder) document(d runreport.Document) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch d.Outcome {
	case runreport.DocInserted:
		r.versions[0]++
	case runreport.DocUpdated:
		r.versions[1]++
	default:
		r.versions[2]++
	}
	if len(r.docs) < runreport.MaxReportedFailures {
		r.docs = append(r.docs, d)
	}
}

func (r *recorder) fail(f runreport.Failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) < runreport.MaxReportedFailures {
		r.failures = append(r.failures, f)
	} else {
		r.truncated++
	}
}

func (r *recorder) skip(s runreport.Skip) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.skips) < runreport.MaxReportedFailures {
		r.skips = append(r.skips, s)
	}
}

// fill copies the counters and lists into rep.
func (r *recorder) fill(rep *runreport.Report, c *Counts) {
	rep.Packages.Total = c.PackagesTotal.Load()
	rep.Packages.Done = c.PackagesDone.Load()
	rep.Packages.Failed = c.PackagesFailed.Load()
	rep.Resources.Written = c.Written.Load()
	rep.Resources.Deleted = c.Deleted.Load()
	rep.Resources.Unchanged = c.Unchanged.Load()
	rep.Resources.Failed = c.Failed.Load()
	rep.Resources.Skipped = c.Skipped.Load()
	rep.Resources.Unverified = c.Unverified.Load()
	rep.Bytes.Downloaded = c.BytesDownloaded.Load()
	rep.Bytes.Written = c.BytesWritten.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	rep.Failures = append([]runreport.Failure{}, r.failures...)
	rep.FailuresTruncated = r.truncated
	rep.Skips = append([]runreport.Skip(nil), r.skips...)
	rep.Documents = append([]runreport.Document(nil), r.docs...)
	rep.Versions.Inserted, rep.Versions.Updated, rep.Versions.Held = r.versions[0], r.versions[1], r.versions[2]
}
