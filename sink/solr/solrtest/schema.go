package solrtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/sink"
)

// FieldType is the type of a schema field, named after Solr's field types.
type FieldType int

// The field types the fake understands.
const (
	// String is solr.StrField: one untokenized term per value, at most
	// MaxTermBytes bytes of UTF-8.
	String FieldType = iota
	// Long is solr.LongPointField (plong): a JSON integer or a string
	// holding one.
	Long
	// Date is solr.DatePointField (pdate): an ISO 8601 instant in UTC,
	// "2006-01-02T15:04:05Z", optionally with fractional seconds.
	Date
	// Text is solr.TextField (text_general): tokenized text of any length.
	Text
	// Binary is solr.BinaryField: base64 (standard alphabet, padded).
	Binary
)

// MaxTermBytes is Lucene's limit on the UTF-8 length of one indexed term;
// Solr rejects a String value longer than this with a 400.
const MaxTermBytes = 32766

// Field describes one field of a Schema.
type Field struct {
	Type        FieldType
	MultiValued bool
	Required    bool
}

// Schema maps field names to their definitions. The unique key is always
// "id", a required single-valued String. A document with a field that the
// schema does not define is rejected with a 400, as a schema'd core
// (without "add-unknown-fields-to-the-schema") rejects it.
type Schema map[string]Field

// DefaultSchema returns the schema the rsharvest Solr sink writes to, as
// sink/solr documents it.
func DefaultSchema() Schema {
	s := Schema{
		"id":           {Type: String, Required: true},
		"location":     {Type: String},
		"length":       {Type: Long},
		"md5":          {Type: String},
		"sha1":         {Type: String},
		"sha256":       {Type: String},
		"mime":         {Type: String},
		"lastmod":      {Type: Date},
		"links":        {Type: String, MultiValued: true},
		"resource_set": {Type: String},
		"sets":         {Type: String, MultiValued: true},
		"about":        {Type: String, MultiValued: true},
		"text":         {Type: Text},
		"body":         {Type: Binary},
	}
	for _, e := range sink.DCElements {
		s["dc_"+e] = Field{Type: Text, MultiValued: true}
	}
	return s
}

// Doc is a stored document: field name to value. Values are string (String,
// Text, Binary as base64, Date as sent), int64 (Long), or []any of those for
// multi-valued fields.
type Doc map[string]any

// clone returns a shallow copy of d; values are never mutated in place.
func (d Doc) clone() Doc {
	c := make(Doc, len(d))
	for k, v := range d {
		c[k] = v
	}
	return c
}

// docError is a 400 about one document, worded like Solr's.
func docError(id, format string, a ...any) error {
	if id == "" {
		return &solrError{code: 400, msg: fmt.Sprintf(format, a...)}
	}
	return &solrError{code: 400, msg: fmt.Sprintf("ERROR: [doc=%s] ", id) + fmt.Sprintf(format, a...)}
}

// normalize checks a decoded JSON document against the schema and returns
// it with typed values, or a 400 worded as Solr words it.
func (s Schema) normalize(raw map[string]any) (Doc, error) {
	id := ""
	if v, ok := raw["id"].(string); ok {
		id = v
	}
	doc := make(Doc, len(raw))
	for name, v := range raw {
		if v == nil {
			continue // Solr drops null values
		}
		f, ok := s[name]
		if !ok {
			return nil, docError(id, "unknown field '%s'", name)
		}
		vals, isList := v.([]any)
		if !isList {
			vals = []any{v}
		}
		if !f.MultiValued && len(vals) > 1 {
			return nil, docError(id, "multiple values encountered for non multiValued field %s: %v", name, vals)
		}
		out := make([]any, 0, len(vals))
		for _, x := range vals {
			if x == nil {
				continue
			}
			y, problem := convert(f.Type, x)
			if problem != "" {
				return nil, docError(id, "Error adding field '%s'='%s' msg=%s", name, shorten(fmt.Sprint(x)), problem)
			}
			if s, ok := y.(string); ok && f.Type == String && len(s) > MaxTermBytes {
				return nil, docError(id, "Document contains at least one immense term in field=\"%s\" (whose UTF8 encoding is longer than the max length %d)", name, MaxTermBytes)
			}
			out = append(out, y)
		}
		switch {
		case len(out) == 0:
		case f.MultiValued:
			doc[name] = out
		default:
			doc[name] = out[0]
		}
	}
	if _, ok := doc["id"]; !ok {
		return nil, docError("", "Document is missing mandatory uniqueKey field: id")
	}
	for name, f := range s {
		if _, ok := doc[name]; f.Required && !ok {
			return nil, docError(id, "missing required field: %s", name)
		}
	}
	return doc, nil
}

// convert turns one JSON value into the stored value of a field type, or
// says, in Solr's words, why it cannot.
func convert(t FieldType, x any) (any, string) {
	switch x.(type) {
	case map[string]any:
		return nil, "an object value is an atomic update, which the fake does not support"
	case []any:
		return nil, "nested arrays are not field values"
	}
	var str string
	switch v := x.(type) {
	case string:
		str = v
	case json.Number:
		str = v.String()
	case bool:
		str = strconv.FormatBool(v)
	default:
		return nil, fmt.Sprintf("unsupported value of type %T", x)
	}
	if !utf8.ValidString(str) {
		return nil, "invalid UTF-8"
	}
	switch t {
	case Long:
		n, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			return nil, fmt.Sprintf("For input string: %q", str)
		}
		return n, ""
	case Date:
		if _, err := time.Parse(time.RFC3339Nano, str); err != nil || !strings.HasSuffix(str, "Z") {
			return nil, fmt.Sprintf("Invalid Date String:'%s'", str)
		}
		return str, ""
	case Binary:
		if _, ok := x.(string); !ok {
			return nil, "binary values are base64 strings"
		}
		if _, err := base64.StdEncoding.DecodeString(str); err != nil {
			return nil, fmt.Sprintf("invalid base64: %v", err)
		}
		return str, ""
	}
	return str, ""
}

// shorten cuts a value for an error message.
func shorten(s string) string {
	const keep = 80
	if len(s) <= keep {
		return s
	}
	return s[:keep] + "…"
}
