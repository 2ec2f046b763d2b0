package fetch

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of the low-speed cutoff (curl's --speed-limit and --speed-time).
const (
	DefaultLowSpeedLimit = 1024
	DefaultLowSpeedTime  = 60 * time.Second
)

// ErrTooSlow is wrapped by the temporary error of a response whose body
// arrived slower than Options.LowSpeedLimit for Options.LowSpeedTime: a
// server that trickles is cut off instead of holding a run forever. The
// transfer is not resumed; the item fails temporarily (its checkpoint held).
var ErrTooSlow = errors.New("response too slow")

// lowSpeed watches one response's speed over windows of its time spent
// waiting for bytes (time the caller spends between reads does not count):
// a window of LowSpeedTime that received fewer than LowSpeedLimit bytes a
// second ends the transfer.
type lowSpeed struct {
	limit  int64
	window time.Duration
	spent  time.Duration
	bytes  int64
}

// newLowSpeed returns the watch of one response; nil when the cutoff is
// off (a negative limit).
func (c *Client) newLowSpeed() *lowSpeed {
	if c.opts.LowSpeedLimit < 0 {
		return nil
	}
	return &lowSpeed{limit: c.opts.LowSpeedLimit, window: c.opts.LowSpeedTime}
}

// add counts n bytes received in a read that waited d, and returns an
// error wrapping ErrTooSlow when a window ends below the limit.
func (w *lowSpeed) add(n int, d time.Duration) error {
	if w == nil {
		return nil
	}
	w.spent += d
	w.bytes += int64(n)
	if w.spent < w.window {
		return nil
	}
	if float64(w.bytes) < float64(w.limit)*w.spent.Seconds() {
		return fmt.Errorf("%w: %d bytes in %v, under %d bytes a second (--low-speed-limit, --low-speed-time)",
			ErrTooSlow, w.bytes, w.spent.Round(time.Millisecond), w.limit)
	}
	w.spent, w.bytes = 0, 0
	return nil
}
