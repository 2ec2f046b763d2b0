package resourcesync

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"time"
)

// nameSets gives every set a unique short name. describedby[i] is the
// describedby link of set i, "" if none. For each set the first of these
// that no other set shares is taken: the last path segment of its
// Capability List without extension, that of its describedby link, its
// folder, its whole path without extension; failing all, the first with a
// numeric suffix.
func nameSets(sets []Set, describedby []string) {
	candidate := func(i, kind int) string {
		cl := sets[i].CapabilityList
		if cl == "" {
			if kind == 0 {
				return "default"
			}
			return ""
		}
		switch kind {
		case 0:
			return stem(lastSegment(cl))
		case 1:
			if describedby[i] == "" {
				return ""
			}
			return stem(lastSegment(describedby[i]))
		case 2:
			return lastSegment(parentOfURL(cl))
		default:
			u, err := url.Parse(cl)
			if err != nil {
				return ""
			}
			p := strings.Trim(u.Path, "/")
			if ext := path.Ext(p); ext != "" && ext != p {
				p = strings.TrimSuffix(p, ext)
			}
			if p == "" {
				return u.Host
			}
			return p
		}
	}
	used := map[string]bool{}
	for kind := range 4 {
		count := map[string]int{}
		for i := range sets {
			if sets[i].Name == "" {
				count[candidate(i, kind)]++
			}
		}
		for i := range sets {
			if n := candidate(i, kind); sets[i].Name == "" && n != "" && count[n] == 1 && !used[n] {
				sets[i].Name = n
				used[n] = true
			}
		}
	}
	for i := range sets {
		if sets[i].Name != "" {
			continue
		}
		base := candidate(i, 0)
		if base == "" {
			base = "set"
		}
		for k := 2; ; k++ {
			if n := fmt.Sprintf("%s-%d", base, k); !used[n] {
				sets[i].Name = n
				used[n] = true
				break
			}
		}
	}
}

// lastSegment returns the last non-empty path segment of a URL, unescaped.
func lastSegment(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	return segs[len(segs)-1]
}

// parentOfURL returns the URL of the folder holding raw's last segment.
func parentOfURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	p := strings.Trim(u.Path, "/")
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	u.Path = "/" + p[:i]
	u.RawPath = ""
	return u.String()
}

// stem strips a file name's extension (not a leading dot).
func stem(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name[:i]
	}
	return name
}

// WriteText writes the source as an indented tree, one line per document:
// kind, URL, then index, open, at, from, until and error when they apply;
// the warnings follow.
func (s *Source) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "source %s found=%s\n", s.Start, s.Found)
	indent := ""
	if s.Description != "" {
		fmt.Fprintf(&b, "description %s\n", s.Description)
		indent = "  "
	}
	for _, st := range s.Sets {
		fmt.Fprintf(&b, "%scapabilitylist %s set=%s", indent, orNone(st.CapabilityList, "-"), st.Name)
		if st.Err != "" {
			fmt.Fprintf(&b, " error=%q", st.Err)
		}
		b.WriteByte('\n')
		writeCapabilities(&b, indent+"  ", st.Capabilities)
	}
	for _, msg := range s.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", msg)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCapabilities(b *strings.Builder, indent string, cs []Capability) {
	for _, c := range cs {
		fmt.Fprintf(b, "%s%s %s", indent, orNone(string(c.Kind), "unknown"), c.URL)
		if c.Index {
			b.WriteString(" index")
		}
		if c.Open {
			b.WriteString(" open")
		}
		for _, t := range []struct {
			name string
			t    time.Time
		}{{"at", c.At}, {"from", c.From}, {"until", c.Until}} {
			if !t.t.IsZero() {
				fmt.Fprintf(b, " %s=%s", t.name, t.t.UTC().Format(time.RFC3339Nano))
			}
		}
		if c.Err != "" {
			fmt.Fprintf(b, " error=%q", c.Err)
		}
		b.WriteByte('\n')
		writeCapabilities(b, indent+"  ", c.Children)
	}
}

// WriteJSON writes the source as indented JSON with the snake_case field
// names of the struct tags; empty lists are written as [], absent times
// and errors are left out.
func (s *Source) WriteJSON(w io.Writer) error {
	out := *s
	out.Sets = make([]Set, len(s.Sets))
	for i, st := range s.Sets {
		if st.Capabilities == nil {
			st.Capabilities = []Capability{}
		}
		out.Sets[i] = st
	}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(&out)
}
