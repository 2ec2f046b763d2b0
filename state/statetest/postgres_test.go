package statetest_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rsharvest/rsharvest/internal/testbin"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/state/statetest"
)

// pgServerEnv carries the URL of the PostgreSQL server TestPostgres
// started to the processes the suite starts.
const pgServerEnv = "RSHARVEST_STATETEST_PG"

// TestPostgres runs the suite over the store kept in PostgreSQL (Debian's
// server, started on 127.0.0.1): each path the suite names is a database
// of its own on that server.
func TestPostgres(t *testing.T) {
	server := os.Getenv(pgServerEnv)
	if os.Getenv(statetest.ChildEnv) == "" {
		u, stop, err := testbin.Postgres(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		server = u
		t.Setenv(pgServerEnv, u)
	}
	statetest.Run(t, statetest.Harness[*state.Snapshot]{
		Open: func(ctx context.Context, path string) (statetest.Store[*state.Snapshot], error) {
			db, err := pgDatabase(ctx, server, path)
			if err != nil {
				return nil, err
			}
			return state.Open(ctx, db)
		},
		Ahead: func(ctx context.Context, path string, d time.Duration) error {
			db, err := pgDatabase(ctx, server, path)
			if err != nil {
				return err
			}
			return aheadIn(ctx, "pgx", db, "UPDATE changes SET recorded = recorded + $1 WHERE recorded = (SELECT max(recorded) FROM changes)", d)
		},
	})
}

// pgDatabase is the URL of the database standing for path on the server
// at server, created when it does not exist yet (by whichever process
// asks first).
func pgDatabase(ctx context.Context, server, path string) (string, error) {
	name := fmt.Sprintf("st_%x", sha256.Sum256([]byte(path)))[:19]
	admin, err := sql.Open("pgx", server)
	if err != nil {
		return "", err
	}
	defer admin.Close()
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
	var pe *pgconn.PgError
	if err != nil && !(errors.As(err, &pe) && (pe.Code == "42P04" || pe.Code == "23505")) { // duplicate database, or a race to create it
		return "", fmt.Errorf("create database for %s: %w", path, err)
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}
