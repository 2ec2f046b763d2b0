package cli

import (
	"github.com/rsharvest/rsharvest/state"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/sink/es/estest"
)

// TestCatPassesOverBodilessIndex: "cat URI --sink es:… --sink fs:…"
// (or --site of a site with both) where the es index keeps no bodies (the
// default): the es sink answers "the body is not stored"
// (errors.ErrUnsupported), which is no body, and cat must go on to the
// mirror, which holds it — as its help says, it reads "from a sink that
// keeps bodies".
func TestCatPassesOverBodilessIndex(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 5, Packages: 1, Seed: 6, MeanSize: 64, NoOddNames: true}, bench.ServeOptions{})
	es := estest.New(t)
	dir := t.TempDir()
	mirror := filepath.Join(dir, "m")
	sinks := []string{"--sink", "es:" + es.URL + "/corpus", "--sink", "fs:" + mirror}
	if code, out, stderr := run(t, append([]string{"baseline", "--source", srv.URL, "--state", filepath.Join(dir, "s.db")}, sinks...)...); code != ExitOK {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	var uri, body string
	for u, b := range heldBodies(t, mirror) {
		uri, body = u, b
		break
	}
	code, out, stderr := run(t, append([]string{"cat", uri}, sinks...)...)
	if code != ExitOK || out != body {
		t.Errorf("cat %s: exit %d, %d bytes out (want the %d the mirror holds)\n%s", uri, code, len(out), len(body), stderr)
	}
}

// TestLsOddIdentifiers: an OAI-PMH identifier is any string the
// repository sends, with characters XML 1.0 allows: &#13; &#10; and the C1
// control U+009B (CSI) among them (the reader only trims the ends). "ls"
// shows such characters escaped, one line per resource: a record's name
// cannot forge lines of the listing (a newline), hide what precedes it (a
// carriage return) or send a terminal a control sequence.
func TestLsOddIdentifiers(t *testing.T) {
	const source = "http://127.0.0.1:1/oai"
	for _, tc := range []struct{ name, uri string }{
		{"newline forges a line", "oai:x:1\n        99  -  -  -  oai:x:forged"},
		{"carriage return hides the start", "oai:evil:1\roai:good:1"},
		{"C1 control sequence introducer", "oai:x:\u009b2J"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			st, err := state.Open(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			err = st.Commit(t.Context(), state.Batch{Resources: []state.Resource{{URI: tc.uri, Source: source, Length: 3, Outcome: state.OutcomeWritten}}})
			st.Close()
			if err != nil {
				t.Fatal(err)
			}
			code, out, stderr := run(t, "ls", "--source", source, "--state", db)
			if code != ExitOK {
				t.Fatalf("ls: exit %d\n%s", code, stderr)
			}
			if strings.Count(out, "\n") != 1 || strings.ContainsAny(out, "\r\u009b") {
				t.Errorf("ls printed the identifier raw: %q", out)
			}
		})
	}
}
