// Package source holds what every protocol's planner and the pipeline that
// executes its plans share: the units of work a planner emits. A protocol
// lives in a package of its own below source (source/resourcesync); the
// pipeline executes every unit the same way (fetch → unpack → verify →
// deliver → commit).
package source

import (
	"time"

	"github.com/rsharvest/rsharvest/fixity"
)

// Package is a unit of work: a ZIP package to read (a Resource or Change
// Dump's package), or a Change List standing in for one (List).
type Package struct {
	// URL is the package's location.
	URL string
	// Expect is what the package's bytes must match: the length and
	// hashes its dump declares.
	Expect fixity.Expect
	// Dump is the Resource or Change Dump document listing it.
	Dump string
	// ResourceSet is the Capability List it comes from, or "".
	ResourceSet string
	// At is the snapshot datetime of a Resource Dump package.
	At time.Time
	// From and Until are a change package's interval (Until zero: open).
	From, Until time.Time
	// Contents is the URL of a copy of the package's manifest, or "".
	Contents string
	// List marks a Change List standing in for a package: its changes are
	// fetched by GET, not read from a ZIP.
	List bool
}
