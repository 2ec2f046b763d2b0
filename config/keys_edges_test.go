package config_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
)

// TestSiteProcessKeyNamedSo: a site does not take state (a setting of
// the process): the refusal says it is a setting not taken here, and does
// not suggest "rate" (two letters away), which would turn a state path
// into a request rate.
func TestSiteProcessKeyNamedSo(t *testing.T) {
	in := "sites:\n  - name: a\n    source: http://s.example/\n    sinks: [fs:/tmp/s]\n    schedule: every 1d\n    state: /var/lib/rsharvest/rs.db\n"
	_, err := decodeSites(in, "/etc/rsharvest/sites.yaml")
	if err == nil {
		t.Fatal("a site giving state: is accepted")
	}
	if strings.Contains(err.Error(), `did you mean "rate"`) || !strings.Contains(err.Error(), "not taken here") {
		t.Errorf("a site's state: key is answered with a suggestion of another setting: %v", err)
	}
}

// TestAliasesCompareBounded: two keys of one setting (sink and sinks)
// must agree, and their values are compared when a flag gave the setting
// (so neither is decoded first). Aliases make a value a graph with
// exponentially many paths (each level nine aliases of the one below):
// the comparison does not walk it path by path.
func TestAliasesCompareBounded(t *testing.T) {
	value := func(name string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "[&%s0 [x]", name)
		for i := 1; i <= 40; i++ {
			fmt.Fprintf(&b, ", &%s%d [", name, i)
			for k := range 9 {
				if k > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "*%s%d", name, i-1)
			}
			b.WriteString("]")
		}
		return b.String() + "]"
	}
	text := "sink: " + value("a") + "\nsinks: " + value("b") + "\n"
	doc, err := config.Decode(strings.NewReader(text), cfgName)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var j harvest.Job
		done <- doc.Apply(harvest.Settings(), func(*config.Setting) bool { return true }, &j) // as with --sink given
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("refused: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("comparing the two values of nested aliases still runs after a minute")
	}
}
