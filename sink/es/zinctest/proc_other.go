//go:build !linux

package zinctest

import "os/exec"

// setPdeathsig does nothing where the kernel cannot kill a child with its
// parent; the caller still stops the server.
func setPdeathsig(*exec.Cmd) {}
