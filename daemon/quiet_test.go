package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRiverLog: River's info-level records are debug ones for the daemon's
// log (shown only at --log-level debug); its warnings pass as they are.
func TestRiverLog(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		log := riverLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))
		log.Info("Producer job counts", "running", 0)
		log.Warn("job failed")
		out := buf.String()
		if strings.Contains(out, "job counts") != (level == slog.LevelDebug) || !strings.Contains(out, "level=WARN") ||
			!strings.Contains(out, "component=river") {
			t.Errorf("at level %s:\n%s", level, out)
		}
	}
}
