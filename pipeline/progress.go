package pipeline

import (
	"sync"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// progress orders a planner's marks (source.Mark) after the units emitted
// before them. Units are counted, per epoch, as they are emitted; a mark
// closes the open epoch. Once an epoch and every one before it have no
// unit left uncommitted, its marks are ready to record.
type progress struct {
	mu sync.Mutex
	// epochs are the epochs not yet done, oldest first; the last is open.
	epochs []*epoch
}

// epoch is the units emitted between two marks, and the mark that ends
// it.
type epoch struct {
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
	p.epochs = append(p.epochs, &epoch{})
}

// open returns the open epoch (p.mu held).
func (p *progress) open() *epoch {
	if len(p.epochs) == 0 {
		p.epochs = append(p.epochs, &epoch{})
	}
	return p.epochs[len(p.epochs)-1]
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
// order they were emitted, each once.
func (p *progress) ready() []source.Mark {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []source.Mark
	for len(p.epochs) > 1 && p.epochs[0].pending == 0 {
		out = append(out, p.epochs[0].marks...)
		p.epochs = p.epochs[1:]
	}
	return out
}

// readyMarks returns what the state store records of the marks now ready:
// those of resource sets no temporary failure holds.
func (r *run) readyMarks() []state.Progress {
	var out []state.Progress
	for _, m := range r.marks.ready() {
		if _, held := r.holdOf(m.ResourceSet); held {
			continue // what the mark claims may not all be held
		}
		out = append(out, state.Progress{Source: r.opts.SourceKey, ResourceSet: m.ResourceSet, Key: m.Key, Value: m.Value, RunID: r.runID})
	}
	return out
}

// holdings is the planner's read-only view of the state store.
type holdings struct {
	store *state.Store
	key   string
}

var _ source.Holdings = holdings{}
