package fetch

import (
	"context"
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
	return c.download(ctx, url, dst, want, progress, Validators{})
}
