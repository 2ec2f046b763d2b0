package publish

import "os/exec"

func runMount(dir string) ([]byte, error) {
	return exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput()
}

func runUmount(dir string) ([]byte, error) { return exec.Command("umount", dir).CombinedOutput() }
