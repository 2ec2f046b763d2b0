package harvest

import (
	"context"
	"time"

	"github.com/rsharvest/rsharvest/notify"
)

// DailyJob is the daemon's daily job, for the tests.
func (h *Harvester) DailyJob(ctx context.Context, rs *notify.Sender, now time.Time) error {
	return h.daily(ctx, rs, now)
}
