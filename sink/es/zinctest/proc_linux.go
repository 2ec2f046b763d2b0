package zinctest

import (
	"os/exec"
	"syscall"
)

// setPdeathsig has the kernel kill the server if the test binary dies
// without stopping it.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
