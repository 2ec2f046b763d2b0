// Package config reads rsharvest's YAML configuration file (--config FILE),
// which can set every sync flag, and merges it with the command line: a flag
// given on the command line always wins over the file.
//
// The file is one YAML mapping; every key is optional:
//
//	source: https://example.org/          # alias: capability_list_url
//	sinks: [fs:./mirror, "s3://bucket/prefix?endpoint=…"]  # alias: sink; a single string is one sink
//	state: rsharvest.db
//	report: run.json
//	concurrency: 4                        # at least 1
//	workers: 8                            # at least 1
//	rate: 10                              # requests per second per host, >= 0
//	retries: 5                            # >= 0
//	headers:                              # or a list: ["Authorization: Bearer …"]
//	  Authorization: Bearer …
//	from: 2024-01-01T00:00:00Z            # W3C datetimes; from must not be after until
//	until: 2024-02-01
//	spool_dir: /var/tmp/rsharvest
//	stall_timeout: 30s                    # a Go duration, or a number of seconds
//	low_speed_limit: 1024                 # bytes a second; a response slower for low_speed_time fails (0: off)
//	low_speed_time: 60s
//	header_origins: [https://cdn.example.org]  # origins besides the source's that headers go to
//	max_pages: 100000                     # OAI-PMH: pages of one list before a run stops it
//	wait_lock: 10m                        # a Go duration, or a number of seconds
//	require_hash: false
//	verify: strongest                     # strongest, all: the digests of an entry checked
//	bwlimit: 10M                          # bytes per second received, all requests (10M, 500k, 2.5MB/s)
//	max_delete: 5%                        # a run deleting more (a count, or a share of those held) deletes nothing
//	delete_unlisted: false                # remove what a harvest list no longer names (else kept, reported)
//	spread: false                         # a site's harvest divided into units any daemon of a shared registry takes
//	validate: false                       # check each document that says its type before storing it
//	schema: [https://eml.ecoinformatics.org/eml-2.2.0=eml.xsd]   # TYPE=FILE.xsd, validated with xmllint
//	quiet: false                          # only warnings and errors, no progress
//	allow_private_addresses: false        # resources may lead to loopback, private, metadata addresses
//	allow_missing_hash: false             # accepted, no effect
//	range_parts: 1                        # at least 1
//	max_document_size: 268435456          # bytes, at least 1; -1: no cap
//	progress: auto                        # auto, bars, log, none
//	log_level: info                       # debug, info, warn, error
//	log_format: text                      # text, json
//	protocol: auto                        # auto, resourcesync, oai-pmh
//	metadata_prefix: oai_dc               # OAI-PMH: the format harvested
//
// Decoding is strict: an unknown key (with the closest known key suggested),
// a duplicate key, a value of the wrong type or out of range, and a second
// YAML document are errors that name the file, line and column. A key whose
// value is null (`key:` or `key: ~`) counts as absent. An empty file, or one
// holding only comments, is an empty configuration.
//
// Relative paths in state, report, spool_dir and in fs: sinks (fs:DIR, with
// any ?options kept) are resolved against the directory of the config file,
// so a config file means the same whatever the working directory; absolute
// paths, other sink kinds and URLs are kept as written. No ~ expansion is
// done.
//
// Header values are credentials: they never appear in error messages.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rsharvest/rsharvest/manifest"
)

// MaxSize is the largest config file Decode and Load accept, in bytes.
const MaxSize = 1 << 20

// File is a decoded config file. A field that is the zero value (empty
// string, nil pointer, nil slice or map) was absent from the file, so a
// caller can tell "set in the file" from "absent". Values were validated
// by Decode: numbers are in range, From and Until are W3C datetimes with
// From not after Until, Progress and LogLevel are known names, and relative
// paths are already resolved against the config file's directory. The yaml
// tags name the keys, so yaml.Marshal of a File writes a config file that
// Decode reads back as an equal File; decoding itself does not use them.
type File struct {
	// Source is the URL to sync from (key source, or capability_list_url).
	Source string `yaml:"source,omitempty"`
	// Sinks are sink specs such as "fs:/abs/mirror" (key sinks, or sink).
	Sinks []string `yaml:"sinks,omitempty"`
	// State is the state store file, or the URL of the PostgreSQL
	// database it is kept in (postgres://…).
	State string `yaml:"state,omitempty"`
	// Report is the JSON report file.
	Report string `yaml:"report,omitempty"`
	// Concurrency is the number of packages processed at once (>= 1).
	Concurrency *int `yaml:"concurrency,omitempty"`
	// Workers is the number of entries verified in parallel (>= 1).
	Workers *int `yaml:"workers,omitempty"`
	// Rate is requests per second per host (>= 0, 0 = unlimited).
	Rate *float64 `yaml:"rate,omitempty"`
	// Retries is the number of retries of a failed request (>= 0).
	Retries *int `yaml:"retries,omitempty"`
	// RangeParts downloads each large package as this many parallel Range
	// requests (>= 1; --range-parts).
	RangeParts *int `yaml:"range_parts,omitempty"`
	// MaxDocumentSize caps the bytes of one ResourceSync document, once
	// decompressed (>= 1, or -1 for no cap; --max-document-size).
	MaxDocumentSize *int64 `yaml:"max_document_size,omitempty"`
	// Headers maps header names, as written, to values. No two names are
	// equal ignoring case.
	Headers map[string]string `yaml:"headers,omitempty"`
	// From and Until bound an incremental sync: W3C datetimes as written.
	// FromTime and UntilTime parse them.
	From  string `yaml:"from,omitempty"`
	Until string `yaml:"until,omitempty"`
	// SpoolDir is the directory for packages being unpacked.
	SpoolDir string `yaml:"spool_dir,omitempty"`
	// StallTimeout cuts a download receiving nothing for this long (>= 0).
	StallTimeout *Duration `yaml:"stall_timeout,omitempty"`
	// LowSpeedLimit and LowSpeedTime cut a response slower than that many
	// bytes a second for that long (--low-speed-limit, --low-speed-time;
	// a limit of 0 turns the cutoff off).
	LowSpeedLimit *int64    `yaml:"low_speed_limit,omitempty"`
	LowSpeedTime  *Duration `yaml:"low_speed_time,omitempty"`
	// HeaderOrigins are origins besides the source's that the headers
	// are sent to (--header-origin).
	HeaderOrigins []string `yaml:"header_origins,omitempty"`
	// MaxPages bounds the pages of one OAI-PMH list (--max-pages).
	MaxPages *int `yaml:"max_pages,omitempty"`
	// WaitLock is how long a run waits for another run to release the
	// state file (>= 0; --wait-lock).
	WaitLock *Duration `yaml:"wait_lock,omitempty"`
	// AllowMissingHash is accepted for compatibility and does nothing:
	// resources without a usable hash are accepted by default.
	AllowMissingHash *bool `yaml:"allow_missing_hash,omitempty"`
	// RequireHash refuses resources that give no md5, sha-1, sha-256 or
	// sha-512 (--require-hash).
	RequireHash *bool `yaml:"require_hash,omitempty"`
	// Verify is "strongest" or "all": which of the digests an entry lists
	// are checked (--verify).
	Verify string `yaml:"verify,omitempty"`
	// AllowPrivateAddresses lifts the address rule: resources, mirrors
	// and redirects may lead to loopback, link-local, private or cloud
	// metadata addresses (--allow-private-addresses).
	AllowPrivateAddresses *bool `yaml:"allow_private_addresses,omitempty"`
	// Progress is the progress display: auto, bars, log or none.
	Progress string `yaml:"progress,omitempty"`
	// Prefer is "dump" or "list" (--prefer).
	Prefer string `yaml:"prefer,omitempty"`
	// Sets name the resource sets to sync (--set, repeatable): one
	// ResourceSync capability list, or OAI-PMH setSpecs, each harvested
	// as a resource set of its own. The file takes a string or a list.
	Sets []string `yaml:"set,omitempty"`
	// Protocol is the source's protocol: auto, resourcesync or oai-pmh
	// (--protocol).
	Protocol string `yaml:"protocol,omitempty"`
	// MetadataPrefix is the OAI-PMH metadata format harvested
	// (--metadata-prefix).
	MetadataPrefix string `yaml:"metadata_prefix,omitempty"`
	// LogLevel is the log level: debug, info, warn or error.
	LogLevel string `yaml:"log_level,omitempty"`
	// Quiet logs only warnings and errors and shows no progress (-q).
	Quiet *bool `yaml:"quiet,omitempty"`
	// BwLimit caps the bytes per second received (--bwlimit: 10M, 500k,
	// 2.5MB/s).
	BwLimit string `yaml:"bwlimit,omitempty"`
	// MaxDelete bounds what one run may delete (--max-delete: 100, 5%).
	MaxDelete string `yaml:"max_delete,omitempty"`
	// Validate checks each document before it is stored (--validate);
	// Schemas are "TYPE=FILE.xsd" to validate a type against (--schema).
	Validate *bool `yaml:"validate,omitempty"`
	// DeleteUnlisted removes what a harvest list no longer names
	// (--delete-unlisted).
	DeleteUnlisted *bool    `yaml:"delete_unlisted,omitempty"`
	Schemas        []string `yaml:"schema,omitempty"`
	// Spread divides a registry site's harvest into units that any daemon
	// sharing the registry executes (--spread).
	Spread *bool `yaml:"spread,omitempty"`
	// LogFormat is the log format: text or json.
	LogFormat string `yaml:"log_format,omitempty"`
}

// Duration is a time.Duration read from YAML as a Go duration string
// ("30s", "2m") or a number of seconds.
type Duration time.Duration

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes d as a duration string ("1m30s"), which Decode reads
// back, so a File encoded with yaml.Marshal decodes to an equal File.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Error is a problem at a place in a config file. Err is the problem;
// Line and Column are 1-based.
type Error struct {
	File   string
	Line   int
	Column int
	Err    error
}

// Error returns "file:line:column: problem".
func (e *Error) Error() string {
	if e.File == "" {
		return fmt.Sprintf("%d:%d: %v", e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("%s:%d:%d: %v", e.File, e.Line, e.Column, e.Err)
}

// Unwrap returns the problem.
func (e *Error) Unwrap() error { return e.Err }

// Load reads and strictly decodes the config file at path (see Decode);
// relative paths in it are resolved against the directory of path.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer fh.Close()
	return Decode(fh, path)
}

// Decode strictly decodes a config file from r. name is the file's path: it
// prefixes error messages, and relative paths in the file are resolved
// against filepath.Dir(name) (so a name without a directory, or "", leaves
// them relative to the working directory). Problems in the content are
// returned as *Error; a syntax error wraps the YAML parser's error. An empty
// input yields an empty File.
func Decode(r io.Reader, name string) (*File, error) {
	doc, data, err := readDocument(r, name)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return &File{}, nil
	}
	d := newDecoder(name)
	if err := d.decode(doc, data); err != nil {
		return nil, err
	}
	return d.f, nil
}

// readDocument reads one YAML document of at most MaxSize bytes from r,
// parsed, with its text; nil for an empty input. A second document is an
// *Error.
func readDocument(r io.Reader, name string) (*yaml.Node, []byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading: %w", name, err)
	}
	if len(data) > MaxSize {
		return nil, nil, fmt.Errorf("%s: larger than %d bytes", name, MaxSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, data, nil
		}
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, nil, &Error{File: name, Line: next.Line, Column: next.Column,
			Err: errors.New("a second YAML document: want exactly one")}
	case !errors.Is(err, io.EOF):
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return &doc, data, nil
}

// FromTime parses From. ok is false, with no error, when From is empty.
func (f *File) FromTime() (t time.Time, ok bool, err error) { return parseTime(f.From) }

// UntilTime parses Until. ok is false, with no error, when Until is empty.
func (f *File) UntilTime() (t time.Time, ok bool, err error) { return parseTime(f.Until) }

func parseTime(s string) (time.Time, bool, error) {
	if s == "" {
		return time.Time{}, false, nil
	}
	t, err := manifest.ParseDatetime(s)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("config: %w", err)
	}
	return t, true, nil
}
