package cli

import (
	"path/filepath"
	"testing"
)

// TestDefaultStateFile: $RSHARVEST_STATE, else $XDG_STATE_HOME/rsharvest,
// else ~/.local/state/rsharvest.
func TestDefaultStateFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, tc := range []struct{ env, xdg, want string }{
		{"/srv/h/state.db", "/x", "/srv/h/state.db"},
		{"", "/var/lib/u", "/var/lib/u/rsharvest/rsharvest.db"},
		{"", "", filepath.Join(home, ".local/state/rsharvest/rsharvest.db")},
	} {
		t.Setenv("RSHARVEST_STATE", tc.env)
		t.Setenv("XDG_STATE_HOME", tc.xdg)
		if got := defaultStateFile(); got != tc.want {
			t.Errorf("RSHARVEST_STATE=%q XDG_STATE_HOME=%q: %s, want %s", tc.env, tc.xdg, got, tc.want)
		}
	}
}
