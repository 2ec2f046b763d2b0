//go:build race

package manifest

const raceEnabled = true
