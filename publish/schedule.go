package publish

import (
	"context"
	"log/slog"
	"time"
)

// Schedule is when a publication is made again: the first time after t
// (in loc, for calendar schedules). site.Schedule is one.
type Schedule interface {
	Next(t time.Time, loc *time.Location) time.Time
}

// Every calls run at each of sched's times from now on, until ctx ends.
// A run that fails is logged and the published set stays as it was; the
// next time comes as scheduled.
func Every(ctx context.Context, sched Schedule, run func(context.Context) error, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	last := time.Now()
	for {
		next := sched.Next(last, time.Local)
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		last = next
		if err := run(ctx); err != nil {
			log.Error("publish failed; the published set is unchanged", "error", err)
		}
	}
}
