package config

import (
	"slices"
	"strings"
	"time"
)

// Targets are the variables the command line's flags are bound to. A nil
// field is skipped, so a command need only fill in the flags it has. The
// comment on each field names its flag.
type Targets struct {
	Source           *string        // source
	Sinks            *[]string      // sink
	State            *string        // state
	Report           *string        // report
	Concurrency      *int           // concurrency
	Workers          *int           // workers
	Rate             *float64       // rate
	Retries          *int           // retries
	RangeParts       *int           // range-parts
	MaxDocumentSize  *int64         // max-document-size
	Headers          *[]string      // header, each "Name: value"
	From             *string        // from
	Until            *string        // until
	SpoolDir         *string        // spool-dir
	StallTimeout     *time.Duration // stall-timeout
	LowSpeedLimit    *int64         // low-speed-limit
	LowSpeedTime     *time.Duration // low-speed-time
	HeaderOrigins    *[]string      // header-origin
	MaxPages         *int           // max-pages
	WaitLock         *time.Duration // wait-lock
	AllowMissingHash *bool          // allow-missing-hash
	RequireHash      *bool          // require-hash
	Verify           *string        // verify
	AllowPrivate     *bool          // allow-private-addresses
	Prefer           *string        // prefer
	Sets             *[]string      // set
	Protocol         *string        // protocol
	MetadataPrefix   *string        // metadata-prefix
	Progress         *string        // progress
	LogLevel         *string        // log-level
	Quiet            *bool          // quiet
	BwLimit          *string        // bwlimit
	MaxDelete        *string        // max-delete
	Validate         *bool          // validate
	DeleteUnlisted   *bool          // delete-unlisted
	Spread           *bool          // spread
	Schemas          *[]string      // schema, each "TYPE=FILE.xsd"
	LogFormat        *string        // log-format
}

// Apply copies every value set in the file onto the targets whose flag was
// NOT set on the command line: flags override the file. flagSet reports
// whether the named flag (e.g. "spool-dir", "sink", "header") was given on
// the command line; with cobra that is cmd.Flags().Changed. A nil flagSet
// means no flag was given; a nil f does nothing.
//
// Sinks given with --sink replace the file's sinks. Headers merge instead:
// the result is the file's headers (sorted by name) that no --header names,
// followed by the --header values already in *t.Headers, so a --header
// adds to the file's headers and overrides one of the same name, compared
// ignoring case. Slices assigned are copies, never shared with f.
func (f *File) Apply(t Targets, flagSet func(name string) bool) {
	if f == nil {
		return
	}
	if flagSet == nil {
		flagSet = func(string) bool { return false }
	}
	setString(t.Source, f.Source, "source", flagSet)
	setString(t.State, f.State, "state", flagSet)
	setString(t.Report, f.Report, "report", flagSet)
	setString(t.From, f.From, "from", flagSet)
	setString(t.Until, f.Until, "until", flagSet)
	setString(t.SpoolDir, f.SpoolDir, "spool-dir", flagSet)
	setString(t.Progress, f.Progress, "progress", flagSet)
	setString(t.LogLevel, f.LogLevel, "log-level", flagSet)
	setString(t.BwLimit, f.BwLimit, "bwlimit", flagSet)
	setString(t.MaxDelete, f.MaxDelete, "max-delete", flagSet)
	setPtr(t.Quiet, f.Quiet, "quiet", flagSet)
	setString(t.LogFormat, f.LogFormat, "log-format", flagSet)
	setString(t.Prefer, f.Prefer, "prefer", flagSet)
	setString(t.Verify, f.Verify, "verify", flagSet)
	setString(t.Protocol, f.Protocol, "protocol", flagSet)
	setString(t.MetadataPrefix, f.MetadataPrefix, "metadata-prefix", flagSet)
	setPtr(t.Concurrency, f.Concurrency, "concurrency", flagSet)
	setPtr(t.Workers, f.Workers, "workers", flagSet)
	setPtr(t.Retries, f.Retries, "retries", flagSet)
	setPtr(t.RangeParts, f.RangeParts, "range-parts", flagSet)
	setPtr(t.MaxDocumentSize, f.MaxDocumentSize, "max-document-size", flagSet)
	setPtr(t.Rate, f.Rate, "rate", flagSet)
	setPtr(t.AllowMissingHash, f.AllowMissingHash, "allow-missing-hash", flagSet)
	setPtr(t.RequireHash, f.RequireHash, "require-hash", flagSet)
	setPtr(t.AllowPrivate, f.AllowPrivateAddresses, "allow-private-addresses", flagSet)
	if t.StallTimeout != nil && f.StallTimeout != nil && !flagSet("stall-timeout") {
		*t.StallTimeout = time.Duration(*f.StallTimeout)
	}
	setPtr(t.LowSpeedLimit, f.LowSpeedLimit, "low-speed-limit", flagSet)
	if t.LowSpeedTime != nil && f.LowSpeedTime != nil && !flagSet("low-speed-time") {
		*t.LowSpeedTime = time.Duration(*f.LowSpeedTime)
	}
	if t.HeaderOrigins != nil && len(f.HeaderOrigins) > 0 && !flagSet("header-origin") {
		*t.HeaderOrigins = slices.Clone(f.HeaderOrigins)
	}
	setPtr(t.MaxPages, f.MaxPages, "max-pages", flagSet)
	if t.WaitLock != nil && f.WaitLock != nil && !flagSet("wait-lock") {
		*t.WaitLock = time.Duration(*f.WaitLock)
	}
	setPtr(t.Validate, f.Validate, "validate", flagSet)
	setPtr(t.DeleteUnlisted, f.DeleteUnlisted, "delete-unlisted", flagSet)
	setPtr(t.Spread, f.Spread, "spread", flagSet)
	if t.Schemas != nil && len(f.Schemas) > 0 && !flagSet("schema") {
		*t.Schemas = slices.Clone(f.Schemas)
	}
	if t.Sets != nil && len(f.Sets) > 0 && !flagSet("set") {
		*t.Sets = slices.Clone(f.Sets)
	}
	if t.Sinks != nil && len(f.Sinks) > 0 && !flagSet("sink") {
		*t.Sinks = slices.Clone(f.Sinks)
	}
	if t.Headers != nil && len(f.Headers) > 0 {
		var fromFlags []string
		if flagSet("header") {
			fromFlags = *t.Headers
		}
		*t.Headers = mergeHeaders(f.Headers, fromFlags)
	}
}

func setString(dst *string, v, flag string, flagSet func(string) bool) {
	if dst != nil && v != "" && !flagSet(flag) {
		*dst = v
	}
}

func setPtr[T any](dst, v *T, flag string, flagSet func(string) bool) {
	if dst != nil && v != nil && !flagSet(flag) {
		*dst = *v
	}
}

// mergeHeaders returns the file's headers not named by a flag header,
// sorted by name, then the flag headers as given.
func mergeHeaders(file map[string]string, flags []string) []string {
	named := map[string]bool{}
	for _, h := range flags {
		name, _, _ := strings.Cut(h, ":")
		named[strings.ToLower(strings.TrimSpace(name))] = true
	}
	names := make([]string, 0, len(file))
	for name := range file {
		if !named[strings.ToLower(name)] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]string, 0, len(names)+len(flags))
	for _, name := range names {
		out = append(out, name+": "+file[name])
	}
	return append(out, flags...)
}
