//go:build !linux

package s3test

import "os/exec"

// stopWithParent does nothing here: only Linux can tie a child's life to
// its parent's.
func stopWithParent(*exec.Cmd) {}
