package source

import (
	"errors"
	"fmt"

	"github.com/rsharvest/rsharvest/errclass"
)

// MaxURILength is the longest identifier a record may have, in bytes: a
// resource's URI, an OAI-PMH identifier, a harvest list's docid. A longer
// one is that record's permanent failure (a name of megabytes would become
// thousands of nested directories in a mirror, and a key of as many in the
// state).
const MaxURILength = 4096

// ErrURITooLong is wrapped by the (permanent) failure of a record whose
// identifier is longer than MaxURILength.
var ErrURITooLong = errors.New("identifier too long")

// CheckURI returns the permanent error of an identifier longer than
// MaxURILength, or nil.
func CheckURI(uri string) error {
	if len(uri) > MaxURILength {
		return errclass.NewPermanent(fmt.Errorf("%w: %d bytes, more than %d", ErrURITooLong, len(uri), MaxURILength))
	}
	return nil
}

// ShortURI is uri as a message or a report shows it: cut after 200 bytes
// when it is longer than MaxURILength.
func ShortURI(uri string) string {
	if len(uri) <= MaxURILength {
		return uri
	}
	cut := 200
	for cut > 0 && uri[cut]&0xc0 == 0x80 {
		cut-- // not inside a UTF-8 sequence
	}
	return uri[:cut] + "…"
}

// Bounded returns u with its identifiers bounded: a record whose URI is
// longer than MaxURILength becomes that record's permanent failure, and a
// failure's or a skip's overlong URI is cut (ShortURI); a failure of an
// overlong identifier is not asked for again.
func Bounded(u Unit) Unit {
	switch {
	case u.Record != nil && len(u.Record.URI) > MaxURILength:
		r := u.Record
		return Unit{Failure: &Failure{URI: ShortURI(r.URI), ResourceSet: r.ResourceSet, Stage: "record", Listed: r.Listed,
			Err: CheckURI(r.URI), Resource: true, At: r.ChangeTime}}
	case u.Failure != nil && len(u.Failure.URI) > MaxURILength:
		f := *u.Failure
		f.URI, f.Retry = ShortURI(f.URI), nil
		return Unit{Failure: &f}
	case u.Skip != nil && len(u.Skip.URI) > MaxURILength:
		s := *u.Skip
		s.URI = ShortURI(s.URI)
		return Unit{Skip: &s}
	}
	return u
}
