//go:build !unix

package testbin

import (
	"context"
	"errors"
)

// Postgres starts a PostgreSQL server on unix systems only.
func Postgres(context.Context) (url string, stop func(), err error) {
	return "", nil, errors.New("the tests start PostgreSQL on unix systems only")
}
