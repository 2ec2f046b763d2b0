package cli

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
)

// TestEveryFlagHasConfigKey checks that each flag of the commands that
// read --config has a key in the config file: the flag's name with '_' for
// '-' (--header's key is headers). Flags that choose what a command prints
// or does, not how it syncs, have none, nor the switches -v and -P (a file
// gives log_level: debug and progress: bars).
func TestEveryFlagHasConfigKey(t *testing.T) {
	noKey := map[string]bool{"config": true, "json": true, "repair": true, "dry-run": true, "cpuprofile": true, "help": true, "allow-readable-state": true,
		"verbose": true, "progress-bars": true}
	keyOf := map[string]string{"header": "headers", "header-origin": "header_origins"}
	root := (&app{}).rootCommand()
	checked := 0
	for _, name := range []string{"baseline", "incremental", "sync", "audit"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Fatalf("command %s: %v", name, err)
		}
		visit := func(fl *pflag.Flag) {
			if !noKey[fl.Name] {
				checkConfigKey(t, name, fl.Name, keyOf)
				checked++
			}
		}
		c.InheritedFlags().VisitAll(visit)
		c.LocalFlags().VisitAll(visit)
	}
	if checked < 4*20 {
		t.Errorf("checked %d flags: want the sync flags of four commands", checked)
	}
}

func checkConfigKey(t *testing.T, cmd, flag string, keyOf map[string]string) {
	t.Helper()
	key, ok := keyOf[flag]
	if !ok {
		key = strings.ReplaceAll(flag, "-", "_")
	}
	doc, err := config.Decode(strings.NewReader(key+": x\n"), "c.yaml")
	if err == nil {
		j, p, a := harvest.DefaultJob(), processOpts{}, &app{}
		err = doc.Apply(settings(), nil, &j, &p, a)
	}
	if err != nil && strings.Contains(err.Error(), "unknown key") {
		t.Errorf("%s --%s has no config key %s: %v", cmd, flag, key, err)
	}
}
