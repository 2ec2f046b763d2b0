package s3test

import (
	"os/exec"
	"syscall"
)

// stopWithParent has the kernel kill cmd should the test binary die
// without stopping it.
func stopWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
