package harvestlist

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rsharvest/rsharvest/errclass"
)

// listSpool is a harvest list as the planner's first pass read it: each
// document element in order, as a Document or as the *EntryError it
// gave, written to a scratch file in a compact binary form, so that the
// second pass replays it without parsing the list's XML again. Memory
// does not grow with the list.
type listSpool struct {
	f   *os.File
	w   *bufio.Writer
	buf []byte // the item being encoded
}

// Item kinds.
const (
	spoolDocument   = 'd'
	spoolEntryError = 'e'
)

// newListSpool creates an empty spool in dir ("": the system's).
func newListSpool(dir string) (*listSpool, error) {
	f, err := os.CreateTemp(dir, "harvestlist-*.bin")
	if err != nil {
		return nil, errclass.Fatalf("harvestlist: scratch: %w", err)
	}
	return &listSpool{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// close closes and removes the spool.
func (s *listSpool) close() {
	s.f.Close()
	os.Remove(s.f.Name())
}

// document appends d.
func (s *listSpool) document(d Document) error {
	b := append(s.buf[:0], spoolDocument)
	b = appendString(b, d.Scope)
	b = binary.AppendVarint(b, d.Identifier)
	b = binary.AppendVarint(b, d.Revision)
	b = appendString(b, d.Type)
	b = appendString(b, d.URL)
	b = binary.AppendVarint(b, int64(d.Line))
	return s.write(b)
}

// entryError appends ee; its error is replayed as a permanent error of
// the same text.
func (s *listSpool) entryError(ee *EntryError) error {
	b := append(s.buf[:0], spoolEntryError)
	b = appendString(b, ee.DocID)
	b = binary.AppendVarint(b, int64(ee.Line))
	b = appendString(b, ee.Err.Error())
	return s.write(b)
}

func (s *listSpool) write(b []byte) error {
	s.buf = b
	if _, err := s.w.Write(b); err != nil {
		return errclass.Fatalf("harvestlist: scratch: %w", err)
	}
	return nil
}

func appendString(b []byte, v string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// replay calls fn with each document appended, and bad with each entry
// error, in the order they were appended; their errors end it.
func (s *listSpool) replay(fn func(Document) error, bad func(*EntryError) error) error {
	if err := s.w.Flush(); err != nil {
		return errclass.Fatalf("harvestlist: scratch: %w", err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return errclass.Fatalf("harvestlist: scratch: %w", err)
	}
	r := spoolReader{r: bufio.NewReaderSize(s.f, 64<<10)}
	for {
		kind, err := r.r.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errclass.Fatalf("harvestlist: scratch: %w", err)
		}
		switch kind {
		case spoolDocument:
			d := Document{Scope: r.string(), Identifier: r.int(), Revision: r.int(), Type: r.string(), URL: r.string(), Line: int(r.int())}
			if r.err != nil {
				return r.fail()
			}
			if err := fn(d); err != nil {
				return err
			}
		case spoolEntryError:
			ee := &EntryError{DocID: r.string(), Line: int(r.int())}
			msg := r.string()
			if r.err != nil {
				return r.fail()
			}
			ee.Err = errclass.NewPermanent(errors.New(msg))
			if err := bad(ee); err != nil {
				return err
			}
		default:
			return errclass.Fatalf("harvestlist: scratch: an item of unknown kind %q", kind)
		}
	}
}

// spoolReader decodes a spool's fields; the first error sticks.
type spoolReader struct {
	r   *bufio.Reader
	err error
}

func (r *spoolReader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(r.r)
	r.err = err
	return v
}

func (r *spoolReader) string() string {
	if r.err != nil {
		return ""
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		r.err = err
		return ""
	}
	if n > 1<<30 {
		r.err = fmt.Errorf("a field of %d bytes", n)
		return ""
	}
	b := make([]byte, n)
	_, r.err = io.ReadFull(r.r, b)
	return string(b)
}

func (r *spoolReader) fail() error {
	if r.err == io.EOF {
		r.err = io.ErrUnexpectedEOF
	}
	return errclass.Fatalf("harvestlist: scratch: %w", r.err)
}
