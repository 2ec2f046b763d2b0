package cli

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// daemonProc is an "rsharvest daemon" process a test started; out holds
// what it wrote.
type daemonProc struct {
	cmd *exec.Cmd
	out *syncBuffer
}

// startDaemon starts "bin daemon ARGS…" under ctx, env added to this
// process's environment; the process is killed when t ends if it still runs.
func startDaemon(t testing.TB, ctx context.Context, bin string, env []string, args ...string) *daemonProc {
	t.Helper()
	d := &daemonProc{out: &syncBuffer{}}
	d.cmd = exec.CommandContext(ctx, bin, append([]string{"daemon"}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	d.cmd.WaitDelay = 5 * time.Second
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.cmd.Process.Kill(); _ = d.cmd.Wait() })
	return d
}

// stop stops the daemon as SIGTERM would (SIGINT), and waits for it.
func (d *daemonProc) stop() {
	_ = d.cmd.Process.Signal(os.Interrupt)
	_ = d.cmd.Wait()
}

// kill kills the daemon with SIGKILL, and waits for it.
func (d *daemonProc) kill() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_ = d.cmd.Wait()
}
