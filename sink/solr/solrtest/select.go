package solrtest

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// cursorTotem starts every cursor mark the fake hands out.
const cursorTotem = "AoE"

// selectDocs answers /select from the visible index.
func (s *Server) selectDocs(r *http.Request) (map[string]any, error) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt != "application/x-www-form-urlencoded" {
			return nil, badRequest("fake Solr: a POST to /select must send a form (application/x-www-form-urlencoded), not %q", mt)
		}
	default:
		return nil, &solrError{code: http.StatusMethodNotAllowed, msg: "fake Solr: /select takes GET or POST"}
	}
	if err := r.ParseForm(); err != nil {
		return nil, badRequest("parsing parameters: %v", err)
	}
	p := r.Form
	if err := checkWT(p); err != nil {
		return nil, err
	}
	if p.Get("q") == "" {
		return nil, badRequest("fake Solr: q is required")
	}
	match, err := s.parseQuery(p.Get("q"), p)
	if err != nil {
		return nil, err
	}
	filters := []func(Doc) bool{match}
	for _, fq := range p["fq"] {
		f, err := s.parseQuery(fq, p)
		if err != nil {
			return nil, err
		}
		filters = append(filters, f)
	}
	rows, err := intParam(p, "rows", 10)
	if err != nil {
		return nil, err
	}
	start, err := intParam(p, "start", 0)
	if err != nil {
		return nil, err
	}
	order, err := s.parseSort(p.Get("sort"))
	if err != nil {
		return nil, err
	}
	fields := parseFL(p["fl"])

	var hits []Doc
	for _, d := range s.visible {
		ok := true
		for _, f := range filters {
			ok = ok && f(d)
		}
		if ok {
			hits = append(hits, d)
		}
	}
	slices.SortFunc(hits, order.compare)
	numFound := len(hits)

	cursor := p.Get("cursorMark")
	var next string
	if cursor != "" {
		if start != 0 {
			return nil, badRequest("Cursor functionality requires start=0")
		}
		if len(order) != 1 || order[0].field != "id" {
			return nil, badRequest("Cursor functionality requires a sort containing a uniqueKey field tie breaker (the fake: exactly id asc or id desc)")
		}
		if cursor != "*" {
			raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(cursor, cursorTotem))
			if !strings.HasPrefix(cursor, cursorTotem) || err != nil {
				return nil, badRequest("Unable to parse 'cursorMark' after totem: value must either be '*' or the 'nextCursorMark' returned by a previous search: %s", cursor)
			}
			after := string(raw)
			i, _ := slices.BinarySearchFunc(hits, after, func(d Doc, id string) int {
				c := strings.Compare(d["id"].(string), id)
				if order[0].desc {
					c = -c
				}
				return c
			})
			for i < len(hits) && hits[i]["id"].(string) == after {
				i++
			}
			hits = hits[i:]
		}
		next = cursor
	} else {
		hits = hits[min(start, len(hits)):]
	}
	hits = hits[:min(rows, len(hits))]
	if cursor != "" && len(hits) > 0 {
		next = cursorTotem + base64.RawURLEncoding.EncodeToString([]byte(hits[len(hits)-1]["id"].(string)))
	}
	docs := make([]map[string]any, 0, len(hits))
	for _, d := range hits {
		out := map[string]any{}
		for k, v := range d {
			if fields == nil || fields[k] {
				out[k] = v
			}
		}
		docs = append(docs, out)
	}
	resp := map[string]any{
		"response": map[string]any{"numFound": numFound, "start": start, "numFoundExact": true, "docs": docs},
	}
	if cursor != "" {
		resp["nextCursorMark"] = next
	}
	return resp, nil
}

// parseQuery understands *:* and the term query parser,
// {!term f=FIELD v=$PARAM} and {!term f=FIELD}VALUE.
func (s *Server) parseQuery(q string, p url.Values) (func(Doc) bool, error) {
	if q == "*:*" {
		return func(Doc) bool { return true }, nil
	}
	rest, ok := strings.CutPrefix(q, "{!term ")
	if !ok {
		return nil, badRequest("fake Solr: unsupported query %q (only *:* and {!term f=FIELD v=$PARAM})", q)
	}
	local, value, ok := strings.Cut(rest, "}")
	if !ok {
		return nil, badRequest("org.apache.solr.search.SyntaxError: Expected '}' in local params of %q", q)
	}
	var field string
	hasV := false
	for _, kv := range strings.Fields(local) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "f":
			field = v
		case "v":
			ref, ok := strings.CutPrefix(v, "$")
			if !ok {
				return nil, badRequest("fake Solr: write v=$PARAM, not a literal value")
			}
			value, hasV = p.Get(ref), true
			if !p.Has(ref) {
				return nil, badRequest("fake Solr: parameter %q, referenced by the query, is missing", ref)
			}
		default:
			return nil, badRequest("fake Solr: unsupported local parameter %q", k)
		}
	}
	if hasV && rest[len(local)+1:] != "" {
		return nil, badRequest("fake Solr: both v= and a value after } in %q", q)
	}
	if _, ok := s.schema[field]; !ok {
		return nil, badRequest("undefined field %s", field)
	}
	return func(d Doc) bool {
		switch v := d[field].(type) {
		case []any:
			for _, x := range v {
				if fmt.Sprint(x) == value {
					return true
				}
			}
			return false
		case nil:
			return false
		default:
			return fmt.Sprint(v) == value
		}
	}, nil
}

func intParam(p url.Values, name string, def int) (int, error) {
	v := p.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("For input string: %q (%s)", v, name)
	}
	return n, nil
}

type sortKey struct {
	field string
	desc  bool
}

type sortOrder []sortKey

// parseSort reads "FIELD asc|desc[, …]" over single-valued fields; an
// empty sort is by id, standing in for Solr's score order.
func (s *Server) parseSort(v string) (sortOrder, error) {
	if strings.TrimSpace(v) == "" {
		return sortOrder{{field: "id"}}, nil
	}
	var order sortOrder
	for clause := range strings.SplitSeq(v, ",") {
		f := strings.Fields(clause)
		if len(f) != 2 || (f[1] != "asc" && f[1] != "desc") {
			return nil, badRequest("Can't determine a Sort Order (asc or desc) in sort spec '%s'", v)
		}
		def, ok := s.schema[f[0]]
		if !ok {
			return nil, badRequest("sort param field can't be found: %s", f[0])
		}
		if def.MultiValued || def.Type == Text || def.Type == Binary {
			return nil, badRequest("can not sort on a field w/o docValues unless it is indexed=true uninvertible=true and the type supports Uninversion: %s", f[0])
		}
		order = append(order, sortKey{field: f[0], desc: f[1] == "desc"})
	}
	return order, nil
}

// compare orders documents; missing values sort last.
func (o sortOrder) compare(a, b Doc) int {
	for _, k := range o {
		c := compareValues(a[k.field], b[k.field])
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func compareValues(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y)
		}
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

// parseFL returns the requested fields, or nil for all of them.
func parseFL(fl []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range fl {
		for f := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if f == "*" {
				return nil
			}
			out[f] = true
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
