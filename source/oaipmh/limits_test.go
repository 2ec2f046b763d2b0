package oaipmh

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/internal/xmlcap"
)

// endless reads head, then body n times, then tail, made as it is read;
// read counts the bytes handed out.
type endless struct {
	head, body, tail []byte
	n                int
	cur              []byte
	read             int64
}

func (e *endless) Read(p []byte) (int, error) {
	for len(e.cur) == 0 {
		switch {
		case e.head != nil:
			e.cur, e.head = e.head, nil
		case e.n > 0:
			e.cur, e.n = e.body, e.n-1
		case e.tail != nil:
			e.cur, e.tail = e.tail, nil
		default:
			return 0, io.EOF
		}
	}
	k := copy(p, e.cur)
	e.cur = e.cur[k:]
	e.read += int64(k)
	return k, nil
}

// TestReaderLimits: a response nested a million deep, or holding a 200 MB
// attribute or text, is refused once past the parser's limits — having
// read a bounded part of it — and is not a page to recover record by
// record (the list fails).
func TestReaderLimits(t *testing.T) {
	full := envelope("ListRecords", "@")
	head, tail, _ := strings.Cut(full, "@")
	recHead := `<record><header><identifier>oai:x:1</identifier><datestamp>2024-01-02T03:04:05Z</datestamp></header><metadata><oai_dc:dc>`
	tests := []struct {
		name string
		r    *endless
		want error
	}{
		{"metadata nested a million deep", &endless{head: []byte(head + recHead), body: []byte("<dc:x>"), n: 1_000_000, tail: []byte(tail)}, xmlcap.ErrTooDeep},
		{"an element of the envelope nested deep", &endless{head: []byte(head), body: []byte("<x>"), n: 1_000_000, tail: []byte(tail)}, xmlcap.ErrTooDeep},
		{"a 200 MB attribute", &endless{head: []byte(head + `<record a="`), body: []byte("abcdefgh"), n: 25_000_000, tail: []byte(`"/>` + tail)}, xmlcap.ErrTokenTooLarge},
		{"a 200 MB text", &endless{head: []byte(head + recHead + "<dc:title>"), body: []byte("abcdefgh"), n: 25_000_000, tail: []byte(tail)}, xmlcap.ErrTokenTooLarge},
		{"a 200 MB identifier", &endless{head: []byte(head + `<record><header><identifier>`), body: []byte("abcdefgh"), n: 25_000_000, tail: []byte(tail)}, xmlcap.ErrTokenTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd, err := NewReader(tc.r, Options{MaxRecordSize: 1 << 20})
			for err == nil {
				_, err = rd.Next()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v; want one wrapping %v", err, tc.want)
			}
			if malformedPage(err) {
				t.Errorf("%v is taken for a page to recover record by record", err)
			}
			if tc.r.read > 8<<20 {
				t.Errorf("%d bytes read before the refusal", tc.r.read)
			}
		})
	}
	// An item of the envelope decoded whole is at most 1 MiB.
	big := envelope("Identify", "<repositoryName>"+strings.Repeat("x", 2<<20)+"</repositoryName>")
	rd, err := NewReader(strings.NewReader(big), Options{})
	if err == nil {
		_, err = rd.Identify()
	}
	if !errors.Is(err, xmlcap.ErrTokenTooLarge) {
		t.Errorf("an Identify of 2 MiB: %v", err)
	}
}
