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

// Site is one site of a registry file (DecodeSites): its name, when it is
// harvested, whom to tell, and the settings its harvests run with — the
// keys of a config file that belong to one harvest (source, sinks,
// protocol, set, metadata_prefix, headers, concurrency, rate, …; not
// state, report, spool_dir, progress, log_level, log_format, wait_lock,
// from or until, which belong to the process). yaml.Marshal of a Site
// writes a mapping DecodeSite reads back as an equal Site.
type Site struct {
	// Name names the site: 1 to 64 letters, digits, '.', '_' or '-'.
	Name string `yaml:"name"`
	// Schedule is when it is harvested, as written ("every 1d", a cron
	// expression); the site package parses it.
	Schedule string `yaml:"schedule"`
	// Contact is the e-mail address its reports go to ("": none).
	Contact string `yaml:"contact,omitempty"`
	// Notify is when its contact hears of a harvest: always, on_error or
	// on_change ("": always).
	Notify string `yaml:"notify,omitempty"`
	// File holds the harvest's settings; Source and Sinks are required.
	File `yaml:",inline"`

	// file and pos locate the site's keys, for Errorf.
	file string
	line int
	pos  map[string]*yaml.Node
}

// siteRaw is a site's mapping as yaml.v3 decodes it (see raw).
type siteRaw struct {
	raw      `yaml:",inline"`
	Name     yaml.Node `yaml:"name"`
	Schedule yaml.Node `yaml:"schedule"`
	Contact  yaml.Node `yaml:"contact"`
	Notify   yaml.Node `yaml:"notify"`
}

// processKeys are the config keys that belong to the process, not to a
// site.
var processKeys = []string{"state", "report", "spool_dir", "progress", "log_level", "log_format", "wait_lock", "from", "until"}

// siteKeys returns the keys a site's mapping may hold, sorted.
func siteKeys() []string {
	keys := []string{"name", "schedule", "contact", "notify"}
	for _, k := range knownKeys() {
		if !slices.Contains(processKeys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

var siteNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Errorf returns an *Error at s's key (at the site's first
// line when the key is absent), naming the site.
func (s *Site) Errorf(key, format string, a ...any) error {
	line, col := s.line, 1
	if n, ok := s.pos[key]; ok {
		line, col = n.Line, n.Column
	}
	return &Error{File: s.file, Line: line, Column: col, Err: fmt.Errorf("site %q: %s", s.Name, fmt.Sprintf(format, a...))}
}

// DecodeSites strictly decodes a registry file from r: a mapping whose one
// key, sites, lists the sites, each a mapping (see Site). name is the
// file's path, as for Decode (errors name it; relative fs: paths are
// resolved against its directory, and made absolute). Besides what Decode refuses, a site
// without a name, source, sinks or schedule, a bad name, contact or
// notify, and a name given twice are *Errors naming the line and the
// site.
func DecodeSites(r io.Reader, name string) ([]Site, error) {
	doc, _, err := readDocument(r, name)
	if err != nil || doc == nil {
		return nil, err
	}
	d := newDecoder(name)
	// A site's mirror is where its file says, whatever directory a later
	// run starts in: relative fs: paths are made absolute.
	base, err := filepath.Abs(d.base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, d.errorf(root, "want a mapping with the key sites, not %s", describe(root))
	}
	if err := d.checkKeys(root, []string{"sites"}); err != nil {
		return nil, err
	}
	list := resolve(root.Content[1])
	if isNull(list) {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, d.errorf(list, "sites: want a list of sites, not %s", describe(list))
	}
	var out []Site
	first := map[string]int{}
	for _, item := range list.Content {
		s, err := decodeSite(resolve(item), name, base)
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

// DecodeSite decodes one site's mapping, as DecodeSites decodes each.
func DecodeSite(data []byte, name string) (*Site, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty", name)
	}
	return decodeSite(resolve(doc.Content[0]), name, filepath.Dir(name))
}

// decodeSite checks one site's mapping n; relative fs: paths are joined to
// base.
func decodeSite(n *yaml.Node, name, base string) (*Site, error) {
	d := newDecoder(name)
	d.base = base
	if n.Kind != yaml.MappingNode {
		return nil, d.errorf(n, "a site: want a mapping of keys to values, not %s", describe(n))
	}
	if err := d.checkKeys(n, siteKeys()); err != nil {
		return nil, namedSite(err, n)
	}
	var r siteRaw
	if err := n.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &Site{file: name, line: n.Line, pos: d.keys}
	var err error
	if given(resolve(&r.Name)) {
		if s.Name, err = d.str("name", resolve(&r.Name)); err != nil {
			return nil, err
		}
	}
	if !siteNameRE.MatchString(s.Name) {
		return nil, s.Errorf("name", "want a name of 1 to 64 letters, digits, '.', '_' or '-'")
	}
	if err := d.values(&r.raw); err != nil {
		return nil, namedSite(err, n)
	}
	s.File = *d.f
	for _, f := range []struct {
		key string
		n   *yaml.Node
		dst *string
	}{{"schedule", &r.Schedule, &s.Schedule}, {"contact", &r.Contact, &s.Contact}, {"notify", &r.Notify, &s.Notify}} {
		if v := resolve(f.n); given(v) {
			if *f.dst, err = d.str(f.key, v); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case s.Source == "":
		return nil, s.Errorf("name", "no source")
	case len(s.Sinks) == 0:
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
