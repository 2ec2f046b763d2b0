package config_test

import (
	"testing"
)

// TestDecodeSitesEmptyMapping: a registry file that is an empty
// mapping ("{}", or a flow mapping a template left empty) is an error or
// an empty registry, never a panic of sites apply.
func TestDecodeSitesEmptyMapping(t *testing.T) {
	for _, in := range []string{"{}", "{}\n# nothing yet\n"} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("DecodeSites(%q) panics: %v", in, r)
				}
			}()
			_, _ = decodeSites(in, "/etc/rsharvest/sites.yaml")
		}()
	}
}

// TestSiteNamesReachable: a site's name is a URL path element and a
// command-line word as it is: "." and ".." (which a browser resolves away
// in /site/NAME) and a leading "-" (an option) are refused.
func TestSiteNamesReachable(t *testing.T) {
	for name, ok := range map[string]bool{
		".": false, "..": false, "...": false, ".hidden": false, "-x": false,
		"a": true, "a.b": true, "_x": true, "x-1": true, "1": true,
	} {
		_, err := decodeSites("sites:\n  - name: \""+name+"\"\n    source: http://s.example/\n    sinks: [fs:/tmp/s]\n    schedule: every 1d\n", "/etc/rsharvest/sites.yaml")
		if (err == nil) != ok {
			t.Errorf("site name %q: err = %v, want accepted %v", name, err, ok)
		}
	}
}
