package harvest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// What a job's sinks hold is the job's: the state records a source's
// resources, checkpoints and changes under a key, and the sinks that hold
// them (state.Store.Holders: those of its baselines, and those filled
// since from the others' copies). A harvest into sinks that share none
// with the holders of the source's key — a second site of the same
// source, or a sync of it into another mirror — is another identity in the
// state: its key is the source's with "#sinks-" and a digest of its sinks'
// names, so that its first harvest is a baseline into its sinks and its
// checkpoints are its own. A harvest into the holders and a sink more
// fills that sink, after it, from the copies the holders keep (Index).

// StateKey returns the key under which st records what j's sinks hold
// (see above), and j's sinks that the key's holders do not include when
// they include some (the sinks to fill from the others' copies).
func StateKey(ctx context.Context, st *state.Store, j Job) (key string, added []string, err error) {
	key = j.Key()
	names := RedactSpecs(j.Sinks)
	holders, err := st.Holders(ctx, key)
	if err != nil || len(holders) == 0 {
		return key, nil, err
	}
	if j.SourceKey == "" && !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(holders, n) }) {
		key = sinksKey(key, names)
		if holders, err = st.Holders(ctx, key); err != nil || len(holders) == 0 {
			return key, nil, err
		}
	}
	for i, n := range names {
		if !slices.Contains(holders, n) {
			added = append(added, j.Sinks[i])
		}
	}
	return key, added, nil
}

// sinksKey is the key of source key harvested into the sinks named names
// (see StateKey).
func sinksKey(key string, names []string) string {
	sum := sha256.Sum256([]byte(strings.Join(slices.Sorted(slices.Values(names)), "\n")))
	return key + "#sinks-" + hex.EncodeToString(sum[:4])
}

// recordHolders records, after a harvest of j that ended rep, the sinks
// that now hold what the state records: all of the job's after its first
// harvest; later, those added once filled from the others' copies by fill
// (a harvest writes to them only what changed), when it found every
// resource.
func (h *Harvester) recordHolders(ctx context.Context, j Job, added []string, rep *runreport.Report, fill func([]string) (IndexReport, error)) {
	if rep == nil || j.DryRun || (rep.Status != runreport.StatusOK && rep.Status != runreport.StatusPartial) {
		return
	}
	log := h.log().With("source", j.Source)
	if j.Site != "" {
		log = log.With("site", j.Site)
	}
	holders, err := h.Store.Holders(ctx, j.Key())
	if err != nil {
		log.Warn("the sinks holding the source's resources could not be read", "error", err)
		return
	}
	if len(holders) == 0 {
		if err := h.Store.AddHolders(ctx, j.Key(), RedactSpecs(j.Sinks)); err != nil {
			log.Warn("the sinks holding the source's resources could not be recorded", "error", err)
		}
		return
	}
	// A holder this harvest left out has not had what changed: given back
	// to the job, it is a sink added, filled again.
	names := RedactSpecs(j.Sinks)
	if left := slices.DeleteFunc(slices.Clone(holders), func(n string) bool { return slices.Contains(names, n) }); len(left) > 0 {
		if err := h.Store.RemoveHolders(ctx, j.Key(), left); err != nil {
			log.Warn("the sinks left out of the harvest could not be recorded as such", "sinks", left, "error", err)
		} else {
			log.Info("sinks left out of this harvest no longer count as holding the source; given back, they are filled again", "sinks", left)
		}
	}
	if len(added) == 0 {
		return
	}
	ir, err := fill(added)
	switch {
	case err != nil:
		log.Warn("the sinks added could not be filled from the copies held", "sinks", RedactSpecs(added), "error", err)
	case ir.Missing > 0:
		log.Warn("the sinks added lack what no other sink holds a copy of: the next baseline or audit --repair fetches it",
			"sinks", RedactSpecs(added), "written", ir.Written, "missing", ir.Missing)
	default:
		log.Info("sinks added filled from the copies held", "sinks", RedactSpecs(added), "written", ir.Written)
		if err := h.Store.AddHolders(ctx, j.Key(), RedactSpecs(added)); err != nil {
			log.Warn("the sinks holding the source's resources could not be recorded", "error", err)
		}
	}
}
