package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/manifest"
)

// cfgName is the name test documents are decoded under: relative paths in
// them resolve against /etc/rsharvest.
const cfgName = "/etc/rsharvest/rsharvest.yaml"

// proc stands in for the process's own settings (the command line's).
type proc struct {
	State, Report, Progress, LogLevel, LogFormat string
	WaitLock                                     time.Duration
	Quiet                                        bool
}

// table is the harvest's settings and the process's.
func table() config.Table {
	p := func(bind func(*proc) config.Value) func(any) config.Value {
		return func(t any) config.Value {
			if p, ok := t.(*proc); ok {
				return bind(p)
			}
			return nil
		}
	}
	fl := config.AsFlag | config.InFile
	return append(harvest.Settings(), config.Table{
		{Name: "state", Where: fl, Bind: p(func(p *proc) config.Value { return config.StatePath(&p.State) })},
		{Name: "report", Where: fl, Bind: p(func(p *proc) config.Value { return config.Path(&p.Report) })},
		{Name: "progress", Where: fl, Bind: p(func(p *proc) config.Value { return config.OneOf(&p.Progress, "auto", "bars", "log", "none") })},
		{Name: "log-level", Where: fl, Bind: p(func(p *proc) config.Value { return config.OneOf(&p.LogLevel, "debug", "info", "warn", "error") })},
		{Name: "log-format", Where: fl, Bind: p(func(p *proc) config.Value { return config.OneOf(&p.LogFormat, "text", "json") })},
		{Name: "wait-lock", Where: fl, Bind: p(func(p *proc) config.Value { return config.Duration(&p.WaitLock) })},
		{Name: "quiet", Where: fl, Bind: p(func(p *proc) config.Value { return config.Bool(&p.Quiet) })},
	}...)
}

// decode applies the config file in to a zero job and process settings.
func decode(in, name string) (harvest.Job, proc, error) {
	var j harvest.Job
	var p proc
	doc, err := config.Decode(strings.NewReader(in), name)
	if err == nil {
		err = doc.Apply(table(), nil, &j, &p)
	}
	return j, p, err
}

func TestDecode(t *testing.T) {
	full := `
source: https://example.org/
sinks: [fs:./mirror, "s3://bucket/prefix?endpoint=http://minio:9000", fs:/abs/dir]
state: state/rs.db
report: /var/log/run.json
concurrency: 3
workers: 16
rate: 2.5
retries: 0
range_parts: 4
max_document_size: -1
headers:
  Authorization: Bearer s3cret
  X-Count: 5
from: 2024-01-01
until: 2024-02-01T12:00:00Z
spool_dir: spool
stall_timeout: 2m
wait_lock: 90
allow_missing_hash: true
require_hash: true
verify: all
allow_private_addresses: true
progress: log
log_level: debug
log_format: json
max_delete: 5%
bwlimit: 10M
`
	bw := func(s string) (b harvest.Job) { b.BwLimit.UnmarshalText([]byte(s)); return }
	md := func(s string) (b harvest.Job) { b.MaxDelete.UnmarshalText([]byte(s)); return }
	tests := []struct {
		name string
		in   string
		job  harvest.Job
		proc proc
	}{
		{"empty", "", harvest.Job{}, proc{}},
		{"comments only", "# nothing here\n", harvest.Job{}, proc{}},
		{"empty document", "---\n", harvest.Job{}, proc{}},
		{"null document", "~\n", harvest.Job{}, proc{}},
		{"seed 000", "capability_list_url: http://example.org/capabilitylist.xml\n",
			harvest.Job{Source: "http://example.org/capabilitylist.xml"}, proc{}},
		{"source and capability_list_url agree",
			"source: http://x/\ncapability_list_url: http://x/\n", harvest.Job{Source: "http://x/"}, proc{}},
		{"every key", full, harvest.Job{
			Source:                "https://example.org/",
			Sinks:                 []string{"fs:/etc/rsharvest/mirror", "s3://bucket/prefix?endpoint=http://minio:9000", "fs:/abs/dir"},
			Concurrency:           3,
			ConcurrencySet:        true,
			Workers:               16,
			Rate:                  2.5,
			Retries:               0,
			RangeParts:            4,
			MaxDocumentSize:       -1,
			Headers:               []string{"Authorization: Bearer s3cret", "X-Count: 5"},
			From:                  "2024-01-01",
			Until:                 "2024-02-01T12:00:00Z",
			SpoolDir:              "/etc/rsharvest/spool",
			StallTimeout:          2 * time.Minute,
			AllowMissingHash:      true,
			RequireHash:           true,
			Verify:                "all",
			AllowPrivateAddresses: true,
			BwLimit:               bw("10M").BwLimit,
			MaxDelete:             md("5%").MaxDelete,
		}, proc{State: "/etc/rsharvest/state/rs.db", Report: "/var/log/run.json", WaitLock: 90 * time.Second, Progress: "log", LogLevel: "debug", LogFormat: "json"}},
		{"null values are absent", "source:\nworkers: ~\nheaders:\nsinks:\n", harvest.Job{}, proc{}},
		{"single sink string", "sink: fs:out\n", harvest.Job{Sinks: []string{"fs:/etc/rsharvest/out"}}, proc{}},
		{"sinks as one string", "sinks: s3://b\n", harvest.Job{Sinks: []string{"s3://b"}}, proc{}},
		{"fs sink keeps options", "sink: fs:m?fsync=true\n", harvest.Job{Sinks: []string{"fs:/etc/rsharvest/m?fsync=true"}}, proc{}},
		{"headers as list", "headers: ['Authorization: Bearer a:b', 'X-Empty:']\n",
			harvest.Job{Headers: []string{"Authorization: Bearer a:b", "X-Empty: "}}, proc{}},
		{"header with null value", "headers: {X-A: }\n", harvest.Job{Headers: []string{"X-A: "}}, proc{}},
		{"stall timeout in seconds", "stall_timeout: 45\n", harvest.Job{StallTimeout: 45 * time.Second}, proc{}},
		{"stall timeout fractional seconds", "stall_timeout: 1.5\n", harvest.Job{StallTimeout: 1500 * time.Millisecond}, proc{}},
		{"rate as integer", "rate: 10\n", harvest.Job{Rate: 10}, proc{}},
		{"from equals until", "from: 2024-01-01\nuntil: 2024-01-01T00:00:00Z\n",
			harvest.Job{From: "2024-01-01", Until: "2024-01-01T00:00:00Z"}, proc{}},
		{"anchors and aliases", "concurrency: &n 4\nworkers: *n\n", harvest.Job{Concurrency: 4, ConcurrencySet: true, Workers: 4}, proc{}},
		{"numeric string path", "state: 2024\n", harvest.Job{}, proc{State: "/etc/rsharvest/2024"}},
		{"postgres state", "state: postgres://u@h/db\n", harvest.Job{}, proc{State: "postgres://u@h/db"}},
		{"one set", "set: physics\n", harvest.Job{Sets: []string{"physics"}}, proc{}},
		{"sets", "set: [physics, \"math:algebra\"]\n", harvest.Job{Sets: []string{"physics", "math:algebra"}}, proc{}},
		{"schema resolved", "schema: [a=x.xsd, b=/abs.xsd]\n", harvest.Job{Schemas: []string{"a=/etc/rsharvest/x.xsd", "b=/abs.xsd"}}, proc{}},
		{"header origins", "header_origins: https://cdn.example.org\n", harvest.Job{HeaderOrigins: []string{"https://cdn.example.org"}}, proc{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, p, err := decode(tt.in, cfgName)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(j, tt.job) || p != tt.proc {
				t.Errorf("Decode =\n%+v\n%+v\nwant\n%+v\n%+v", j, p, tt.job, tt.proc)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		line, col int    // 0: not an *Error
		want      string // substring of the message
	}{
		{"unknown key with suggestion", "source: x\n\nsinks: [fs:a]\nworkers: 2\n\n\n  # c\nconcurency: 4\n", 8, 1,
			`rsharvest.yaml:8:1: unknown key "concurency" (did you mean "concurrency"?)`},
		{"unknown key, dashes", "spool-dir: x\n", 1, 1, `(did you mean "spool_dir"?)`},
		{"unknown key, case", "Workers: 2\n", 1, 1, `(did you mean "workers"?)`},
		{"unknown key, nothing close", "zzzzzzzz: 1\n", 1, 1, `unknown key "zzzzzzzz" (known keys: allow_missing_hash,`},
		{"wrong type int", "workers: many\n", 1, 10, `workers: want an integer, not "many"`},
		{"quoted int", "retries: \"3\"\n", 1, 10, `retries: want an integer`},
		{"float for int", "concurrency: 2.5\n", 1, 14, `want an integer`},
		{"int overflow", "workers: 99999999999999999999\n", 1, 10, `want an integer`},
		{"list for string", "state: [a, b]\n", 1, 8, `state: want a string, not a list`},
		{"map in sets", "set: [a, {b: c}]\n", 1, 10, `set[1]: want a string`},
		{"wrong type bool", "allow_missing_hash: maybe\n", 1, 21, `want true or false`},
		{"wrong type rate", "rate: fast\n", 1, 7, `rate: want a number`},
		{"infinite rate", "rate: .inf\n", 1, 7, `rate: want a number`},
		{"duplicate key", "workers: 1\nstate: s\nworkers: 2\n", 3, 1, `duplicate key "workers" (first at line 1)`},
		{"sink and sinks", "sinks: [fs:a]\nsink: fs:b\n", 2, 1, `both sinks and sink given`},
		{"source conflict", "source: http://a/\ncapability_list_url: http://b/\n", 2, 1, `differ`},
		{"negative concurrency", "concurrency: -1\n", 1, 14, `concurrency: -1 is negative`},
		{"zero workers", "workers: 0\n", 1, 10, `workers: 0: want at least 1`},
		{"negative retries", "retries: -2\n", 1, 10, `retries: -2 is negative`},
		{"zero range parts", "range_parts: 0\n", 1, 14, `range_parts: 0: want at least 1`},
		{"zero document size", "max_document_size: 0\n", 1, 20, `want a number of bytes of at least 1, or -1`},
		{"bad document size", "max_document_size: big\n", 1, 20, `max_document_size: want a number of bytes`},
		{"negative rate", "rate: -0.5\n", 1, 7, `rate: -0.5 is negative`},
		{"negative stall timeout", "stall_timeout: -1s\n", 1, 16, `is negative`},
		{"bad stall timeout", "stall_timeout: soon\n", 1, 16, `want a duration`},
		{"bad from", "from: yesterday\n", 1, 7, `from: invalid W3C datetime`},
		{"bad until", "until: 2024-13-01\n", 1, 8, `until: invalid W3C datetime`},
		{"datetime without zone", "from: 2024-01-01T10:00\n", 1, 7, `invalid W3C datetime`},
		{"from after until", "from: 2024-03-01\nuntil: 2024-02-01\n", 2, 8, `until 2024-02-01 is before from 2024-03-01 (line 1)`},
		{"bad progress", "progress: fancy\n", 1, 11, `progress: want one of auto, bars, log, none`},
		{"bad verify", "verify: some\n", 1, 9, `verify: want one of strongest, all`},
		{"bad log level", "log_level: loud\n", 1, 12, `log_level: want one of debug`},
		{"bad bwlimit", "bwlimit: fast\n", 1, 10, `bwlimit: bandwidth "fast"`},
		{"bad max_delete", "max_delete: 200%\n", 1, 13, `max_delete: "200%"`},
		{"bad header origin", "header_origins: [ftp://x]\n", 1, 18, `want an origin`},
		{"empty sinks list", "sinks: []\n", 1, 8, `empty list`},
		{"empty sink spec", "sinks: ['']\n", 1, 9, `empty sink spec`},
		{"sinks mapping", "sinks: {a: b}\n", 1, 8, `want a sink spec or a list`},
		{"bad header name", "headers: {'X A': v}\n", 1, 11, `"X A" is not a valid header name`},
		{"header list without colon", "headers: ['Authorization Bearer s3cret']\n", 1, 11, `headers[0]: want 'Name: value'`},
		{"duplicate header ignoring case", "headers:\n  X-Key: a\n  x-key: s3cret\n", 3, 3, `duplicate header x-key (first at line 2)`},
		{"duplicate header in list", "headers: ['A: 1', 'a: s3cret']\n", 1, 19, `duplicate header a`},
		{"header value with newline", "headers: {A: \"s3cret\\nX: y\"}\n", 1, 11, `holds a line break`},
		{"headers scalar", "headers: s3cret\n", 1, 10, `headers: want a mapping`},
		{"top level list", "- a\n- b\n", 1, 1, `want a mapping of keys to values, not a list`},
		{"top level scalar", "hello\n", 1, 1, `want a mapping`},
		{"second document", "source: x\n---\nsource: y\n", 2, 1, `a second YAML document`},
		{"merge key", "base: &b {workers: 1}\n<<: *b\n", 1, 1, `unknown key "base"`},
		{"merge key alone", "<<: {workers: 1}\n", 1, 1, `merge keys`},
		{"complex key", "? [a]\n: b\n", 1, 3, `a key must be a string`},
		// A syntax error names the line that is wrong (not the start of
		// the construct the parser was in), with no column.
		{"syntax error", "source: [\n", 1, 0, `rsharvest.yaml:1: did not find expected node content`},
		{"unclosed list", "source: http://a/\nsinks: [fs:/a\nworkers: 2\n", 2, 0, `did not find expected ',' or ']'`},
		{"tab", "source: http://a/\nsinks:\n  - fs:/a\n\tworkers: 2\n", 4, 0, `tab character`},
		{"misindented", "source: http://a/\nheaders:\n  A: b\n  C: d\n  E: f\n   G: h\n", 6, 0, `mapping values are not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, _, err := decode(tt.in, cfgName)
			if err == nil {
				t.Fatalf("Decode = %+v, want an error", j)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error %q holds a header value", msg)
			}
			var e *config.Error
			if tt.line == 0 {
				if errors.As(err, &e) {
					t.Errorf("error is an *Error at %d:%d, want a plain error", e.Line, e.Column)
				}
				return
			}
			if !errors.As(err, &e) {
				t.Fatalf("error %q is not an *Error", msg)
			}
			if e.File != cfgName || e.Line != tt.line || e.Column != tt.col {
				t.Errorf("error at %s:%d:%d, want %s:%d:%d", e.File, e.Line, e.Column, cfgName, tt.line, tt.col)
			}
		})
	}
}

func TestDecodeDatetimeErrorWraps(t *testing.T) {
	_, _, err := decode("from: nope\n", "c.yaml")
	if !errors.Is(err, manifest.ErrDatetime) {
		t.Fatalf("error %v does not wrap manifest.ErrDatetime", err)
	}
	if !strings.HasPrefix(err.Error(), "c.yaml:1:7: ") {
		t.Errorf("error %q: want prefix c.yaml:1:7", err)
	}
}

func TestDecodeTooLarge(t *testing.T) {
	in := "# " + strings.Repeat("x", config.MaxSize) + "\n"
	if _, err := config.Decode(strings.NewReader(in), "big.yaml"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Decode of an oversized file: err = %v", err)
	}
}

func TestRelativeNameKeepsPathsRelative(t *testing.T) {
	j, p, err := decode("state: s.db\nsink: fs:./m\nreport: ../r.json\n", "rsharvest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != "s.db" || j.Sinks[0] != "fs:m" || p.Report != filepath.Join("..", "r.json") {
		t.Errorf("got state %q sinks %q report %q", p.State, j.Sinks, p.Report)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "rsharvest.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "capability_list_url: http://example.org/cl.xml\nsink: fs:mirror\nstate: ../rs.db\nspool_dir: /tmp/spool\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var j harvest.Job
	var p proc
	if err := doc.Apply(table(), nil, &j, &p); err != nil {
		t.Fatal(err)
	}
	want := harvest.Job{Source: "http://example.org/cl.xml", Sinks: []string{"fs:" + filepath.Join(dir, "sub", "mirror")}, SpoolDir: "/tmp/spool"}
	if !reflect.DeepEqual(j, want) || p.State != filepath.Join(dir, "rs.db") {
		t.Errorf("Load =\n%+v %+v\nwant\n%+v", j, p, want)
	}
	if _, err := config.Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: err = %v, want os.ErrNotExist", err)
	}
}

// TestFlagsOverride: a setting whose flag was given keeps the flag's value;
// headers merge, the file's that no flag names first.
func TestFlagsOverride(t *testing.T) {
	doc, err := config.Decode(strings.NewReader("source: http://file/\nworkers: 3\nstall_timeout: 1m\nheaders: {Authorization: Bearer file, X-File: 1}\nsink: fs:/file\n"), cfgName)
	if err != nil {
		t.Fatal(err)
	}
	j := harvest.Job{Source: "http://flag/", Workers: 7, Headers: []string{"authorization: Bearer flag"}}
	flags := map[string]bool{"source": true, "workers": true, "header": true}
	if err := doc.Apply(table(), func(s *config.Setting) bool { return flags[s.Name] }, &j); err != nil {
		t.Fatal(err)
	}
	want := harvest.Job{Source: "http://flag/", Workers: 7, StallTimeout: time.Minute, Sinks: []string{"fs:/file"},
		Headers: []string{"X-File: 1", "authorization: Bearer flag"}}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("after Apply:\n%+v\nwant\n%+v", j, want)
	}
}

// TestEncodeRoundTrip: each setting's value, written back as a file's
// value, reads back the same (what a site stores).
func TestEncodeRoundTrip(t *testing.T) {
	doc, err := config.Decode(strings.NewReader("source: http://x/\nsinks: [fs:/m, s3://b]\nconcurrency: 2\nrate: 0.5\nheaders: {A: 'b: c'}\nstall_timeout: 90s\nbwlimit: 1M\nmax_delete: 10\nset: [a, b]\nrequire_hash: true\nvalidate: false\n"), cfgName)
	if err != nil {
		t.Fatal(err)
	}
	j, p := harvest.DefaultJob(), proc{Progress: "auto", LogLevel: "info", LogFormat: "text"}
	if err := doc.Apply(table(), nil, &j, &p); err != nil {
		t.Fatal(err)
	}
	if !j.NoValidate {
		t.Error("validate: false left validation on")
	}
	for _, s := range table() {
		v := s.Bind(&j)
		if v == nil {
			v = s.Bind(&p)
		}
		var j2 harvest.Job
		var p2 proc
		v2 := s.Bind(&j2)
		if v2 == nil {
			v2 = s.Bind(&p2)
		}
		if err := v2.Decode(config.NewContext(cfgName), s.FileKey(), v.Encode()); err != nil && v.String() != "" && v.String() != "[]" {
			t.Errorf("%s: %q written back does not read: %v", s.Name, v.String(), err)
			continue
		}
		if err == nil && v2.String() != v.String() {
			t.Errorf("%s: %q read back as %q", s.Name, v.String(), v2.String())
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"", "source: x\n", "sinks: [fs:a, fs:/b]\nheaders: ['A: b']\n",
		"from: 2024-01-01\nuntil: 2023-01-01\n", "a: &a [*a]\n", "stall_timeout: 1e300\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		decode(in, cfgName) // ends, without panicking
	})
}
