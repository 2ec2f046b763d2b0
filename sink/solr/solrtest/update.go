package solrtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// knownUpdateParam reports whether the fake knows an /update parameter.
func knownUpdateParam(k string) bool {
	switch k {
	case "wt", "commit", "softCommit", "commitWithin", "overwrite", "waitSearcher", "openSearcher":
		return true
	}
	return false
}

// update answers /update: it applies the commands of the body in order,
// stopping at the first bad one (those before it stay applied, as in Solr),
// then commits when asked to.
func (s *Server) update(r *http.Request, rec *Request) (map[string]any, error) {
	if r.Method != http.MethodPost {
		return nil, &solrError{code: http.StatusMethodNotAllowed, msg: "fake Solr: /update takes POST"}
	}
	q := r.URL.Query()
	for k := range q {
		if !knownUpdateParam(k) {
			return nil, badRequest("fake Solr: unknown /update parameter %q", k)
		}
	}
	if err := checkWT(q); err != nil {
		return nil, err
	}
	commit, err := boolParam(q.Get("commit"), "commit")
	if err != nil {
		return nil, err
	}
	soft, err := boolParam(q.Get("softCommit"), "softCommit")
	if err != nil {
		return nil, err
	}
	within := time.Duration(-1)
	if v := q.Get("commitWithin"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil {
			return nil, badRequest("For input string: %q", v)
		}
		within = time.Duration(ms) * time.Millisecond
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, badRequest("reading the request body: %v", err)
	}
	if len(body) > 0 {
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "text/json") {
			return nil, badRequest("Unsupported ContentType: %s  Not in: [application/xml, application/csv, application/json, text/json, text/csv, text/xml, application/javabin]", ct)
		}
	}
	u := &updater{s: s, within: within, rec: rec}
	err = u.run(body)
	if u.changed {
		s.commitWithinLocked(within)
	}
	if err != nil {
		return nil, err
	}
	if commit || soft || u.commit {
		s.commitLocked()
		rec.Commit = true
	}
	return map[string]any{}, nil
}

func boolParam(v, name string) (bool, error) {
	switch v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, badRequest("invalid boolean value: %s for parameter %s", v, name)
}

// updater applies the commands of one update request.
type updater struct {
	s       *Server
	within  time.Duration
	rec     *Request
	changed bool // an add or delete took effect
	commit  bool // a commit command was given
}

func (u *updater) run(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return badRequest("Cannot parse provided JSON: %v", err)
	}
	switch tok {
	case json.Delim('['):
		for dec.More() {
			var doc map[string]any
			if err := dec.Decode(&doc); err != nil || doc == nil {
				return badRequest("Expected JSON Object but got something else in the array of documents: %v", err)
			}
			if err := u.add(doc, -1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return badRequest("Cannot parse provided JSON: %v", err)
		}
	case json.Delim('{'):
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return badRequest("Cannot parse provided JSON: %v", err)
			}
			var val any
			if err := dec.Decode(&val); err != nil {
				return badRequest("Cannot parse provided JSON: %v", err)
			}
			if err := u.command(key.(string), val); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return badRequest("Cannot parse provided JSON: %v", err)
		}
	default:
		return badRequest("Cannot parse provided JSON: expected an array of documents or an object of commands")
	}
	if dec.More() {
		return badRequest("Cannot parse provided JSON: data after the top-level value")
	}
	return nil
}

// command applies one command of the object form.
func (u *updater) command(name string, val any) error {
	switch name {
	case "add":
		adds, ok := val.([]any)
		if !ok {
			adds = []any{val}
		}
		for _, a := range adds {
			obj, ok := a.(map[string]any)
			if !ok {
				return badRequest("Expected JSON Object for 'add' but got %T", a)
			}
			within := time.Duration(-1)
			var doc map[string]any
			for k, v := range obj {
				switch k {
				case "doc":
					if doc, ok = v.(map[string]any); !ok {
						return badRequest("Expected JSON Object for 'doc' but got %T", v)
					}
				case "commitWithin":
					ms, err := number(v)
					if err != nil {
						return badRequest("commitWithin: %v", err)
					}
					within = time.Duration(ms) * time.Millisecond
				case "overwrite":
					if _, ok := v.(bool); !ok {
						return badRequest("overwrite: want a boolean")
					}
				default:
					return badRequest("Unknown key '%s' in 'add'", k)
				}
			}
			if doc == nil {
				return badRequest("Missing solr document in 'add'")
			}
			if err := u.add(doc, within); err != nil {
				return err
			}
		}
	case "delete":
		return u.delete(val)
	case "commit", "optimize":
		if _, ok := val.(map[string]any); !ok {
			return badRequest("Expected JSON Object for '%s' but got %T", name, val)
		}
		u.commit = true
	default:
		return badRequest("Unknown command '%s'", name)
	}
	return nil
}

// add applies one document.
func (u *updater) add(raw map[string]any, within time.Duration) error {
	doc, err := u.s.schema.normalize(raw)
	if err != nil {
		return err
	}
	id := doc["id"].(string)
	if msg, bad := u.s.reject[id]; bad {
		return docError(id, "Error adding field 'text' msg=%s", msg)
	}
	u.s.live[id] = doc
	u.changed = true
	u.rec.Adds++
	u.s.commitWithinLocked(within)
	return nil
}

// delete applies a delete command: an id, an array of ids, or an object
// with "id" or "query" (only "*:*").
func (u *updater) delete(val any) error {
	switch v := val.(type) {
	case string:
		u.deleteID(v)
	case []any:
		for _, x := range v {
			id, ok := x.(string)
			if !ok {
				return badRequest("Expected string ids in 'delete' but got %T", x)
			}
			u.deleteID(id)
		}
	case map[string]any:
		within := time.Duration(-1)
		var id, query *string
		for k, x := range v {
			switch k {
			case "id":
				s, ok := x.(string)
				if !ok {
					return badRequest("Expected a string id in 'delete' but got %T", x)
				}
				id = &s
			case "query":
				s, ok := x.(string)
				if !ok {
					return badRequest("Expected a string query in 'delete' but got %T", x)
				}
				query = &s
			case "commitWithin":
				ms, err := number(x)
				if err != nil {
					return badRequest("commitWithin: %v", err)
				}
				within = time.Duration(ms) * time.Millisecond
			case "_version_":
			default:
				return badRequest("Unknown key '%s' in 'delete'", k)
			}
		}
		switch {
		case id != nil && query == nil:
			u.deleteID(*id)
		case query != nil && id == nil && *query == "*:*":
			for k := range u.s.live {
				delete(u.s.live, k)
			}
			u.changed = true
		case query != nil && id == nil:
			return badRequest("fake Solr: delete by query supports only *:*, not %q", *query)
		default:
			return badRequest("'delete' wants one of 'id' or 'query'")
		}
		u.s.commitWithinLocked(within)
	default:
		return badRequest("Unexpected value for 'delete': %T", val)
	}
	return nil
}

func (u *updater) deleteID(id string) {
	delete(u.s.live, id)
	u.changed = true
	u.rec.Deletes++
}

func number(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("want a number, got %T", v)
	}
	return n.Int64()
}
