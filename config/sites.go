package config

import (
	"errors"
	"fmt"
	"io"
	"net/mail"
	"path/filepath"
	"regexp"
	"slices"

	"gopkg.in/yaml.v3"
)

// Site is one site of a registry: its name, when it is harvested, whom to
// tell, and the settings its harvests run with — the keys of the settings
// table a site may give (InSite: source, sinks, protocol, set, headers,
// concurrency, rate, …; not state, report, spool_dir, progress, logging,
// wait_lock, from or until, which belong to the process). yaml.Marshal of
// a Site writes a mapping DecodeSite reads back as an equal Site.
type Site struct {
	// Name names the site: 1 to 64 letters, digits, '.', '_' or '-'.
	Name string
	// Schedule is when it is harvested, as written ("every 1d", a cron
	// expression); the site package parses it.
	Schedule string
	// Contact is the e-mail address its reports go to ("": none).
	Contact string
	// Notify is when its contact hears of a harvest: always, on_error or
	// on_change ("": always).
	Notify string
	// Metrics says that the site's own series are in /metrics whatever
	// the size of the registry (key metrics: true).
	Metrics bool
	// Settings are the harvest's settings as given: a mapping of keys to
	// values (relative paths resolved), applied to a job with the
	// settings table (Table.DecodeMapping with InSite). Source and sinks
	// are required.
	Settings *yaml.Node

	// file and pos locate the site's keys, for Errorf.
	file string
	line int
	pos  map[string]*yaml.Node
}

// siteKeys are the keys of a site that are not settings of its harvests.
var siteKeys = []string{"name", "schedule", "contact", "notify", "metrics"}

// siteNameRE is a site's name: a name a URL path and a command line take
// as it is (not "." or "..", nor an option's leading "-").
var siteNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)

// Setting returns the value the site gives key, or nil.
func (s *Site) Setting(key string) *yaml.Node {
	if s.Settings == nil {
		return nil
	}
	return resolve(valueOf(s.Settings, key))
}

// Source is the site's source URL, as given.
func (s *Site) Source() string {
	if n := s.Setting("source"); n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

// Sinks are the site's sink specs.
func (s *Site) Sinks() []string {
	n := s.Setting("sinks")
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, item := range n.Content {
		out = append(out, resolve(item).Value)
	}
	return out
}

// Set gives key the value n (nil: removes it), in place of what it had.
func (s *Site) Set(key string, n *yaml.Node) {
	if s.Settings == nil {
		s.Settings = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	c := s.Settings.Content
	for i := 0; i+1 < len(c); i += 2 {
		if resolve(c[i]).Value == key {
			if n == nil {
				s.Settings.Content = append(c[:i:i], c[i+2:]...)
			} else {
				c[i+1] = n
			}
			return
		}
	}
	if n != nil {
		s.Settings.Content = append(c, scalar("!!str", key), n)
	}
}

// MarshalYAML writes the site as a mapping: its name, schedule, contact
// and notification policy, then its settings.
func (s Site) MarshalYAML() (any, error) {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, kv := range [][2]string{{"name", s.Name}, {"schedule", s.Schedule}, {"contact", s.Contact}, {"notify", s.Notify}} {
		if kv[1] != "" || kv[0] == "name" || kv[0] == "schedule" {
			m.Content = append(m.Content, scalar("!!str", kv[0]), scalar("!!str", kv[1]))
		}
	}
	if s.Metrics {
		m.Content = append(m.Content, scalar("!!str", "metrics"), scalar("!!bool", "true"))
	}
	if s.Settings != nil {
		m.Content = append(m.Content, s.Settings.Content...)
	}
	return m, nil
}

// Errorf returns an *Error at s's key (at the site's first line when the
// key is absent), naming the site.
func (s *Site) Errorf(key, format string, a ...any) error {
	line, col := s.line, 1
	if n, ok := s.pos[key]; ok {
		line, col = n.Line, n.Column
	}
	return &Error{File: s.file, Line: line, Column: col, Err: fmt.Errorf("site %q: %s", s.Name, fmt.Sprintf(format, a...))}
}

// DecodeSites strictly decodes a registry file from r: a mapping whose one
// key, sites, lists the sites, each a mapping of a site's keys and the
// settings of t a site may give, each checked by decoding it into the
// targets new gives. name is the file's path, as for Decode (errors name
// it; relative paths are resolved against its directory, and made
// absolute). A file holds at most MaxSites sites. Besides what Decode and
// Table.DecodeMapping refuse, a site
// without a name, source, sinks or schedule, a bad name, contact or
// notify, and a name given twice are *Errors naming the line and the site.
func DecodeSites(r io.Reader, name string, t Table, targets func() []any) ([]Site, error) {
	doc, err := readDocument(r, name, MaxSitesSize)
	if err != nil || doc == nil {
		return nil, err
	}
	c := NewContext(name)
	// A site's mirror is where its file says, whatever directory a later
	// run starts in: relative paths are made absolute.
	base, err := filepath.Abs(c.Base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, c.Errorf(root, "want a mapping with the key sites, not %s", describe(root))
	}
	if err := c.checkKeys(root, []string{"sites"}, nil); err != nil {
		return nil, err
	}
	if len(root.Content) == 0 {
		return nil, nil // {}: no sites
	}
	list := resolve(root.Content[1])
	if isNull(list) {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, c.Errorf(list, "sites: want a list of sites, not %s", describe(list))
	}
	if len(list.Content) > MaxSites {
		return nil, c.Errorf(list, "sites: %d sites, more than %d", len(list.Content), MaxSites)
	}
	var out []Site
	first := map[string]int{}
	for _, item := range list.Content {
		s, err := decodeSite(resolve(item), name, base, t, targets)
		if err != nil {
			return nil, err
		}
		if line, dup := first[s.Name]; dup {
			return nil, s.Errorf("name", "given twice (first at line %d)", line)
		}
		first[s.Name] = s.line
		out = append(out, *s)
	}
	return out, nil
}

// DecodeSite decodes one site's mapping, as DecodeSites decodes each; with
// a nil t, its settings are kept as they are, unchecked (a site the
// registry stored, checked when it was put).
func DecodeSite(data []byte, name string, t Table, targets func() []any) (*Site, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty", name)
	}
	return decodeSite(resolve(doc.Content[0]), name, filepath.Dir(name), t, targets)
}

// decodeSite checks one site's mapping n; relative paths are joined to
// base.
func decodeSite(n *yaml.Node, name, base string, t Table, targets func() []any) (*Site, error) {
	c := NewContext(name)
	c.Base = base
	if n.Kind != yaml.MappingNode {
		return nil, c.Errorf(n, "a site: want a mapping of keys to values, not %s", describe(n))
	}
	s := &Site{file: name, line: n.Line, pos: c.keys, Settings: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}}
	var tgts []any
	if t == nil {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			c.keys[k.Value] = k
		}
	} else {
		tgts = targets()
		if err := t.DecodeMapping(c, n, InSite, siteKeys, nil, tgts...); err != nil {
			return nil, namedSite(err, n)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		var dst *string
		switch k.Value {
		case "name":
			dst = &s.Name
		case "schedule":
			dst = &s.Schedule
		case "contact":
			dst = &s.Contact
		case "notify":
			dst = &s.Notify
		case "metrics":
			if given(v) {
				if err := Bool(&s.Metrics).Decode(c, k.Value, v); err != nil {
					return nil, namedSite(err, n)
				}
			}
			continue
		}
		switch {
		case dst != nil:
			if !given(v) {
				continue
			}
			str, err := c.str(k.Value, v)
			if err != nil {
				return nil, namedSite(err, n)
			}
			*dst = str
		case !given(v):
		case t == nil:
			s.Settings.Content = append(s.Settings.Content, k, v)
		}
	}
	// The values as the job read them, in the table's order: each by its
	// key, its paths resolved (none without a table).
	for i := range t {
		set := &t[i]
		if !givenSetting(n, set) {
			continue
		}
		if val := set.bind(tgts); val != nil {
			s.Settings.Content = append(s.Settings.Content, scalar("!!str", set.FileKey()), val.Encode())
		}
	}
	// A stored site's name was checked when it was put (t == nil): a
	// name taken then is taken now.
	if t != nil && !siteNameRE.MatchString(s.Name) {
		return nil, s.Errorf("name", "want a name of 1 to 64 letters, digits, '.', '_' or '-', beginning with a letter, a digit or '_'")
	}
	switch {
	case s.Source() == "":
		return nil, s.Errorf("name", "no source")
	case len(s.Sinks()) == 0:
		return nil, s.Errorf("name", "no sinks")
	case s.Schedule == "":
		return nil, s.Errorf("name", "no schedule: give schedule: every 1d (2w, 1mo, 12h) or a cron expression; on the command line --every 1d or --cron EXPR")
	}
	if s.Contact != "" {
		if a, err := mail.ParseAddress(s.Contact); err != nil || a.Name != "" {
			return nil, s.Errorf("contact", "want an e-mail address, not %q", s.Contact)
		}
	}
	switch s.Notify {
	case "", "always", "on_error", "on_change":
	default:
		return nil, s.Errorf("notify", "want always, on_error or on_change, not %q", trunc(s.Notify))
	}
	return s, nil
}

// givenSetting reports whether the mapping n gives set a value (by its key
// or an alias).
func givenSetting(n *yaml.Node, set *Setting) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i]).Value
		if (k == set.FileKey() || slices.Contains(set.Aliases, k)) && given(resolve(n.Content[i+1])) {
			return set.Where&InSite != 0
		}
	}
	return false
}

// namedSite makes an *Error of the site mapping n name the site, when n
// gives its name.
func namedSite(err error, n *yaml.Node) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := resolve(n.Content[i]), resolve(n.Content[i+1]); k.Value == "name" && v.Kind == yaml.ScalarNode {
			e.Err = fmt.Errorf("site %q: %w", v.Value, e.Err)
			break
		}
	}
	return err
}
