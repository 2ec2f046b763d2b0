package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/status"
)

// TestSystemdUnits: the units of contrib/systemd pass systemd-analyze
// verify (their man pages found among docs/man), and the command each
// starts is one rsharvest takes (its flags parse).
func TestSystemdUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is needed to verify contrib/systemd (Debian's systemd):", err)
	}
	units, err := filepath.Glob("../contrib/systemd/rsharvest-*")
	if err != nil || len(units) != 3 {
		t.Fatalf("units %q (%v): want the daemon's service, and run's service and timer", units, err)
	}
	bin := crashBuildBinary(t)
	dir, manDir := t.TempDir(), filepath.Join(t.TempDir(), "man1")
	if err := os.MkdirAll(manDir, 0o755); err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob("../docs/man/*.1")
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(manDir, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var copies []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			cmd, ok := strings.CutPrefix(line, "ExecStart=/usr/local/bin/rsharvest ")
			if !ok {
				continue
			}
			if out, err := exec.CommandContext(t.Context(), bin, append(strings.Fields(cmd), "--help")...).CombinedOutput(); err != nil {
				t.Errorf("%s: rsharvest %s: %v\n%s", filepath.Base(u), cmd, err, out)
			}
		}
		c := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(c, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/rsharvest", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	cmd := exec.CommandContext(t.Context(), analyze, append([]string{"verify"}, copies...)...)
	cmd.Env = append(os.Environ(), "MANPATH="+filepath.Dir(manDir))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	if b, err := os.ReadFile("../contrib/systemd/rsharvest.env.example"); err != nil || !strings.Contains(string(b), "RSHARVEST_STATUS_TOKEN=") {
		t.Errorf("rsharvest.env.example: %v", err)
	}
}

// TestPrometheusRules: the alerting rules of contrib/prometheus pass
// promtool check rules, and their unit tests pass (promtool test rules);
// every series they name is one /metrics gives.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed to check contrib/prometheus (Debian's prometheus):", err)
	}
	dir := "../contrib/prometheus"
	for _, args := range [][]string{{"check", "rules", "rsharvest-alerts.yml"}, {"test", "rules", "rsharvest-alerts.test.yml"}} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	rules, err := os.ReadFile(filepath.Join(dir, "rsharvest-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`rsharvest_[a-z_]+`).FindAllString(string(rules), -1) {
		if !strings.Contains(status.MetricsHelp(), m) {
			t.Errorf("the rules name %s, which /metrics does not give", m)
		}
	}
}
