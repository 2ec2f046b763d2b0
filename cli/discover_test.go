package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// runDiscover runs the discover command alone (it may not be wired into
// the root command yet) and maps its error as Main does.
func runDiscover(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, logLevel: "error"}
	c := a.discoverCommand()
	c.SetArgs(args)
	c.SetOut(&out)
	c.SetErr(&errb)
	c.SilenceUsage, c.SilenceErrors = true, true
	ctx := context.Background()
	if err := c.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(&errb, "rsharvest:", err)
		return exitCode(ctx, err), out.String(), errb.String()
	}
	return a.code, out.String(), errb.String()
}

func TestDiscoverCommand(t *testing.T) {
	const ns = `xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"`
	var mu sync.Mutex
	var gotKey []string
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotKey = append(gotKey, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		switch r.URL.Path {
		case "/.well-known/resourcesync":
			fmt.Fprintf(w, `<urlset %s><rs:md capability="description"/><url><loc>%s/cl.xml</loc></url></urlset>`, ns, srv.URL)
		case "/cl.xml":
			fmt.Fprintf(w, `<urlset %s><rs:ln rel="up" href="/.well-known/resourcesync"/><rs:md capability="capabilitylist"/><url><loc>%s/rd.xml</loc><rs:md capability="resourcedump"/></url></urlset>`, ns, srv.URL)
		case "/rd.xml":
			fmt.Fprintf(w, `<urlset %s><rs:ln rel="up" href="%s/cl.xml"/><rs:md capability="resourcedump" at="2024-01-01T00:00:00Z"/></urlset>`, ns, srv.URL)
		case "/page.html":
			fmt.Fprint(w, `<html><body>nothing here</body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	code, out, stderr := runDiscover(t, srv.URL, "--header", "X-Api-Key: s3cret", "--rate", "1000", "--retries", "0")
	want := "description " + srv.URL + "/.well-known/resourcesync\n  capabilitylist " + srv.URL + "/cl.xml set=cl\n    resourcedump " + srv.URL + "/rd.xml at=2024-01-01T00:00:00Z\n"
	if code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	mu.Lock()
	for _, k := range gotKey {
		if k != "s3cret" {
			t.Errorf("a request without the --header: %q", gotKey)
			break
		}
	}
	mu.Unlock()

	code, out, stderr = runDiscover(t, srv.URL+"/rd.xml", "--json")
	var v struct {
		Found string `json:"found"`
		Sets  []struct {
			Name           string `json:"name"`
			CapabilityList string `json:"capability_list"`
		} `json:"sets"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != ExitOK || err != nil || v.Found != "up-links" || len(v.Sets) != 1 || v.Sets[0].Name != "cl" {
		t.Fatalf("exit %d, %v: %+v\n%s\n%s", code, err, v, out, stderr)
	}

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{srv.URL + "/page.html"}, ExitSource, "page.html is an HTML page without"},
		{[]string{srv.URL + "/missing.xml", "--retries", "0"}, ExitSource, "404"},
		{[]string{"not a url"}, ExitUsage, "not an absolute http(s) URL"},
		{nil, ExitUsage, "one URL"},
		{[]string{srv.URL, "--header", "nocolon"}, ExitUsage, "--header"},
		{[]string{srv.URL, "--rate", "-1"}, ExitUsage, "negative"},
	} {
		code, _, stderr := runDiscover(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.says) {
			t.Errorf("discover %q: exit %d, want %d; stderr %s", tc.args, code, tc.code, stderr)
		}
	}
}
