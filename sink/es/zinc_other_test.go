//go:build !linux

package es

import "os/exec"

// setPdeathsig does nothing where the kernel cannot kill a child with its
// parent; TestMain still stops the server.
func setPdeathsig(*exec.Cmd) {}
