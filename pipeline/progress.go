package pipeline

import (
	"sync"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// progress orders a planner's marks (source.Mark) after the units emitted
// before them. Units are counted, per epoch, as they are emitted; a mark
// closes the open epoch. Once an epoch and every one before it have no
// unit left uncommitted, its marks are ready to record — unless a unit of
// the mark's resource set emitted before it failed temporarily (taint).
type progress struct {
	mu sync.Mutex
	// epochs are the epochs not yet done, oldest first; the last is open.
	epochs []*epoch
	next   int // the seq of the next epoch
	// taint is, by resource set (anySet: every set), the seq of the
	// earliest epoch holding a temporary failure: marks of that set from
	// that epoch on are dropped.
	taint map[string]int
}

// epoch is the units emitted between two marks, and the mark that ends
// it.
type epoch struct {
	seq     int
	pending int // units emitted and not committed
	marks   []source.Mark
}

// enter counts one unit emitted now (a Record, Failure or Document) and
// returns its epoch, for leave once it has committed.
func (p *progress) enter() *epoch {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.open()
	e.pending++
	return e
}

// mark closes the open epoch with m.
func (p *progress) mark(m source.Mark) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open().marks = append(p.open().marks, m)
	p.next++
	p.epochs = append(p.epochs, &epoch{seq: p.next})
}

// open returns the open epoch (p.mu held).
func (p *progress) open() *epoch {
	if len(p.epochs) == 0 {
		p.epochs = append(p.epochs, &epoch{seq: p.next})
	}
	return p.epochs[len(p.epochs)-1]
}

// fail notes a temporary failure of resource set set (anySet: unknown) of
// a unit of epoch e (nil: not known, so every mark of the set is
// dropped from now on).
func (p *progress) fail(e *epoch, set string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := 0
	if e != nil {
		seq = e.seq
	}
	if p.taint == nil {
		p.taint = map[string]int{}
	}
	if prev, ok := p.taint[set]; !ok || seq < prev {
		p.taint[set] = seq
	}
}

// leave notes that one unit of each of es has committed.
func (p *progress) leave(es []*epoch) {
	if len(es) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		e.pending--
	}
}

// ready returns the marks whose every earlier unit has committed, in the
// order they were emitted, each once, but those a temporary failure
// before them taints.
func (p *progress) ready() []source.Mark {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []source.Mark
	for len(p.epochs) > 1 && p.epochs[0].pending == 0 {
		e := p.epochs[0]
		for _, m := range e.marks {
			if t, ok := p.taint[m.ResourceSet]; ok && t <= e.seq {
				continue
			}
			if t, ok := p.taint[anySet]; ok && t <= e.seq {
				continue
			}
			out = append(out, m)
		}
		p.epochs = p.epochs[1:]
	}
	return out
}

// readyMarks returns what the state store records of the marks now ready.
func (r *run) readyMarks() []state.Progress {
	var out []state.Progress
	for _, m := range r.marks.ready() {
		out = append(out, state.Progress{Source: r.opts.SourceKey, ResourceSet: m.ResourceSet, Key: m.Key, Value: m.Value, RunID: r.runID})
	}
	return out
}

// holdings is the planner's read-only view of the state store.
type holdings struct {
	store Store
	key   string
}

var _ source.Holdings = holdings{}
