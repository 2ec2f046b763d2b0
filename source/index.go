package source

import (
	"io"
	"log/slog"
)

// Index reads the listing a package carries of what it holds — which
// archive entries, as which records — for the executor, which unpacks,
// verifies and delivers them without knowing the listing's format. The
// planner that emits a Package sets it.
type Index interface {
	// Read starts reading a listing from r: the package's index entry,
	// or the copy of it the package links (Package.Contents). It fails
	// when the listing is not one of this package's kind; log takes the
	// listing's warnings. The error is the package's (its stage is
	// "manifest").
	Read(r io.Reader, log *slog.Logger) (Entries, error)
}

// Entries are a package's listing, read in order.
type Entries interface {
	// Next returns the next entry's record, with its archive path in
	// Path. At the end it returns io.EOF, only at the proper end of a
	// whole listing: the executor then keeps the copy of the listing it
	// read (Package.Contents) for the next run's conditional request, as
	// a planner's document read whole (ReadWhole). An *EntryError is one malformed
	// entry, and the entries after it may still be read; any other error
	// means the rest of the listing cannot be read.
	Next() (*Record, error)
}

// EntryError is one malformed entry of a listing: the others stand.
type EntryError struct {
	// URI is the resource the entry names, when it could be read ("":
	// not even that).
	URI string
	Err error
}

func (e *EntryError) Error() string { return e.Err.Error() }

func (e *EntryError) Unwrap() error { return e.Err }
