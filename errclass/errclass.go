// Package errclass classifies errors where they are born as retryable,
// permanent or fatal, so that every later stage can decide what to do with an
// error by asking errors.As instead of matching strings.
//
//   - Retryable: a temporary condition (timeout, connection reset, HTTP 429 or
//     5xx). Trying again later may succeed; a run holds its checkpoint at the
//     earliest such failure.
//   - Permanent: the item itself is wrong (HTTP 4xx, fixity mismatch, malformed
//     document or entry, hostile archive). Trying again will not help; the
//     failure is recorded and the run goes on.
//   - Fatal: the run cannot go on (bad configuration, a sink that is down,
//     the state store failing). The run is cancelled.
package errclass

import (
	"errors"
	"fmt"
	"strings"
)

// Class is the class of an error.
type Class int

// The classes, from least to most severe. The zero value means "unclassified".
const (
	Unclassified Class = iota
	Retryable
	Permanent
	Fatal
)

// String returns the lower-case name of the class.
func (c Class) String() string {
	switch c {
	case Retryable:
		return "retryable"
	case Permanent:
		return "permanent"
	case Fatal:
		return "fatal"
	default:
		return "unclassified"
	}
}

// Error carries a class with the error it classifies. It unwraps to Err, so
// errors.Is and errors.As still see the cause.
type Error struct {
	Class Class
	Err   error
}

// Error returns the message of the wrapped error.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

func wrap(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, Err: err}
}

// NewRetryable marks err as retryable. It returns nil for a nil err.
func NewRetryable(err error) error { return wrap(Retryable, err) }

// NewPermanent marks err as permanent. It returns nil for a nil err.
func NewPermanent(err error) error { return wrap(Permanent, err) }

// NewFatal marks err as fatal. It returns nil for a nil err.
func NewFatal(err error) error { return wrap(Fatal, err) }

// Retryablef formats an error with fmt.Errorf (so %w works) and marks it retryable.
func Retryablef(format string, a ...any) error { return NewRetryable(fmt.Errorf(format, a...)) }

// Permanentf formats an error with fmt.Errorf (so %w works) and marks it permanent.
func Permanentf(format string, a ...any) error { return NewPermanent(fmt.Errorf(format, a...)) }

// Fatalf formats an error with fmt.Errorf (so %w works) and marks it fatal.
func Fatalf(format string, a ...any) error { return NewFatal(fmt.Errorf(format, a...)) }

// Of returns the class of the outermost classified error in err's chain, or
// Unclassified when there is none (and for a nil err).
func Of(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Unclassified
}

// IsRetryable reports whether err is classified retryable.
func IsRetryable(err error) bool { return Of(err) == Retryable }

// IsPermanent reports whether err is classified permanent.
func IsPermanent(err error) bool { return Of(err) == Permanent }

// IsFatal reports whether err is classified fatal.
func IsFatal(err error) bool { return Of(err) == Fatal }

// About wraps err with what it is about — "name: err" — unless err's
// message names it already (a fetch error names the URL it requested), so
// that a message names each thing once. The class is kept.
func About(name string, err error) error {
	if err == nil || strings.Contains(err.Error(), name) {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}
