package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source/protocols"
)

// raw is a config file as yaml.v3 decodes it, before any check. Its yaml
// tags are the one list of the keys a file may hold: knownKeys reads them,
// and the decoder refuses every other key (KnownFields). Each value stays a
// node, so that a check names the line and column of a bad value.
type raw struct {
	Source            yaml.Node `yaml:"source"`
	CapabilityListURL yaml.Node `yaml:"capability_list_url"`
	Sink              yaml.Node `yaml:"sink"`
	Sinks             yaml.Node `yaml:"sinks"`
	State             yaml.Node `yaml:"state"`
	Report            yaml.Node `yaml:"report"`
	SpoolDir          yaml.Node `yaml:"spool_dir"`
	Concurrency       yaml.Node `yaml:"concurrency"`
	Workers           yaml.Node `yaml:"workers"`
	Retries           yaml.Node `yaml:"retries"`
	RangeParts        yaml.Node `yaml:"range_parts"`
	MaxDocumentSize   yaml.Node `yaml:"max_document_size"`
	Rate              yaml.Node `yaml:"rate"`
	Headers           yaml.Node `yaml:"headers"`
	From              yaml.Node `yaml:"from"`
	Until             yaml.Node `yaml:"until"`
	StallTimeout      yaml.Node `yaml:"stall_timeout"`
	LowSpeedLimit     yaml.Node `yaml:"low_speed_limit"`
	LowSpeedTime      yaml.Node `yaml:"low_speed_time"`
	HeaderOrigins     yaml.Node `yaml:"header_origins"`
	MaxPages          yaml.Node `yaml:"max_pages"`
	WaitLock          yaml.Node `yaml:"wait_lock"`
	AllowMissingHash  yaml.Node `yaml:"allow_missing_hash"`
	RequireHash       yaml.Node `yaml:"require_hash"`
	Verify            yaml.Node `yaml:"verify"`
	AllowPrivate      yaml.Node `yaml:"allow_private_addresses"`
	Progress          yaml.Node `yaml:"progress"`
	LogLevel          yaml.Node `yaml:"log_level"`
	Quiet             yaml.Node `yaml:"quiet"`
	BwLimit           yaml.Node `yaml:"bwlimit"`
	MaxDelete         yaml.Node `yaml:"max_delete"`
	Validate          yaml.Node `yaml:"validate"`
	DeleteUnlisted    yaml.Node `yaml:"delete_unlisted"`
	Spread            yaml.Node `yaml:"spread"`
	Schema            yaml.Node `yaml:"schema"`
	LogFormat         yaml.Node `yaml:"log_format"`
	Prefer            yaml.Node `yaml:"prefer"`
	Set               yaml.Node `yaml:"set"`
	Protocol          yaml.Node `yaml:"protocol"`
	MetadataPrefix    yaml.Node `yaml:"metadata_prefix"`
}

// fields returns r's values with their keys, in the order of the struct.
func (r *raw) fields() []keyed {
	v := reflect.ValueOf(r).Elem()
	out := make([]keyed, 0, v.NumField())
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		out = append(out, keyed{key: key, value: v.Field(i).Addr().Interface().(*yaml.Node)})
	}
	return out
}

// knownKeys returns every key a config file may hold, sorted.
func knownKeys() []string {
	var keys []string
	for _, f := range (&raw{}).fields() {
		keys = append(keys, f.key)
	}
	slices.Sort(keys)
	return keys
}

// keyed is a value with the key naming it.
type keyed struct {
	key   string
	value *yaml.Node
}

// decoder checks the values of one config file into a File.
type decoder struct {
	name string
	base string // directory relative paths are resolved against
	f    *File
	keys map[string]*yaml.Node // each key given → its node, for positions
}

func newDecoder(name string) *decoder {
	return &decoder{name: name, base: filepath.Dir(name), f: &File{}, keys: map[string]*yaml.Node{}}
}

// errorf returns an *Error at n's position.
func (d *decoder) errorf(n *yaml.Node, format string, a ...any) error {
	return &Error{File: d.name, Line: n.Line, Column: n.Column, Err: fmt.Errorf(format, a...)}
}

// decode checks the shape of the parsed document doc, decodes data (its
// text) into a raw with unknown keys refused, and checks every value.
func (d *decoder) decode(doc *yaml.Node, data []byte) error {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return d.errorf(root, "want a mapping of keys to values, not %s", describe(root))
	}
	if err := d.checkKeys(root, knownKeys()); err != nil {
		return err
	}
	var r raw
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		return fmt.Errorf("%s: %w", d.name, err)
	}
	return d.values(&r)
}

// values checks every value of r into the File.
func (d *decoder) values(r *raw) error {
	for _, f := range r.fields() {
		v := resolve(f.value)
		if !given(v) {
			continue
		}
		if err := d.value(f.key, v); err != nil {
			return err
		}
	}
	if err := d.source(keyed{"source", resolve(&r.Source)}, keyed{"capability_list_url", resolve(&r.CapabilityListURL)}); err != nil {
		return err
	}
	if err := d.sinks(keyed{"sink", resolve(&r.Sink)}, keyed{"sinks", resolve(&r.Sinks)}); err != nil {
		return err
	}
	return d.period(resolve(&r.From), resolve(&r.Until))
}

// checkKeys refuses, at their line and column, what the struct decoder
// would refuse with a message naming only the line: a key that is not a
// string, a merge key, a duplicate key and an unknown one (with the
// closest known key suggested).
func (d *decoder) checkKeys(root *yaml.Node, known []string) error {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := resolve(root.Content[i])
		switch first, dup := d.keys[k.Value]; {
		case k.Kind != yaml.ScalarNode:
			return d.errorf(k, "a key must be a string, not %s", describe(k))
		case k.Tag == "!!merge":
			return d.errorf(k, "merge keys (<<) are not supported")
		case dup:
			return d.errorf(k, "duplicate key %q (first at line %d)", k.Value, first.Line)
		case !slices.Contains(known, k.Value):
			return d.unknown(k, known)
		}
		d.keys[k.Value] = k
	}
	return nil
}

// value checks the value of one key (not null) into the File. source,
// capability_list_url, sink and sinks are read together by source and
// sinks.
func (d *decoder) value(key string, v *yaml.Node) error {
	var err error
	switch key {
	case "source":
		d.f.Source, err = d.str(key, v)
	case "state":
		d.f.State, err = d.store(key, v)
	case "report":
		d.f.Report, err = d.path(key, v)
	case "spool_dir":
		d.f.SpoolDir, err = d.path(key, v)
	case "concurrency":
		d.f.Concurrency, err = d.integer(key, v, 1)
	case "workers":
		d.f.Workers, err = d.integer(key, v, 1)
	case "retries":
		d.f.Retries, err = d.integer(key, v, 0)
	case "range_parts":
		d.f.RangeParts, err = d.integer(key, v, 1)
	case "max_document_size":
		d.f.MaxDocumentSize, err = d.documentSize(key, v)
	case "rate":
		d.f.Rate, err = d.rate(key, v)
	case "headers":
		d.f.Headers, err = d.headers(key, v)
	case "from":
		d.f.From, err = d.datetime(key, v)
	case "until":
		d.f.Until, err = d.datetime(key, v)
	case "stall_timeout":
		d.f.StallTimeout, err = d.duration(key, v)
	case "low_speed_limit":
		var n *int
		if n, err = d.integer(key, v, 0); n != nil {
			d.f.LowSpeedLimit = new(int64(*n))
		}
	case "low_speed_time":
		d.f.LowSpeedTime, err = d.duration(key, v)
	case "header_origins":
		d.f.HeaderOrigins, err = d.origins(key, v)
	case "max_pages":
		d.f.MaxPages, err = d.integer(key, v, 1)
	case "wait_lock":
		d.f.WaitLock, err = d.duration(key, v)
	case "allow_missing_hash":
		d.f.AllowMissingHash, err = d.boolean(key, v)
	case "require_hash":
		d.f.RequireHash, err = d.boolean(key, v)
	case "verify":
		d.f.Verify, err = d.oneOf(key, v, "strongest", "all")
	case "allow_private_addresses":
		d.f.AllowPrivateAddresses, err = d.boolean(key, v)
	case "progress":
		d.f.Progress, err = d.oneOf(key, v, "auto", "bars", "log", "none")
	case "log_level":
		d.f.LogLevel, err = d.oneOf(key, v, "debug", "info", "warn", "error")
	case "quiet":
		d.f.Quiet, err = d.boolean(key, v)
	case "bwlimit":
		d.f.BwLimit, err = d.str(key, v)
	case "max_delete":
		d.f.MaxDelete, err = d.str(key, v)
	case "validate":
		d.f.Validate, err = d.boolean(key, v)
	case "delete_unlisted":
		d.f.DeleteUnlisted, err = d.boolean(key, v)
	case "spread":
		d.f.Spread, err = d.boolean(key, v)
	case "schema":
		d.f.Schemas, err = d.schemas(key, v)
	case "log_format":
		d.f.LogFormat, err = d.oneOf(key, v, "text", "json")
	case "prefer":
		d.f.Prefer, err = d.oneOf(key, v, "dump", "list")
	case "set":
		d.f.Sets, err = d.strs(key, v)
	case "protocol":
		d.f.Protocol, err = d.oneOf(key, v, append([]string{"auto"}, protocols.All().Names()...)...)
	case "metadata_prefix":
		d.f.MetadataPrefix, err = d.str(key, v)
	}
	return err
}

// given reports whether a value was given (present and not null).
func given(v *yaml.Node) bool { return v.Kind != 0 && !isNull(v) }

// unknown reports an unknown key, suggesting the closest known one.
func (d *decoder) unknown(k *yaml.Node, known []string) error {
	if s := suggest(k.Value, known); s != "" {
		return d.errorf(k, "unknown key %q (did you mean %q?)", k.Value, s)
	}
	return d.errorf(k, "unknown key %q (known keys: %s)", k.Value, strings.Join(known, ", "))
}

// source reconciles source with its alias capability_list_url.
func (d *decoder) source(source, capURL keyed) error {
	if !given(capURL.value) {
		return nil
	}
	u, err := d.str(capURL.key, capURL.value)
	if err != nil {
		return err
	}
	if given(source.value) && d.f.Source != u {
		return d.errorf(d.keys[capURL.key], "capability_list_url and source (line %d) differ: give one", d.keys[source.key].Line)
	}
	d.f.Source = u
	return nil
}

// sinks reads sink or sinks (not both): one spec or a list of them.
func (d *decoder) sinks(sink, sinks keyed) error {
	kv := sinks
	switch {
	case given(sink.value) && given(sinks.value):
		later, other := d.keys[sink.key], d.keys[sinks.key]
		if other.Line > later.Line || (other.Line == later.Line && other.Column > later.Column) {
			later = other
		}
		return d.errorf(later, "both sink and sinks given: use one")
	case given(sink.value):
		kv = sink
	case !given(sinks.value):
		return nil
	}
	key := kv.key
	var specs []string
	switch v := kv.value; v.Kind {
	case yaml.ScalarNode:
		s, err := d.sinkSpec(key, v)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	case yaml.SequenceNode:
		if len(v.Content) == 0 {
			return d.errorf(v, "%s: empty list: want at least one sink", key)
		}
		for i, item := range v.Content {
			s, err := d.sinkSpec(fmt.Sprintf("%s[%d]", key, i), resolve(item))
			if err != nil {
				return err
			}
			specs = append(specs, s)
		}
	default:
		return d.errorf(v, "%s: want a sink spec or a list of them, not %s", key, describe(v))
	}
	d.f.Sinks = specs
	return nil
}

// sinkSpec reads one sink spec, resolving the directory of an fs: sink.
func (d *decoder) sinkSpec(key string, v *yaml.Node) (string, error) {
	s, err := d.str(key, v)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", d.errorf(v, "%s: empty sink spec", key)
	}
	return JoinSink(s, d.base), nil
}

// JoinSink returns the sink spec s with the relative directory of an fs:
// sink joined to base (any ?options kept); other specs, and a directory
// that begins with an environment variable (${NAME}), unchanged.
func JoinSink(s, base string) string {
	dir, ok := strings.CutPrefix(s, "fs:")
	if !ok {
		return s
	}
	dir, query, hasQuery := strings.Cut(dir, "?")
	if dir == "" || filepath.IsAbs(dir) || strings.HasPrefix(dir, "${") {
		return s // a directory named by the environment is resolved at harvest time
	}
	out := "fs:" + filepath.Join(base, dir)
	if hasQuery {
		out += "?" + query
	}
	return out
}

// period checks that from is not after until.
func (d *decoder) period(from, until *yaml.Node) error {
	if !given(from) || !given(until) {
		return nil
	}
	f, _, errF := d.f.FromTime()
	u, _, errU := d.f.UntilTime()
	if err := errors.Join(errF, errU); err != nil {
		return d.errorf(until, "%w", err)
	}
	if f.After(u) {
		return d.errorf(until, "until %s is before from %s (line %d)", d.f.Until, d.f.From, d.keys["from"].Line)
	}
	return nil
}

// str reads a scalar as a string, whatever YAML type it resolves to (so
// `state: 2024` is the file "2024").
func (d *decoder) str(key string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", d.errorf(v, "%s: want a string, not %s", key, describe(v))
	}
	return v.Value, nil
}

// strs reads a string, or a list of them.
func (d *decoder) strs(key string, v *yaml.Node) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		s, err := d.str(key, v)
		return []string{s}, err
	}
	out := make([]string, 0, len(v.Content))
	for i, item := range v.Content {
		s, err := d.str(fmt.Sprintf("%s[%d]", key, i), resolve(item))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// schemas reads "TYPE=FILE.xsd" items (one, or a list), resolving a
// relative FILE.
func (d *decoder) schemas(key string, v *yaml.Node) ([]string, error) {
	items, err := d.strs(key, v)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		typ, file, ok := strings.Cut(it, "=")
		if !ok || typ == "" || file == "" {
			return nil, d.errorf(v, "%s: want TYPE=FILE.xsd, not %q", key, it)
		}
		if !filepath.IsAbs(file) {
			items[i] = typ + "=" + filepath.Join(d.base, file)
		}
	}
	return items, nil
}

// origins reads http(s) origins (one, or a list).
func (d *decoder) origins(key string, v *yaml.Node) ([]string, error) {
	items, err := d.strs(key, v)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if err := CheckOrigin(it); err != nil {
			return nil, d.errorf(v, "%s: %v", key, err)
		}
	}
	return items, nil
}

// CheckOrigin checks that s names an origin: an http(s) URL with a host.
func CheckOrigin(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%q: want an origin such as https://cdn.example.org", trunc(s))
	}
	return nil
}

// path reads a file or directory path, resolving a relative one.
func (d *decoder) path(key string, v *yaml.Node) (string, error) {
	s, err := d.str(key, v)
	if err != nil || s == "" || filepath.IsAbs(s) {
		return s, err
	}
	return filepath.Join(d.base, s), nil
}

// store reads the state store: a PostgreSQL URL (postgres://… or
// postgresql://…) as it is, else a file's path as path does.
func (d *decoder) store(key string, v *yaml.Node) (string, error) {
	s, err := d.str(key, v)
	if err == nil && (strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")) {
		return s, nil
	}
	return d.path(key, v)
}

func (d *decoder) integer(key string, v *yaml.Node, least int) (*int, error) {
	var n int
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&n) != nil {
		return nil, d.errorf(v, "%s: want an integer, not %s", key, describe(v))
	}
	if n < 0 {
		return nil, d.errorf(v, "%s: %d is negative", key, n)
	}
	if n < least {
		return nil, d.errorf(v, "%s: %d: want at least %d", key, n, least)
	}
	return &n, nil
}

// documentSize reads a byte count of at least 1, or -1 for no cap.
func (d *decoder) documentSize(key string, v *yaml.Node) (*int64, error) {
	var n int64
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&n) != nil {
		return nil, d.errorf(v, "%s: want a number of bytes (or -1: no cap), not %s", key, describe(v))
	}
	if n == 0 || n < -1 {
		return nil, d.errorf(v, "%s: %d: want a number of bytes of at least 1, or -1 for no cap", key, n)
	}
	return &n, nil
}

func (d *decoder) rate(key string, v *yaml.Node) (*float64, error) {
	var r float64
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") || v.Decode(&r) != nil ||
		math.IsNaN(r) || math.IsInf(r, 0) {
		return nil, d.errorf(v, "%s: want a number, not %s", key, describe(v))
	}
	if r < 0 {
		return nil, d.errorf(v, "%s: %v is negative", key, r)
	}
	return &r, nil
}

func (d *decoder) boolean(key string, v *yaml.Node) (*bool, error) {
	var b bool
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
		return nil, d.errorf(v, "%s: want true or false, not %s", key, describe(v))
	}
	return &b, nil
}

// duration reads a Go duration string or a number of seconds.
func (d *decoder) duration(key string, v *yaml.Node) (*Duration, error) {
	bad := func() error {
		return d.errorf(v, "%s: want a duration such as 30s or 2m, or a number of seconds, not %s", key, describe(v))
	}
	if v.Kind != yaml.ScalarNode {
		return nil, bad()
	}
	var dur time.Duration
	switch v.Tag {
	case "!!int", "!!float":
		var secs float64
		if v.Decode(&secs) != nil || math.IsNaN(secs) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
			return nil, bad()
		}
		dur = time.Duration(secs * float64(time.Second))
	case "!!str":
		var err error
		if dur, err = time.ParseDuration(v.Value); err != nil {
			return nil, bad()
		}
	default:
		return nil, bad()
	}
	if dur < 0 {
		return nil, d.errorf(v, "%s: %v is negative", key, dur)
	}
	out := Duration(dur)
	return &out, nil
}

func (d *decoder) datetime(key string, v *yaml.Node) (string, error) {
	s, err := d.str(key, v)
	if err != nil {
		return "", err
	}
	if _, err := manifest.ParseDatetime(s); err != nil {
		return "", d.errorf(v, "%s: %w", key, err)
	}
	return s, nil
}

func (d *decoder) oneOf(key string, v *yaml.Node, allowed ...string) (string, error) {
	s, err := d.str(key, v)
	if err != nil {
		return "", err
	}
	for _, a := range allowed {
		if s == a {
			return s, nil
		}
	}
	return "", d.errorf(v, "%s: want one of %s, not %s", key, strings.Join(allowed, ", "), describe(v))
}

// headers reads a mapping of names to values, or a list of "Name: value"
// strings. No message ever includes a value.
func (d *decoder) headers(key string, v *yaml.Node) (map[string]string, error) {
	out := map[string]string{}
	lines := map[string]int{} // lower-cased name → line
	add := func(at *yaml.Node, name, value string) error {
		if !isToken(name) {
			return d.errorf(at, "%s: %q is not a valid header name", key, trunc(name))
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return d.errorf(at, "%s: the value of %s holds a line break or NUL", key, name)
		}
		lower := strings.ToLower(name)
		if first, dup := lines[lower]; dup {
			return d.errorf(at, "%s: duplicate header %s (first at line %d)", key, name, first)
		}
		lines[lower] = at.Line
		out[name] = value
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
			if k.Kind != yaml.ScalarNode {
				return nil, d.errorf(k, "%s: a header name must be a string, not %s", key, describe(k))
			}
			if val.Kind != yaml.ScalarNode {
				return nil, d.errorf(val, "%s: the value of %s must be a string", key, trunc(k.Value))
			}
			value := val.Value
			if isNull(val) {
				value = ""
			}
			if err := add(k, k.Value, value); err != nil {
				return nil, err
			}
		}
	case yaml.SequenceNode:
		for i, item := range v.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return nil, d.errorf(item, "%s[%d]: want a string 'Name: value', not %s", key, i, kindName(item))
			}
			name, value, ok := strings.Cut(item.Value, ":")
			if !ok {
				return nil, d.errorf(item, "%s[%d]: want 'Name: value'", key, i)
			}
			if err := add(item, strings.TrimSpace(name), strings.TrimSpace(value)); err != nil {
				return nil, err
			}
		}
	default:
		return nil, d.errorf(v, "%s: want a mapping of names to values or a list of 'Name: value', not %s", key, kindName(v))
	}
	return out, nil
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe names a node for a message: a scalar's value (truncated), or its kind.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf("%q", trunc(n.Value))
	}
	return kindName(n)
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return "a scalar"
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	default:
		return "a YAML node of another kind"
	}
}

// trunc shortens s for a message.
func trunc(s string) string {
	const max = 40
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}

// isToken reports whether s is an HTTP token (RFC 9110), as header names are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// suggest returns the candidate closest to key by edit distance (ignoring
// case, with '-' taken as '_'), or "" when none is close.
func suggest(key string, candidates []string) string {
	norm := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	best, bestDist := "", 3 // suggest only within distance 2
	for _, c := range candidates {
		dist := editDistance(norm, c)
		if dist < bestDist && dist < len([]rune(norm)) {
			best, bestDist = c, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
