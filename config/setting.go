package config

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// Where says where a setting may be given; a Setting's Where holds one bit
// for each.
type Where uint8

// The places a setting is given.
const (
	// AsFlag: a flag of every command that takes the setting.
	AsFlag Where = 1 << iota
	// InFile: a key of a config file (--config).
	InFile
	// InSite: a key of a site, in a registry file or by sites add/edit.
	InSite
	// OfRun: a flag of the harvest of registry sites (run), laid over each
	// site's own value for that harvest: how a harvest goes (--bwlimit,
	// --retries), not what it harvests (its source, sinks, protocol).
	OfRun
)

// Harvest is where a setting of a harvest may be given: a flag, a config
// file and a site.
const Harvest = AsFlag | InFile | InSite

// Tuning is where a setting of how a harvest goes may be given: where a
// harvest's may, and over a site's for one run (OfRun).
const Tuning = Harvest | OfRun

// ProcessKeys are the file keys of the settings of the process that runs
// harvests (the command's own: its state file, reports, logging), which
// a config file may give and a site may not: a site that gives one is
// told it is not taken there rather than pointed to a look-alike key.
func ProcessKeys() []string {
	return []string{"state", "report", "progress", "wait_lock", "log_level", "log_format", "verbose", "progress_bars", "quiet"}
}

// Setting is one row of the settings table: a setting declared once, from
// which the flags of every command that takes it, the keys of config and
// registry files and the reference in the documentation are made. Its
// value is parsed once, where it is given, into a typed variable of its
// target (see Bind).
type Setting struct {
	// Name is the flag's name ("stall-timeout").
	Name string
	// Key is the key in files ("": Name with '_' for '-').
	Key string
	// Aliases are other keys a file may give it by (an earlier name
	// of the setting, say); giving two that differ is an error.
	Aliases []string
	// Short is the flag's one-letter form ("": none).
	Short string
	// Help is the flag's help, a sentence; the reference shows it too.
	Help string
	// Where says where it may be given.
	Where Where
	// Env names an environment variable whose value, when set, is the
	// setting's default ("": none).
	Env string
	// Shown is the default as the help and the reference say it, when the
	// value's own depends on the machine or the user (the number of CPUs,
	// a home directory): "" shows the value.
	Shown string
	// Bind returns the variable the setting sets in target (a pointer to
	// the struct that holds it), or nil when target holds no such
	// variable: one table serves several targets (a harvest's job, the
	// process's own settings).
	Bind func(target any) Value
	// Check, when set, checks the setting's value given in a file (at n)
	// against the others, once every value is set (until against from).
	Check func(c *Context, n *yaml.Node, targets []any) error
	// Sets names the setting this flag is a shorthand of (-v, verbose:
	// log-level): given, it counts as that one given (see Table.Given).
	Sets string
}

// Given returns what says whether a setting of t was given, changed
// saying which flags were: a setting was given when its own flag was, or
// a flag that is its shorthand (Setting.Sets).
func (t Table) Given(changed func(name string) bool) func(*Setting) bool {
	return func(s *Setting) bool {
		if changed(s.Name) {
			return true
		}
		for i := range t {
			if t[i].Sets == s.Name && changed(t[i].Name) {
				return true
			}
		}
		return false
	}
}

// FileKey is the key s is given by in files.
func (s *Setting) FileKey() string {
	if s.Key != "" {
		return s.Key
	}
	return strings.ReplaceAll(s.Name, "-", "_")
}

// Value is a setting's variable: set from a flag (pflag.Value: Set,
// String, Type) or from a file's node (Decode), and written back as a node
// (Encode).
type Value interface {
	pflag.Value
	// Decode sets the variable from n, the value of the setting's key in
	// a file, reporting a bad value at n through c.
	Decode(c *Context, key string, n *yaml.Node) error
	// Encode is the variable as a file writes it.
	Encode() *yaml.Node
}

// Merger is a Value that a file's value merges into rather than replacing
// when the flag was given too (headers: the file's, but those a flag
// names).
type Merger interface {
	Value
	// DecodeUnder sets the variable to the file's value at n with the
	// variable's current values (the flags') laid over it.
	DecodeUnder(c *Context, key string, n *yaml.Node) error
}

// Table is the settings table.
type Table []Setting

// Lookup returns the setting a file's key names (its key or an alias).
func (t Table) Lookup(key string) (*Setting, bool) {
	for i := range t {
		if t[i].FileKey() == key || slices.Contains(t[i].Aliases, key) {
			return &t[i], true
		}
	}
	return nil, false
}

// Flag returns the setting of flag name.
func (t Table) Flag(name string) (*Setting, bool) {
	for i := range t {
		if t[i].Name == name {
			return &t[i], true
		}
	}
	return nil, false
}

// Without is t without the settings named.
func (t Table) Without(names ...string) Table {
	return slices.DeleteFunc(slices.Clone(t), func(s Setting) bool { return slices.Contains(names, s.Name) })
}

// Only is the settings of t named.
func (t Table) Only(names ...string) Table {
	return slices.DeleteFunc(slices.Clone(t), func(s Setting) bool { return !slices.Contains(names, s.Name) })
}

// keys returns the keys a file may hold of the settings given where,
// aliases included, sorted.
func (t Table) keys(where Where) []string {
	var out []string
	for _, s := range t {
		if s.Where&where != 0 {
			out = append(out, s.FileKey())
			out = append(out, s.Aliases...)
		}
	}
	slices.Sort(out)
	return out
}

// Lay sets in to each setting of t that given reports given, to its value
// in from (two targets of one kind: a job given by flags, a site's job),
// through its file form. It stops at the first value to that refuses it.
func (t Table) Lay(from, to any, given func(*Setting) bool) error {
	for i := range t {
		s := &t[i]
		src, dst := s.Bind(from), s.Bind(to)
		if src == nil || dst == nil || !given(s) {
			continue
		}
		if err := dst.Decode(NewContext("--"+s.Name), s.FileKey(), src.Encode()); err != nil {
			return err
		}
	}
	return nil
}

// bind returns the variable s sets in the first of targets that holds one.
func (s *Setting) bind(targets []any) Value {
	for _, t := range targets {
		if v := s.Bind(t); v != nil {
			return v
		}
	}
	return nil
}

// Register adds to fs the flag of each setting given where (AsFlag, and
// a scope such as InSite when the command takes only a site's settings) that
// one of targets holds, bound to its variable; each flag's default is the
// variable's value now (or the setting's environment variable's, when
// set).
func (t Table) Register(fs *pflag.FlagSet, where Where, targets ...any) {
	for i := range t {
		s := &t[i]
		if s.Where&AsFlag == 0 || s.Where&where != where {
			continue
		}
		v := s.bind(targets)
		if v == nil {
			continue
		}
		if s.Env != "" {
			if e, ok := lookupEnv(s.Env); ok && e != "" { // set and empty is unset
				v.Set(e)
			}
		}
		f := fs.VarPF(v, s.Name, s.Short, s.Help)
		if s.Shown != "" {
			f.DefValue = s.Shown
		}
		if _, ok := v.(interface{ IsBoolFlag() bool }); ok {
			f.NoOptDefVal = "true"
		}
	}
}

// Reference writes the table as a Markdown reference of the settings given
// where: each one's flag, file key, where it may be given, its default
// (the value it has in targets) and its help.
func (t Table) Reference(w io.Writer, where Where, targets ...any) error {
	var b strings.Builder
	b.WriteString("| key | flag | given in | default | meaning |\n|---|---|---|---|---|\n")
	for i := range t {
		s := &t[i]
		if s.Where&where == 0 {
			continue
		}
		def := s.Shown
		if v := s.bind(targets); v != nil && def == "" {
			def = v.String()
		}
		if s.Env != "" {
			def += fmt.Sprintf(" ($%s)", s.Env)
		}
		flag := ""
		if s.Where&AsFlag != 0 {
			flag = "`--" + s.Name + "`"
		}
		var in []string
		for _, p := range []struct {
			w    Where
			name string
		}{{AsFlag, "flag"}, {InFile, "config file"}, {InSite, "site"}, {OfRun, "run (over a site's)"}} {
			if s.Where&p.w != 0 {
				in = append(in, p.name)
			}
		}
		key := "`" + s.FileKey() + "`"
		if s.Where&(InFile|InSite) == 0 {
			key = ""
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", key, flag, strings.Join(in, ", "), cell(def), cell(s.Help))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell escapes s for a Markdown table's cell.
func cell(s string) string {
	if s == "" || s == "[]" {
		return ""
	}
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
