package resourcesync

import (
	"errors"

	"github.com/rsharvest/rsharvest/errclass"
)

// errLinkLoop is the cause of a link loop: a document lists one above it
// on the path down from the top, which would be walked forever.
var errLinkLoop = errors.New("link loop: the document is above this one in the tree; not read again")

// trail is the chain of documents from the top of a walk down to one
// document. The walk (walk.child) goes down through trail.down, whether
// it plans a task or maps a source (a survey), so that both refuse the
// same link loops and the same nesting, with the same words.
type trail struct {
	url   string
	up    *trail
	depth int
}

// top returns the trail of a walk's first document, at depth 0.
func top(u string) *trail { return &trail{url: u} }

// down returns the trail to document u listed by the document at p, one
// level deeper. Its error, permanent, says why u must not be read: it is
// on the path already (errLinkLoop), or it would lie deeper than maxDepth.
func (p *trail) down(u string, maxDepth int) (*trail, error) {
	for q := p; q != nil; q = q.up {
		if q.url == u {
			return nil, errclass.NewPermanent(errLinkLoop)
		}
	}
	if p.depth+1 > maxDepth {
		return nil, errclass.Permanentf("not read: documents nested more than %d deep", maxDepth)
	}
	return &trail{url: u, up: p, depth: p.depth + 1}, nil
}
