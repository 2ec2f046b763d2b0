package config

import (
	"encoding"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// lookupEnv is os.LookupEnv.
var lookupEnv = os.LookupEnv

// The kinds of Value a setting's variable may be. Each reads a flag's
// text and a file's node by the same rules — but for a file's YAML, which
// also reads a number as YAML writes one (0x10, 1_000) and a duration as
// its seconds, and a boolean flag, which takes what the flag package
// takes (1, t) — and says what is wrong with a bad one.

// Str is a string: any scalar of a file (so `state: 2024` is "2024").
func Str(p *string) Value { return &strValue{p: p} }

// Path is a file or directory path: a relative one in a file is resolved
// against the file's directory.
func Path(p *string) Value { return &strValue{p: p, path: true} }

// StatePath is a state store: a PostgreSQL URL as it is, else a Path.
func StatePath(p *string) Value { return &strValue{p: p, path: true, postgres: true} }

// OneOf is a string among allowed.
func OneOf(p *string, allowed ...string) Value { return &strValue{p: p, allowed: allowed} }

// Checked is a string that, in a file, check must accept (its error says
// why not, and must not repeat a secret the value holds). A flag's value
// is left to the job's own check: the flag library's message would repeat
// the value whole.
func Checked(p *string, check func(string) error) Value { return &strValue{p: p, check: check} }

type strValue struct {
	p              *string
	path, postgres bool
	allowed        []string
	check          func(string) error
}

func (v *strValue) String() string { return *v.p }
func (v *strValue) Type() string   { return "string" }

func (v *strValue) Set(s string) error {
	if len(v.allowed) > 0 && !slices.Contains(v.allowed, s) {
		return fmt.Errorf("want one of %s", strings.Join(v.allowed, ", "))
	}
	*v.p = s
	return nil
}

func (v *strValue) Decode(c *Context, key string, n *yaml.Node) error {
	s, err := c.str(key, n)
	if err != nil {
		return err
	}
	switch {
	case len(v.allowed) > 0 && !slices.Contains(v.allowed, s):
		return c.Errorf(n, "%s: want one of %s, not %s", key, strings.Join(v.allowed, ", "), describe(n))
	case v.check != nil:
		if err := v.check(s); err != nil {
			return c.Errorf(n, "%s: %w", key, err)
		}
	case v.postgres && (strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")):
	case v.path:
		s = c.path(s)
	}
	*v.p = s
	return nil
}

func (v *strValue) Encode() *yaml.Node { return scalar("!!str", *v.p) }

// Entry is the entry key of the map *m: a string checked by check (nil:
// any), its default def when the map holds none.
func Entry(m *map[string]string, key, def string, check func(string) error) Value {
	return &entryValue{m: m, key: key, def: def, check: check}
}

type entryValue struct {
	m        *map[string]string
	key, def string
	check    func(string) error
}

func (v *entryValue) String() string {
	if s, ok := (*v.m)[v.key]; ok {
		return s
	}
	return v.def
}

func (v *entryValue) Type() string { return "string" }

func (v *entryValue) Set(s string) error {
	if v.check != nil {
		if err := v.check(s); err != nil {
			return err
		}
	}
	if *v.m == nil {
		*v.m = map[string]string{}
	}
	(*v.m)[v.key] = s
	return nil
}

func (v *entryValue) Decode(c *Context, key string, n *yaml.Node) error {
	s, err := c.str(key, n)
	if err != nil {
		return err
	}
	if err := v.Set(s); err != nil {
		return c.Errorf(n, "%s: %v", key, err)
	}
	return nil
}

func (v *entryValue) Encode() *yaml.Node { return scalar("!!str", v.String()) }

// Bool is true or false; its flag may be given alone (--flag).
func Bool(p *bool) Value { return &boolValue{p: p} }

// Is is a switch of a string setting to one of its values (-v: the log
// level debug; -P: the progress display bars): given alone or true, it sets
// *p to want; false leaves *p as it is. Flags only.
func Is(p *string, want string) Value { return &isValue{p: p, want: want} }

type isValue struct {
	p    *string
	want string
}

func (v *isValue) String() string   { return strconv.FormatBool(*v.p == v.want) }
func (v *isValue) Type() string     { return "bool" }
func (v *isValue) IsBoolFlag() bool { return true }

func (v *isValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	if b {
		*v.p = v.want
	}
	return nil
}

func (v *isValue) Decode(c *Context, key string, n *yaml.Node) error {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		return c.Errorf(n, "%s: want true or false, not %s", key, describe(n))
	}
	return v.Set(strconv.FormatBool(b))
}

func (v *isValue) Encode() *yaml.Node { return scalar("!!bool", v.String()) }

// Not is a Bool whose variable holds its negation: a setting true by
// default (--validate, --validate=false) kept in a variable whose zero
// value is that default (NoValidate).
func Not(p *bool) Value { return &boolValue{p: p, not: true} }

type boolValue struct {
	p   *bool
	not bool
}

func (v *boolValue) String() string   { return strconv.FormatBool(*v.p != v.not) }
func (v *boolValue) Type() string     { return "bool" }
func (v *boolValue) IsBoolFlag() bool { return true }

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*v.p = b != v.not
	return nil
}

func (v *boolValue) Decode(c *Context, key string, n *yaml.Node) error {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		return c.Errorf(n, "%s: want true or false, not %s", key, describe(n))
	}
	*v.p = b != v.not
	return nil
}

func (v *boolValue) Encode() *yaml.Node { return scalar("!!bool", v.String()) }

// Int is an integer of at least least (the message says "is negative" of
// a negative one).
func Int(p *int, least int) Value { return &intValue{p: p, least: least} }

type intValue struct {
	p     *int
	least int
	// then runs after the value is set (see After).
	then func()
}

// After returns v calling then whenever it is set (to note that a setting
// was given).
func After(v Value, then func()) Value {
	if iv, ok := v.(*intValue); ok {
		iv.then = then
	}
	return v
}

func (v *intValue) String() string { return strconv.Itoa(*v.p) }
func (v *intValue) Type() string   { return "int" }

func (v *intValue) check(n int) error {
	switch {
	case n < 0 && v.least >= 0:
		return fmt.Errorf("%d is negative", n)
	case n < v.least:
		return fmt.Errorf("%d: want at least %d", n, v.least)
	}
	return nil
}

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want an integer")
	}
	if err := v.check(n); err != nil {
		return err
	}
	*v.p = n
	if v.then != nil {
		v.then()
	}
	return nil
}

func (v *intValue) Decode(c *Context, key string, n *yaml.Node) error {
	i64, ok := intOf(n)
	i := int(i64)
	if !ok || int64(i) != i64 {
		return c.Errorf(n, "%s: want an integer, not %s", key, describe(n))
	}
	if err := v.check(i); err != nil {
		return c.Errorf(n, "%s: %v", key, err)
	}
	*v.p = i
	if v.then != nil {
		v.then()
	}
	return nil
}

func (v *intValue) Encode() *yaml.Node { return scalar("!!int", v.String()) }

// Bytes is a number of bytes of at least 1, or -1 for no cap.
func Bytes(p *int64) Value { return &bytesValue{p} }

type bytesValue struct{ p *int64 }

func (v *bytesValue) String() string { return strconv.FormatInt(*v.p, 10) }
func (v *bytesValue) Type() string   { return "bytes" }

func (v *bytesValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 || n < -1 {
		return fmt.Errorf("want a number of bytes of at least 1, or -1 for no cap")
	}
	*v.p = n
	return nil
}

func (v *bytesValue) Decode(c *Context, key string, n *yaml.Node) error {
	i, ok := intOf(n)
	if !ok {
		return c.Errorf(n, "%s: want a number of bytes (or -1: no cap), not %s", key, describe(n))
	}
	if i == 0 || i < -1 {
		return c.Errorf(n, "%s: %d: want a number of bytes of at least 1, or -1 for no cap", key, i)
	}
	*v.p = i
	return nil
}

func (v *bytesValue) Encode() *yaml.Node { return scalar("!!int", v.String()) }

// intOf reads an integer scalar of a file as the flags read one: in
// decimal, a leading zero too (010 is ten, as YAML 1.2 says, not eight);
// 0x and 0o prefixes as written.
func intOf(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, false
	}
	digits := strings.TrimLeft(n.Value, "+-")
	base := 0
	if digits != "" && strings.Trim(digits, "0123456789") == "" {
		base = 10
	}
	i, err := strconv.ParseInt(n.Value, base, 64)
	return i, err == nil
}

// Count is a count of at least 0 (an int64: bytes a second, say).
func Count(p *int64) Value { return &countValue{p} }

type countValue struct{ p *int64 }

func (v *countValue) String() string { return strconv.FormatInt(*v.p, 10) }
func (v *countValue) Type() string   { return "int" }

func (v *countValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a number, at least 0")
	}
	*v.p = n
	return nil
}

func (v *countValue) Decode(c *Context, key string, n *yaml.Node) error {
	i, ok := intOf(n)
	if !ok {
		return c.Errorf(n, "%s: want an integer, not %s", key, describe(n))
	}
	if i < 0 {
		return c.Errorf(n, "%s: %d is negative", key, i)
	}
	*v.p = i
	return nil
}

func (v *countValue) Encode() *yaml.Node { return scalar("!!int", v.String()) }

// Float is a number of at least 0.
func Float(p *float64) Value { return &floatValue{p} }

type floatValue struct{ p *float64 }

func (v *floatValue) String() string { return strconv.FormatFloat(*v.p, 'g', -1, 64) }
func (v *floatValue) Type() string   { return "float" }

func (v *floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("want a number")
	}
	if f < 0 {
		return fmt.Errorf("%v is negative", f)
	}
	*v.p = f
	return nil
}

func (v *floatValue) Decode(c *Context, key string, n *yaml.Node) error {
	var f float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return c.Errorf(n, "%s: want a number, not %s", key, describe(n))
	}
	if f < 0 {
		return c.Errorf(n, "%s: %v is negative", key, f)
	}
	*v.p = f
	return nil
}

// Encode writes the value as YAML reads it back: a whole number plainly
// (2, not !!float 2), which Decode takes as well.
func (v *floatValue) Encode() *yaml.Node {
	s := v.String()
	if strings.ContainsAny(s, ".eEnN") {
		return scalar("!!float", s)
	}
	return scalar("!!int", s)
}

// Duration is a Go duration ("30s", "2m"); a file may also give a number
// of seconds.
func Duration(p *time.Duration) Value { return &durationValue{p} }

type durationValue struct{ p *time.Duration }

func (v *durationValue) String() string { return v.p.String() }
func (v *durationValue) Type() string   { return "duration" }

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 30s or 2m")
	}
	if d < 0 {
		return fmt.Errorf("%v is negative", d)
	}
	*v.p = d
	return nil
}

func (v *durationValue) Decode(c *Context, key string, n *yaml.Node) error {
	bad := func() error {
		return c.Errorf(n, "%s: want a duration such as 30s or 2m, or a number of seconds, not %s", key, describe(n))
	}
	if n.Kind != yaml.ScalarNode {
		return bad()
	}
	var d time.Duration
	switch n.Tag {
	case "!!int", "!!float":
		var secs float64
		// float64(math.MaxInt64) is 2⁶³, one past the largest Duration.
		if n.Decode(&secs) != nil || math.IsNaN(secs) || math.Abs(secs*float64(time.Second)) >= math.MaxInt64 {
			return bad()
		}
		d = time.Duration(secs * float64(time.Second))
	case "!!str":
		var err error
		if d, err = time.ParseDuration(n.Value); err != nil {
			return bad()
		}
	default:
		return bad()
	}
	if d < 0 {
		return c.Errorf(n, "%s: %v is negative", key, d)
	}
	*v.p = d
	return nil
}

func (v *durationValue) Encode() *yaml.Node { return scalar("!!str", v.String()) }

// Text is a value of a type that reads itself from text and writes itself
// as text (a bandwidth, a deletion bound); in a file, a scalar.
func Text(p interface {
	encoding.TextUnmarshaler
	fmt.Stringer
}) Value {
	return &textValue{p}
}

type textValue struct {
	p interface {
		encoding.TextUnmarshaler
		fmt.Stringer
	}
}

func (v *textValue) String() string     { return v.p.String() }
func (v *textValue) Type() string       { return "string" }
func (v *textValue) Set(s string) error { return v.p.UnmarshalText([]byte(s)) }

func (v *textValue) Decode(c *Context, key string, n *yaml.Node) error {
	s, err := c.str(key, n)
	if err != nil {
		return err
	}
	if err := v.p.UnmarshalText([]byte(s)); err != nil {
		return c.Errorf(n, "%s: %v", key, err)
	}
	return nil
}

func (v *textValue) Encode() *yaml.Node { return scalar("!!str", v.String()) }

// Strings is a list of strings: a repeated flag; in a file, a string or a
// list of them. A flag given replaces what the file said.
func Strings(p *[]string) Value { return &listValue{p: p} }

// Sinks is a list of sink specs: a relative fs: directory in a file is
// resolved against the file's directory (JoinSink).
func Sinks(p *[]string) Value { return &listValue{p: p, sinks: true} }

// Schemas is a list of TYPE=FILE.xsd, a relative FILE in a file resolved
// against the file's directory.
func Schemas(p *[]string) Value { return &listValue{p: p, schemas: true} }

// Origins is a list of http(s) origins (CheckOrigin).
func Origins(p *[]string) Value { return &listValue{p: p, origins: true} }

type listValue struct {
	p                       *[]string
	sinks, schemas, origins bool
	set                     bool // a flag replaced the default
}

func (v *listValue) String() string {
	if len(*v.p) == 0 {
		return "[]"
	}
	return "[" + strings.Join(*v.p, ",") + "]"
}

func (v *listValue) Type() string { return "stringArray" }

func (v *listValue) Set(s string) error {
	if err := v.check(s); err != nil {
		return err
	}
	if !v.set {
		*v.p, v.set = nil, true
	}
	*v.p = append(*v.p, s)
	return nil
}

func (v *listValue) check(s string) error {
	switch {
	case v.schemas:
		if typ, file, ok := strings.Cut(s, "="); !ok || typ == "" || file == "" {
			return fmt.Errorf("want TYPE=FILE.xsd, not %q", s)
		}
	case v.origins:
		return CheckOrigin(s)
	}
	return nil
}

func (v *listValue) Decode(c *Context, key string, n *yaml.Node) error {
	var items []string
	switch {
	case n.Kind == yaml.SequenceNode:
		if v.sinks && len(n.Content) == 0 {
			return c.Errorf(n, "%s: empty list: want at least one sink", key)
		}
		for i, item := range n.Content {
			item = resolve(item)
			s, err := c.str(fmt.Sprintf("%s[%d]", key, i), item)
			if err != nil {
				return err
			}
			if s, err = v.item(c, fmt.Sprintf("%s[%d]", key, i), item, s); err != nil {
				return err
			}
			items = append(items, s)
		}
	case v.sinks && n.Kind != yaml.ScalarNode:
		return c.Errorf(n, "%s: want a sink spec or a list of them, not %s", key, describe(n))
	default:
		s, err := c.str(key, n)
		if err != nil {
			return err
		}
		if s, err = v.item(c, key, n, s); err != nil {
			return err
		}
		items = []string{s}
	}
	*v.p = items
	return nil
}

// item checks and resolves one item of a file's list.
func (v *listValue) item(c *Context, key string, n *yaml.Node, s string) (string, error) {
	switch {
	case v.sinks:
		if s == "" {
			return "", c.Errorf(n, "%s: empty sink spec", key)
		}
		return JoinSink(s, c.Base), nil
	case v.schemas:
		typ, file, ok := strings.Cut(s, "=")
		if !ok || typ == "" || file == "" {
			return "", c.Errorf(n, "%s: want TYPE=FILE.xsd, not %q", key, s)
		}
		return typ + "=" + c.path(file), nil
	case v.origins:
		if err := CheckOrigin(s); err != nil {
			return "", c.Errorf(n, "%s: %v", key, err)
		}
	}
	return s, nil
}

func (v *listValue) Encode() *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, s := range *v.p {
		n.Content = append(n.Content, scalar("!!str", s))
	}
	return n
}

// Headers is a list of "Name: value" headers: a repeated flag; in a file, a
// mapping of names to values or a list of "Name: value". A file's headers
// and the flags' merge: the file's that no flag names (ignoring case),
// then the flags'. No message ever holds a value.
func Headers(p *[]string) Value { return &headersValue{p: p} }

type headersValue struct {
	p   *[]string
	set bool
}

var _ Merger = (*headersValue)(nil)

func (v *headersValue) String() string {
	if len(*v.p) == 0 {
		return "[]"
	}
	names := make([]string, len(*v.p))
	for i, h := range *v.p {
		name, _, _ := strings.Cut(h, ":")
		names[i] = name + ": …"
	}
	return "[" + strings.Join(names, ",") + "]"
}

func (v *headersValue) Type() string { return "stringArray" }

func (v *headersValue) Set(s string) error {
	if !v.set {
		*v.p, v.set = nil, true
	}
	*v.p = append(*v.p, s)
	return nil
}

func (v *headersValue) Decode(c *Context, key string, n *yaml.Node) error {
	file, err := c.headers(key, n)
	if err != nil {
		return err
	}
	*v.p = mergeHeaders(file, nil)
	return nil
}

func (v *headersValue) DecodeUnder(c *Context, key string, n *yaml.Node) error {
	file, err := c.headers(key, n)
	if err != nil {
		return err
	}
	*v.p = mergeHeaders(file, *v.p)
	return nil
}

func (v *headersValue) Encode() *yaml.Node {
	for _, h := range *v.p {
		if !strings.Contains(h, ":") {
			// Not 'Name: value' (a flag's colon forgotten, "Authorization
			// Bearer …"): written as given, in a list, which a file's
			// check refuses without repeating the value.
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for _, h := range *v.p {
				n.Content = append(n.Content, scalar("!!str", h))
			}
			return n
		}
	}
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, h := range *v.p {
		name, value, _ := strings.Cut(h, ":")
		n.Content = append(n.Content, scalar("!!str", strings.TrimSpace(name)), scalar("!!str", strings.TrimSpace(value)))
	}
	return n
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

// CheckOrigin checks that s names an origin: an http(s) URL with a host
// and no credentials.
func CheckOrigin(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%q: want an origin such as https://cdn.example.org", trunc(s))
	}
	return nil
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

// scalar is a scalar node.
func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}
