package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rsharvest/rsharvest/manifest"
)

// cfgName is the name test documents are decoded under: relative paths in
// them resolve against /etc/rsharvest.
const cfgName = "/etc/rsharvest/rsharvest.yaml"

func ptr[T any](v T) *T { return &v }

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
`
	tests := []struct {
		name string
		in   string
		want *File
	}{
		{"empty", "", &File{}},
		{"comments only", "# nothing here\n", &File{}},
		{"empty document", "---\n", &File{}},
		{"null document", "~\n", &File{}},
		{"seed 000", "capability_list_url: http://example.org/capabilitylist.xml\n",
			&File{Source: "http://example.org/capabilitylist.xml"}},
		{"source and capability_list_url agree",
			"source: http://x/\ncapability_list_url: http://x/\n", &File{Source: "http://x/"}},
		{"every key", full, &File{
			Source:                "https://example.org/",
			Sinks:                 []string{"fs:/etc/rsharvest/mirror", "s3://bucket/prefix?endpoint=http://minio:9000", "fs:/abs/dir"},
			State:                 "/etc/rsharvest/state/rs.db",
			Report:                "/var/log/run.json",
			Concurrency:           ptr(3),
			Workers:               ptr(16),
			Rate:                  ptr(2.5),
			Retries:               ptr(0),
			RangeParts:            ptr(4),
			MaxDocumentSize:       ptr(int64(-1)),
			Headers:               map[string]string{"Authorization": "Bearer s3cret", "X-Count": "5"},
			From:                  "2024-01-01",
			Until:                 "2024-02-01T12:00:00Z",
			SpoolDir:              "/etc/rsharvest/spool",
			StallTimeout:          ptr(Duration(2 * time.Minute)),
			WaitLock:              ptr(Duration(90 * time.Second)),
			AllowMissingHash:      ptr(true),
			RequireHash:           ptr(true),
			Verify:                "all",
			AllowPrivateAddresses: ptr(true),
			Progress:              "log",
			LogLevel:              "debug",
			LogFormat:             "json",
		}},
		{"null values are absent", "source:\nworkers: ~\nheaders:\nsinks:\n", &File{}},
		{"single sink string", "sink: fs:out\n", &File{Sinks: []string{"fs:/etc/rsharvest/out"}}},
		{"sinks as one string", "sinks: s3://b\n", &File{Sinks: []string{"s3://b"}}},
		{"fs sink keeps options", "sink: fs:m?fsync=true\n", &File{Sinks: []string{"fs:/etc/rsharvest/m?fsync=true"}}},
		{"headers as list", "headers: ['Authorization: Bearer a:b', 'X-Empty:']\n",
			&File{Headers: map[string]string{"Authorization": "Bearer a:b", "X-Empty": ""}}},
		{"header with null value", "headers: {X-A: }\n", &File{Headers: map[string]string{"X-A": ""}}},
		{"stall timeout in seconds", "stall_timeout: 45\n", &File{StallTimeout: ptr(Duration(45 * time.Second))}},
		{"stall timeout fractional seconds", "stall_timeout: 1.5\n", &File{StallTimeout: ptr(Duration(1500 * time.Millisecond))}},
		{"rate as integer", "rate: 10\n", &File{Rate: ptr(10.0)}},
		{"from equals until", "from: 2024-01-01\nuntil: 2024-01-01T00:00:00Z\n",
			&File{From: "2024-01-01", Until: "2024-01-01T00:00:00Z"}},
		{"anchors and aliases", "concurrency: &n 4\nworkers: *n\n", &File{Concurrency: ptr(4), Workers: ptr(4)}},
		{"numeric string path", "state: 2024\n", &File{State: "/etc/rsharvest/2024"}},
		{"one set", "set: physics\n", &File{Sets: []string{"physics"}}},
		{"sets", "set: [physics, \"math:algebra\"]\n", &File{Sets: []string{"physics", "math:algebra"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(strings.NewReader(tt.in), cfgName)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decode =\n%+v\nwant\n%+v", got, tt.want)
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
		{"sink and sinks", "sinks: [fs:a]\nsink: fs:b\n", 2, 1, `both sink and sinks`},
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
		{"syntax error", "source: [\n", 0, 0, `rsharvest.yaml: yaml:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode(strings.NewReader(tt.in), cfgName)
			if err == nil {
				t.Fatalf("Decode = %+v, want an error", f)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error %q holds a header value", msg)
			}
			var e *Error
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
	_, err := Decode(strings.NewReader("from: nope\n"), "c.yaml")
	if !errors.Is(err, manifest.ErrDatetime) {
		t.Fatalf("error %v does not wrap manifest.ErrDatetime", err)
	}
	if !strings.HasPrefix(err.Error(), "c.yaml:1:7: ") {
		t.Errorf("error %q: want prefix c.yaml:1:7", err)
	}
}

func TestDecodeTooLarge(t *testing.T) {
	in := "# " + strings.Repeat("x", MaxSize) + "\n"
	if _, err := Decode(strings.NewReader(in), "big.yaml"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Decode of an oversized file: err = %v", err)
	}
}

func TestRelativeNameKeepsPathsRelative(t *testing.T) {
	f, err := Decode(strings.NewReader("state: s.db\nsink: fs:./m\nreport: ../r.json\n"), "rsharvest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.State != "s.db" || f.Sinks[0] != "fs:m" || f.Report != filepath.Join("..", "r.json") {
		t.Errorf("got state %q sinks %q report %q", f.State, f.Sinks, f.Report)
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
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &File{
		Source:   "http://example.org/cl.xml",
		Sinks:    []string{"fs:" + filepath.Join(dir, "sub", "mirror")},
		State:    filepath.Join(dir, "rs.db"),
		SpoolDir: "/tmp/spool",
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("Load =\n%+v\nwant\n%+v", f, want)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: err = %v, want os.ErrNotExist", err)
	}
}

func TestTimes(t *testing.T) {
	tests := []struct {
		name   string
		f      File
		from   time.Time
		fromOK bool
		until  time.Time
		untlOK bool
		err    bool
	}{
		{"unset", File{}, time.Time{}, false, time.Time{}, false, false},
		{"both", File{From: "2024-01-01", Until: "2024-02-01T10:30:00+02:00"},
			time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), true, time.Date(2024, 2, 1, 8, 30, 0, 0, time.UTC), true, false},
		{"invalid (built by hand)", File{From: "bad"}, time.Time{}, false, time.Time{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, ok, err := tt.f.FromTime()
			if (err != nil) != tt.err || ok != tt.fromOK || !from.Equal(tt.from) {
				t.Errorf("FromTime = %v, %v, %v; want %v, %v, error %v", from, ok, err, tt.from, tt.fromOK, tt.err)
			}
			until, ok, err := tt.f.UntilTime()
			if err != nil || ok != tt.untlOK || !until.Equal(tt.until) {
				t.Errorf("UntilTime = %v, %v, %v; want %v, %v", until, ok, err, tt.until, tt.untlOK)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct{ key, want string }{
		{"concurency", "concurrency"},
		{"worker", "workers"},
		{"stall-timeout", "stall_timeout"},
		{"LOG_LEVEL", "log_level"},
		{"header", "headers"},
		{"capability_list", ""},
		{"x", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.key, knownKeys()); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.key, got, tt.want)
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
		cfg, err := Decode(strings.NewReader(in), cfgName)
		if err == nil && cfg == nil {
			t.Fatal("nil File without an error")
		}
	})
}

func TestMarshalRoundTrip(t *testing.T) {
	in := &File{
		Source: "http://example.org/", Sinks: []string{"fs:/m", "s3://b"}, State: "/s.db", Report: "/r.json",
		Concurrency: ptr(2), Workers: ptr(1), Rate: ptr(0.5), Retries: ptr(0),
		Headers: map[string]string{"A": "b: c"}, From: "2024-01-01", Until: "2024-01-02T00:00:00Z",
		SpoolDir: "/spool", StallTimeout: ptr(Duration(90 * time.Second)), AllowMissingHash: ptr(false),
		Progress: "bars", LogLevel: "warn",
	}
	for _, f := range []*File{in, {}} {
		data, err := yaml.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Decode(bytes.NewReader(data), cfgName)
		if err != nil {
			t.Fatalf("Decode of\n%s: %v", data, err)
		}
		if !reflect.DeepEqual(out, f) {
			t.Errorf("round trip of\n%s=\n%+v\nwant\n%+v", data, out, f)
		}
	}
}

// TestFileKeysAreKnown checks that every key a File marshals to is a key
// the decoder knows, so a marshalled File always decodes.
func TestFileKeysAreKnown(t *testing.T) {
	typ := reflect.TypeFor[File]()
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
		if !slices.Contains(knownKeys(), key) {
			t.Errorf("File.%s marshals to %q, which the decoder does not know", typ.Field(i).Name, key)
		}
	}
}
