package fetch

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rsharvest/rsharvest/fixity"
)

// Progress is told, while DownloadProgress writes dst, how many bytes dst
// holds from offset 0: after every write, and 0 whenever dst is truncated
// to begin the transfer again (the representation changed under it, see
// Download), so bytes read from dst earlier may since have been replaced.
// It is called on the downloading goroutine and must return quickly,
// without blocking.
type Progress func(written int64)

// DownloadProgress is Download, telling progress (when not nil) how far dst
// is written, so that another goroutine can read dst while it downloads.
// The bytes progress reports have been written to dst but are not yet
// verified: the length and hashes are checked only when the download ends.
func (c *Client) DownloadProgress(ctx context.Context, url string, dst *os.File, want fixity.Expect, progress Progress) (Result, error) {
	return c.download(ctx, url, dst, fileDest{dst}, want, progress, Validators{})
}

// Destination is what DownloadTo hands a representation to, in order from
// its first byte.
type Destination interface {
	// Write takes the next bytes, in order. They are not verified yet:
	// the length and hashes are checked only when the download ends. An
	// error of Write ends the download: it is returned as a fatal error,
	// or as ctx's error when the download's ctx has ended.
	Write(p []byte) (int, error)
	// Restart is called before each pass of the download, the first
	// included: the bytes written before it are void, and the next Write
	// begins again at byte 0 (the representation changed under the
	// download, or did not match what it was expected to be). An error of
	// Restart ends the download as a fatal error.
	Restart() error
}

// DownloadTo is DownloadProgress handing the bytes to dst as they arrive
// rather than writing them to a file: the same retries, resumes, restarts
// (dst.Restart) and checks, in one pass. It never downloads in Range parts
// (see InParts). The Result's Bytes is what dst was last given from byte 0.
func (c *Client) DownloadTo(ctx context.Context, url string, dst Destination, want fixity.Expect, progress Progress) (Result, error) {
	return c.download(ctx, url, nil, dst, want, progress, Validators{})
}

// InParts reports whether Download fetches a large representation in
// parallel Range parts (Options.RangeParts above 1), which DownloadTo
// never does.
func (c *Client) InParts() bool { return c.opts.RangeParts > 1 }

// fileDest is a file as a Destination: written from offset 0, truncated at
// a restart.
type fileDest struct{ f *os.File }

var _ Destination = fileDest{}

func (d fileDest) Write(p []byte) (int, error) {
	n, err := d.f.Write(p)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", d.f.Name(), err)
	}
	return n, nil
}

func (d fileDest) Restart() error {
	if err := d.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate %s: %w", d.f.Name(), err)
	}
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("seek %s: %w", d.f.Name(), err)
	}
	return nil
}
