package config

import (
	"reflect"
	"testing"
	"time"
)

// vars stands in for a command's flag variables, holding their defaults.
type vars struct {
	source, state, report, spoolDir, progress, logLevel, from, until string
	sinks, headers                                                   []string
	concurrency, workers, retries                                    int
	rate                                                             float64
	stall                                                            time.Duration
	allowMissingHash                                                 bool
}

func defaults() vars {
	return vars{state: "rsharvest.db", progress: "auto", logLevel: "info", concurrency: 4, workers: 8, retries: 5, stall: 30 * time.Second}
}

func (v *vars) targets() Targets {
	return Targets{
		Source: &v.source, State: &v.state, Report: &v.report, SpoolDir: &v.spoolDir,
		Progress: &v.progress, LogLevel: &v.logLevel, Sinks: &v.sinks,
		Concurrency: &v.concurrency, Workers: &v.workers, Retries: &v.retries,
		Rate: &v.rate, Headers: &v.headers, From: &v.from, Until: &v.until,
		StallTimeout: &v.stall, AllowMissingHash: &v.allowMissingHash,
	}
}

func TestApply(t *testing.T) {
	file := &File{
		Source: "http://file/", Sinks: []string{"fs:/file"}, State: "/f/state.db", Report: "/f/r.json",
		Concurrency: ptr(2), Workers: ptr(3), Rate: ptr(1.5), Retries: ptr(0),
		Headers: map[string]string{"Authorization": "Bearer file", "X-File": "1"},
		From:    "2024-01-01", Until: "2024-02-01", SpoolDir: "/f/spool",
		StallTimeout: ptr(Duration(time.Minute)), AllowMissingHash: ptr(true),
		Progress: "none", LogLevel: "debug",
	}
	fromFile := vars{
		source: "http://file/", sinks: []string{"fs:/file"}, state: "/f/state.db", report: "/f/r.json",
		concurrency: 2, workers: 3, rate: 1.5, retries: 0,
		headers: []string{"Authorization: Bearer file", "X-File: 1"},
		from:    "2024-01-01", until: "2024-02-01", spoolDir: "/f/spool",
		stall: time.Minute, allowMissingHash: true, progress: "none", logLevel: "debug",
	}
	every := func(string) bool { return true }
	onFlags := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, m := range names {
				if n == m {
					return true
				}
			}
			return false
		}
	}

	tests := []struct {
		name    string
		file    *File
		flagSet func(string) bool
		cmdline func(*vars) // what the flags set
		want    func() vars
	}{
		{"no flags: the file wins", file, nil, nil, func() vars { return fromFile }},
		{"nil file: nothing changes", nil, nil, nil, defaults},
		{"empty file: defaults stay", &File{}, nil, nil, defaults},
		{"every flag set: the file is ignored except headers", file, every,
			func(v *vars) { v.headers = []string{"X-Flag: 2"} },
			func() vars {
				v := defaults()
				v.headers = []string{"Authorization: Bearer file", "X-File: 1", "X-Flag: 2"}
				return v
			}},
		{"some flags set", file, onFlags("source", "workers", "stall-timeout", "allow-missing-hash", "sink", "spool-dir", "log-level"),
			func(v *vars) {
				v.source, v.workers, v.stall, v.sinks = "http://flag/", 7, 0, []string{"fs:/flag"}
				v.spoolDir, v.logLevel = "/flag/spool", "warn"
			},
			func() vars {
				v := fromFile
				v.source, v.workers, v.stall, v.allowMissingHash = "http://flag/", 7, 0, false
				v.sinks, v.spoolDir, v.logLevel = []string{"fs:/flag"}, "/flag/spool", "warn"
				return v
			}},
		{"a zero from the file overrides a default", &File{Retries: ptr(0), AllowMissingHash: ptr(false)}, nil, nil,
			func() vars { v := defaults(); v.retries = 0; return v }},
		{"header flag overrides the same name, ignoring case", file, onFlags("header"),
			func(v *vars) { v.headers = []string{"authorization: Bearer flag"} },
			func() vars {
				v := fromFile
				v.headers = []string{"X-File: 1", "authorization: Bearer flag"}
				return v
			}},
		{"header flag given but targets already hold values from elsewhere", &File{Headers: map[string]string{"A": "1"}}, nil,
			func(v *vars) { v.headers = []string{"Stale: x"} },
			func() vars { v := defaults(); v.headers = []string{"A: 1"}; return v }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := defaults()
			if tt.cmdline != nil {
				tt.cmdline(&got)
			}
			tt.file.Apply(got.targets(), tt.flagSet)
			if want := tt.want(); !reflect.DeepEqual(got, want) {
				t.Errorf("after Apply:\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestApplyNilTargetsAndCopies(t *testing.T) {
	f := &File{Source: "http://file/", Sinks: []string{"fs:/a"}, Workers: ptr(2)}
	var source string
	var sinks []string
	f.Apply(Targets{Source: &source, Sinks: &sinks}, nil) // other targets nil: skipped
	if source != "http://file/" || !reflect.DeepEqual(sinks, []string{"fs:/a"}) {
		t.Fatalf("source %q sinks %q", source, sinks)
	}
	sinks[0] = "changed"
	if f.Sinks[0] != "fs:/a" {
		t.Error("Apply shared the sinks slice with the File")
	}
}
