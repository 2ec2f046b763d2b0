package pipeline

import (
	"context"
	"time"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// planner returns a ResourceSync planner for a walk to the want capability
// (or its list fallback), wired to this run: its documents are read by
// openDocument, a broken resource set is recorded (setBroken), snapshot
// datetimes are noted for checkpoints, and a skipped entry is a permanent
// failure of the run. The caller sets the emit functions.
func (r *run) planner(want, list manifest.Capability) *resourcesync.Planner {
	return &resourcesync.Planner{
		Open:            r.openDocument,
		Client:          r.opts.Client,
		MaxDocumentSize: r.opts.MaxDocumentSize,
		Log:             r.log,
		Set:             r.opts.Set,
		Want:            want,
		List:            list,
		PreferList:      r.opts.Prefer == "list",
		Broken:          r.setBroken,
		NoteAt:          r.noteAt,
		NoteSet:         r.noteSet,
		Invalid: func(ctx context.Context, uri, msg string, counted bool) {
			if counted {
				r.counts.Failed.Add(1)
			}
			r.fail(ctx, Failure{URI: uri, Stage: "document", Error: msg, Permanent: true}, time.Time{})
		},
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
