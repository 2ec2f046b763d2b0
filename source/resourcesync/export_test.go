package resourcesync

import (
	"time"

	"github.com/rsharvest/rsharvest/source"
)

// NewPackageIndex is the Index the walk gives a package of set, at at, for
// the tests (a change package's when change).
func NewPackageIndex(change bool, set, pkg string, at time.Time) source.Index {
	return packageIndex{change: change, set: set, pkg: pkg, at: at}
}
