package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain points the default state file ($RSHARVEST_STATE) into a
// directory of the test run's own, so that a command a test runs without
// --state never touches the user's state.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rsharvest-cli-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("RSHARVEST_STATE", filepath.Join(dir, "default.db"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
