package daemon

import (
	"context"
	"log/slog"
)

// riverLog is the logger River writes to: log, with River's records below
// warnings passed on as debug ones — its job counts every few seconds and
// its migration steps are not the operator's news — and its warnings and
// errors as they are.
func riverLog(log *slog.Logger) *slog.Logger {
	return slog.New(quieter{log.Handler()}).With("component", "river")
}

// quieter passes records on with every level below warning lowered to
// debug.
type quieter struct{ h slog.Handler }

var _ slog.Handler = quieter{}

func lower(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (q quieter) Enabled(ctx context.Context, l slog.Level) bool {
	return q.h.Enabled(ctx, lower(l))
}

func (q quieter) Handle(ctx context.Context, r slog.Record) error {
	r.Level = lower(r.Level)
	return q.h.Handle(ctx, r)
}

func (q quieter) WithAttrs(as []slog.Attr) slog.Handler { return quieter{q.h.WithAttrs(as)} }

func (q quieter) WithGroup(name string) slog.Handler { return quieter{q.h.WithGroup(name)} }
