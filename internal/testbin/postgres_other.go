//go:build !unix

package testbin

import (
	"context"
	"errors"
	"time"
)

// Postgres starts a PostgreSQL server on unix systems only.
func Postgres(context.Context) (url string, stop func(), err error) {
	return "", nil, errors.New("the tests start PostgreSQL on unix systems only")
}

// PostgresServer is a PostgreSQL server StartPostgres started.
type PostgresServer struct{ URL string }

// StartPostgres starts a PostgreSQL server on unix systems only.
func StartPostgres(context.Context) (*PostgresServer, error) {
	return nil, errors.New("the tests start PostgreSQL on unix systems only")
}

// Restart is not available off unix.
func (*PostgresServer) Restart(context.Context, time.Duration) error {
	return errors.New("the tests start PostgreSQL on unix systems only")
}

// Stop does nothing off unix.
func (*PostgresServer) Stop() {}
