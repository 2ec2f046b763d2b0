package harvest_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink/es/estest"
)

// TestIndexPassesOverBodilessIndex: a site harvested into a search
// index that keeps no bodies (es without store_body, the default) and an
// fs mirror; "index --sink fs:NEW" fills a new sink from the copies the
// site's other sinks hold. The es sink is an Inventory whose Get answers
// errors.ErrUnsupported ("the body is not stored"): that sink holds no
// copy to read, and Index must pass over it to the mirror — not end the
// whole run on the first resource.
func TestIndexPassesOverBodilessIndex(t *testing.T) {
	ctx := t.Context()
	srv, _ := source(t)
	es := estest.New(t)
	mirror, added := filepath.Join(t.TempDir(), "mirror"), filepath.Join(t.TempDir(), "added")
	st := openStore(t)
	h := &harvest.Harvester{Store: st, Sinks: harvest.SinkKinds(), Log: slog.New(slog.DiscardHandler)}
	j := harvest.DefaultJob()
	j.Source, j.Sinks = srv.URL, []string{"es:" + es.URL + "/corpus", "fs:" + mirror}
	if rep, err := h.Run(ctx, harvest.Baseline, j); err != nil || rep.Status != runreport.StatusOK {
		t.Fatalf("baseline: %v %+v", err, rep)
	}
	rep, err := h.Index(ctx, j, []string{"fs:" + added})
	if err != nil || rep.Held == 0 || rep.Written != rep.Held || rep.Missing != 0 {
		t.Errorf("index into a sink added: %+v, %v; want every held resource written from the mirror's copies", rep, err)
	}
}
