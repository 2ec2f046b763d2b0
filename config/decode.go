package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxSize is the largest config file Decode and Load accept, in bytes.
const MaxSize = 1 << 20

// A registry file is capped by its sites (MaxSites), and by MaxSitesSize
// bytes only as a guard: 100,000 sites of a few lines each take about 20
// MB, and their parsed form some 300 MB of memory.
const (
	MaxSites     = 200_000
	MaxSitesSize = 64 << 20
)

// Error is a problem at a place in a file. Err is the problem; Line and
// Column are 1-based.
type Error struct {
	File   string
	Line   int
	Column int
	Err    error
}

// Error returns "file:line:column: problem", or "file: problem" for a
// value given elsewhere than in a file (a flag's: no line).
func (e *Error) Error() string {
	if e.Line == 0 && e.File != "" {
		return e.File + ": " + e.Err.Error()
	}
	at := fmt.Sprintf("%d:%d", e.Line, e.Column)
	if e.Column == 0 { // a line, not a place on it
		at = strconv.Itoa(e.Line)
	}
	if e.File == "" {
		return at + ": " + e.Err.Error()
	}
	return e.File + ":" + at + ": " + e.Err.Error()
}

// Unwrap returns the problem.
func (e *Error) Unwrap() error { return e.Err }

// Context is where a file's values are decoded: the file's name (errors
// name it), the directory its relative paths are resolved against, and
// the positions of its keys.
type Context struct {
	// File is the file's name; Base the directory relative paths in it
	// are resolved against.
	File, Base string
	keys       map[string]*yaml.Node // each key given → its key node
}

// NewContext is the context of the file named name: its relative paths
// resolve against its directory.
func NewContext(name string) *Context {
	return &Context{File: name, Base: filepath.Dir(name), keys: map[string]*yaml.Node{}}
}

// FlagContext is the context of values what gives (a command's flags),
// their relative paths resolved against dir.
func FlagContext(what, dir string) *Context {
	return &Context{File: what, Base: dir, keys: map[string]*yaml.Node{}}
}

// Errorf returns an *Error at n's position.
func (c *Context) Errorf(n *yaml.Node, format string, a ...any) error {
	return &Error{File: c.File, Line: n.Line, Column: n.Column, Err: fmt.Errorf(format, a...)}
}

// Line is the line key was given at (0: not given).
func (c *Context) Line(key string) int {
	if n, ok := c.keys[key]; ok {
		return n.Line
	}
	return 0
}

// str reads a scalar as a string, whatever YAML type it resolves to.
func (c *Context) str(key string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", c.Errorf(n, "%s: want a string, not %s", key, describe(n))
	}
	return n.Value, nil
}

// path resolves a relative path against the file's directory.
func (c *Context) path(s string) string {
	if s == "" || filepath.IsAbs(s) {
		return s
	}
	return filepath.Join(c.Base, s)
}

// headers reads a mapping of names to values, or a list of "Name: value"
// strings. No message ever includes a value.
func (c *Context) headers(key string, v *yaml.Node) (map[string]string, error) {
	out := map[string]string{}
	lines := map[string]int{} // lower-cased name → line
	add := func(at *yaml.Node, name, value string) error {
		if !IsHeaderName(name) {
			return c.Errorf(at, "%s: %q is not a valid header name", key, trunc(name))
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return c.Errorf(at, "%s: the value of %s holds a line break or NUL", key, name)
		}
		lower := strings.ToLower(name)
		if first, dup := lines[lower]; dup {
			return c.Errorf(at, "%s: duplicate header %s (first at line %d)", key, name, first)
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
				return nil, c.Errorf(k, "%s: a header name must be a string, not %s", key, describe(k))
			}
			if val.Kind != yaml.ScalarNode {
				return nil, c.Errorf(val, "%s: the value of %s must be a string", key, trunc(k.Value))
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
				return nil, c.Errorf(item, "%s[%d]: want a string 'Name: value', not %s", key, i, kindName(item))
			}
			name, value, ok := strings.Cut(item.Value, ":")
			if !ok {
				return nil, c.Errorf(item, "%s[%d]: want 'Name: value'", key, i)
			}
			if err := add(item, strings.TrimSpace(name), strings.TrimSpace(value)); err != nil {
				return nil, err
			}
		}
	default:
		return nil, c.Errorf(v, "%s: want a mapping of names to values or a list of 'Name: value', not %s", key, kindName(v))
	}
	return out, nil
}

// checkKeys refuses, at their line and column, a key that is not a
// string, a merge key, a duplicate key, one of elsewhere (a setting not
// taken here, said so, not taken for a misspelling) and an unknown one
// (with the closest known key suggested); it records where each key is.
func (c *Context) checkKeys(root *yaml.Node, known, elsewhere []string) error {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := resolve(root.Content[i])
		switch first, dup := c.keys[k.Value]; {
		case k.Kind != yaml.ScalarNode:
			return c.Errorf(k, "a key must be a string, not %s", describe(k))
		case k.Tag == "!!merge":
			return c.Errorf(k, "merge keys (<<) are not supported")
		case dup:
			return c.Errorf(k, "duplicate key %q (first at line %d)", k.Value, first.Line)
		case !slices.Contains(known, k.Value) && slices.Contains(elsewhere, k.Value):
			return c.Errorf(k, "key %q is a setting not taken here (known keys: %s)", k.Value, strings.Join(known, ", "))
		case !slices.Contains(known, k.Value):
			if s := Suggest(k.Value, known); s != "" {
				return c.Errorf(k, "unknown key %q (did you mean %q?)", k.Value, s)
			}
			return c.Errorf(k, "unknown key %q (known keys: %s)", k.Value, strings.Join(known, ", "))
		}
		c.keys[k.Value] = k
	}
	return nil
}

// DecodeMapping checks the mapping root (keys of the settings given where,
// and the extra keys its caller reads itself) and sets, in the first of
// targets that holds it, each setting's variable from its value. A setting
// for which skip says so — its flag was given on the command line — keeps
// its value, but a Merger's, which the file's merges under. A key whose
// value is null counts as absent; two keys of one setting (a key and its
// alias) must agree. Each setting's Check, if any, runs once every value
// is set.
func (t Table) DecodeMapping(c *Context, root *yaml.Node, where Where, extra []string, skip func(*Setting) bool, targets ...any) error {
	root = resolve(root)
	if isNull(root) || root.Kind == 0 {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return c.Errorf(root, "want a mapping of keys to values, not %s", describe(root))
	}
	if err := c.checkKeys(root, append(t.keys(where), extra...), append(t.keys(AsFlag|InFile|InSite|OfRun), ProcessKeys()...)); err != nil {
		return err
	}
	given := map[*Setting]*yaml.Node{} // setting → the key it was first given by
	var order []*Setting
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := resolve(root.Content[i]), resolve(root.Content[i+1])
		s, ok := t.Lookup(k.Value)
		if !ok || s.Where&where == 0 || isNull(v) {
			continue
		}
		if first, twice := given[s]; twice {
			if !sameValue(valueOf(root, first.Value), v) {
				return c.Errorf(k, "both %s and %s given (line %d), and they differ: give one", first.Value, k.Value, first.Line)
			}
			continue
		}
		given[s] = k
		order = append(order, s)
		val := s.bind(targets)
		if val == nil {
			continue
		}
		if skip != nil && skip(s) {
			if m, ok := val.(Merger); ok {
				if err := m.DecodeUnder(c, k.Value, v); err != nil {
					return err
				}
			}
			continue
		}
		if err := val.Decode(c, k.Value, v); err != nil {
			return err
		}
	}
	for _, s := range order {
		if s.Check != nil {
			if err := s.Check(c, resolve(valueOf(root, given[s].Value)), targets); err != nil {
				return err
			}
		}
	}
	return nil
}

// valueOf is the value of key in the mapping root.
func valueOf(root *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if resolve(root.Content[i]).Value == key {
			return root.Content[i+1]
		}
	}
	return nil
}

// sameValue reports whether a and b give one value: equal scalars, or
// lists or mappings of the same values in the same order.
func sameValue(a, b *yaml.Node) bool {
	return sameNode(a, b, map[[2]*yaml.Node]bool{})
}

// sameNode is sameValue remembering the pairs compared (done): aliases
// make a tree a graph, whose paths may be exponentially many.
func sameNode(a, b *yaml.Node, done map[[2]*yaml.Node]bool) bool {
	a, b = resolve(a), resolve(b)
	if a == nil || b == nil || a.Kind != b.Kind {
		return false
	}
	if a == b {
		return true
	}
	if a.Kind == yaml.ScalarNode {
		return a.Value == b.Value
	}
	if (a.Kind != yaml.SequenceNode && a.Kind != yaml.MappingNode) || len(a.Content) != len(b.Content) {
		return false
	}
	pair := [2]*yaml.Node{a, b}
	if same, ok := done[pair]; ok {
		return same
	}
	same := true
	for i := range a.Content {
		if !sameNode(a.Content[i], b.Content[i], done) {
			same = false
			break
		}
	}
	done[pair] = same
	return same
}

// Doc is a config file (--config) read and parsed: Apply sets the values
// it gives.
type Doc struct {
	ctx  *Context
	root *yaml.Node // nil for an empty file
}

// Load reads the config file at path (see Decode).
func Load(path string) (*Doc, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer fh.Close()
	return Decode(fh, path)
}

// Decode reads a config file from r: one YAML document of at most MaxSize
// bytes, a mapping of keys to values. name is the file's path: it prefixes
// error messages, and relative paths in the file are resolved against
// filepath.Dir(name). A syntax error wraps the YAML parser's error; a
// second document is an *Error. The keys and values are checked by Apply.
func Decode(r io.Reader, name string) (*Doc, error) {
	doc, err := readDocument(r, name, MaxSize)
	if err != nil {
		return nil, err
	}
	d := &Doc{ctx: NewContext(name)}
	if doc != nil && len(doc.Content) > 0 {
		d.root = doc.Content[0]
	}
	return d, nil
}

// Apply strictly decodes the file's keys, the settings of t that a config
// file may give (InFile), into targets, as DecodeMapping does: an unknown
// key (with the closest known key suggested), a duplicate key and a value
// of the wrong type or out of range are *Errors naming the file, line and
// column. A setting whose flag was given (skip) keeps the flag's value:
// flags override the file. A nil Doc does nothing.
func (d *Doc) Apply(t Table, skip func(*Setting) bool, targets ...any) error {
	if d == nil || d.root == nil {
		return nil
	}
	return t.DecodeMapping(d.ctx, d.root, InFile, nil, skip, targets...)
}

// readDocument reads one YAML document of at most max bytes from r,
// parsed; nil for an empty input. A second document is an *Error.
func readDocument(r io.Reader, name string, max int64) (*yaml.Node, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, max)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(name, data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{File: name, Line: next.Line, Column: next.Column,
			Err: errors.New("a second YAML document: want exactly one")}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(name, data, err)
	}
	return &doc, nil
}

// syntaxError is the *Error of YAML text data that does not parse (err,
// the parser's), at the line where the text goes wrong. The parser names
// the line of the construct it was in (the start of a long list, say), not
// that of the fault; the fault's is the last line of the shortest start
// of the text that fails as the whole does, found by bisection (a few
// parses, only when the text is wrong).
func syntaxError(name string, data []byte, err error) error {
	m := regexp.MustCompile(`^yaml: line (\d+): (.*)$`).FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	reported, _ := strconv.Atoi(m[1])
	lines := bytes.Split(data, []byte("\n"))
	failsAt := func(n int) bool { // the first n lines fail as data does
		var node yaml.Node
		err := yaml.Unmarshal(bytes.Join(lines[:n], []byte("\n")), &node)
		return err != nil && strings.HasSuffix(err.Error(), ": "+m[2])
	}
	from := min(max(reported, 1), len(lines))
	line := from + sort.Search(len(lines)-from+1, func(i int) bool { return failsAt(from + i) })
	if line > len(lines) {
		line = reported
	}
	return &Error{File: name, Line: line, Err: errors.New(m[2])}
}

// given reports whether a value was given (present and not null).
func given(v *yaml.Node) bool { return v != nil && v.Kind != 0 && !isNull(v) }

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
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

// IsHeaderName reports whether s is an HTTP token (RFC 9110), as header
// names are.
func IsHeaderName(s string) bool {
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

// Suggest returns the candidate closest to key by edit distance (ignoring
// case, with '-' taken as '_'), or "" when none is close: what a misspelt
// key or flag was meant to be.
func Suggest(key string, candidates []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	best, bestDist := "", 3 // suggest only within distance 2
	for _, c := range candidates {
		dist := editDistance(norm(key), norm(c))
		if dist < bestDist && dist < len([]rune(key)) {
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
