package state

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// LeasedError reports that another harvest holds the lease Key (see
// Store.Lease). It wraps ErrLocked, as a state file in use does: the
// caller reports either the same way.
type LeasedError struct {
	Key    string
	Holder Holder // zero when the holder recorded nothing readable yet
}

func (e *LeasedError) Error() string {
	return fmt.Sprintf("%s is being harvested by %s", e.Key, e.Holder)
}

// Unwrap returns ErrLocked.
func (e *LeasedError) Unwrap() error { return ErrLocked }

// SiteLease is the name of the lease of registry site name, and
// SourceLease that of the records of source key (a run's SourceKey).
func SiteLease(name string) string { return LeaseSite + " " + name }

// SourceLease is the name of the lease of the records of source key.
func SourceLease(key string) string { return LeaseSource + " " + key }

// PartLease is the name of the lease of part part of spread task task
// (CreateTask), held by the worker executing it: the fence of what it
// commits.
func PartLease(task int64, part string) string {
	return fmt.Sprintf("%s %d %s", LeasePart, task, part)
}

// SlotLease is the name of the i-th of the slots of spread task task: a
// site with a rate lets as many of its units run at once as its task has
// slots, each at its share of the rate.
func SlotLease(task int64, i int) string {
	return fmt.Sprintf("%s %d %d", LeaseSlot, task, i)
}

// WorkerLease is a new name for the lease a daemon holds for its life,
// this process's: Leases lists it as a worker alive, harvesting or not.
// Each call gives another (a random part follows the host and pid), so
// that two daemons in containers sharing a host name and a pid are two
// workers.
func WorkerLease() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %s pid %d %s", LeaseWorker, host, os.Getpid(), rand.Text()[:8])
}

// RescueLease is the name of the lease a daemon holds while it looks for
// the jobs of workers that died: one daemon at a time.
func RescueLease() string { return LeaseRescue }

// The kinds of lease (LeaseHeld.Kind): the first word of every lease's
// name.
const (
	LeaseSite   = "site"
	LeaseSource = "source"
	LeaseWorker = "worker"
	LeasePart   = "part"
	LeaseSlot   = "slot"
	LeaseRescue = "rescue"
)

// Kind is the kind of the lease: LeaseSite, LeaseSource, LeaseWorker,
// LeasePart or LeaseSlot.
func (l LeaseHeld) Kind() string {
	kind, _, _ := strings.Cut(l.Key, " ")
	return kind
}

// Lease is a lease held (see Store.Lease) until Release.
type Lease struct {
	key     string
	holder  Holder
	epoch   int64 // the fence: see Batch.Fence
	once    sync.Once
	release func() error
	err     error
}

// ErrLeaseLost is wrapped by the error of a Commit fenced by a lease
// (Batch.Fence) that its holder no longer has: its session ended (its
// connection cut) and another harvest has taken the lease since.
var ErrLeaseLost = errors.New("lease lost: another harvest has taken it")

// takeEpoch records l's holder and draws its epoch, in a transaction that
// holds the store's write lock: a fenced commit (Batch.Fence) of the
// lease's previous holder either ends before it or sees the new epoch.
func (s *Store) takeEpoch(ctx context.Context, conn *sql.Conn, l *Lease, holder string) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, s.dialect.writeLock); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, `INSERT INTO leases (key, holder, since, epoch) VALUES (?, ?, ?, nextval('lease_epochs'))
		ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, since = excluded.since, epoch = excluded.epoch
		RETURNING epoch`, l.key, holder, l.holder.Started.Format(timeLayout)).Scan(&l.epoch); err != nil {
		return err
	}
	return tx.Commit()
}

// held reports, in tx (a write transaction of s), whether l is still the
// lease its key names: in a file's store, this process's lease of the key;
// in PostgreSQL, the lease's row with the epoch l took it at (every
// taking of a lease draws a new epoch, so a holder whose session ended
// and whose lease another took since is refused).
func (s *Store) held(ctx context.Context, tx *sql.Tx, l *Lease) (bool, error) {
	if s.leaseDB == nil {
		s.leaseMu.Lock()
		defer s.leaseMu.Unlock()
		return s.leases[l.key] == l, nil
	}
	var n int
	err := tx.QueryRowContext(ctx, "SELECT count(*) FROM leases WHERE key = ? AND epoch = ?", l.key, l.epoch).Scan(&n)
	return n == 1, err
}

// fenced is nil when l is nil or still the lease its key names (see held),
// and otherwise an error wrapping ErrLeaseLost.
func (s *Store) fenced(ctx context.Context, tx *sql.Tx, l *Lease) error {
	if l == nil {
		return nil
	}
	ok, err := s.held(ctx, tx, l)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%s: %w", l.key, ErrLeaseLost)
	}
	return nil
}

// Release gives the lease up. Calling it again is a no-op.
func (l *Lease) Release() error {
	l.once.Do(func() { l.err = l.release() })
	return l.err
}

// Lease takes the lease named key (SiteLease, SourceLease) for one
// harvest: at once, or — when another holds it — trying again every
// 200 ms until it is free, wait has passed, or ctx ends. A lease held
// elsewhere gives a *LeasedError naming its holder (command says what
// this one is, for the next to read). Leases are what keep two harvests
// of one site or one source apart, in one process or on several machines.
//
// A store kept in a file takes its leases in this Store (the file's lock,
// OpenExclusive, keeps other processes out; a process opens its state
// once: a second Store on the same file does not see the first's leases). One kept in PostgreSQL
// takes a session advisory lock of the database on a connection of its
// own, recorded in the table leases: the server releases it when the
// connection closes — Release, or the process dies, or its connection is
// cut — so a dead holder never leaves its lease behind. Close releases the
// leases the store still holds.
func (s *Store) Lease(ctx context.Context, key, command string, wait time.Duration) (*Lease, error) {
	host, _ := os.Hostname()
	me := Holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC(), Command: command}
	deadline := time.Now().Add(wait)
	for {
		l, holder, err := s.tryLease(ctx, key, me)
		if err != nil {
			return nil, fatal("lease "+key, err)
		}
		if l != nil {
			return l, nil
		}
		if wait <= 0 || !time.Now().Before(deadline) {
			return nil, errclass.NewFatal(&LeasedError{Key: key, Holder: holder})
		}
		t := time.NewTimer(min(lockPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errclass.Fatalf("state: waiting for %s: %w", key, ctx.Err())
		case <-t.C:
		}
	}
}

// tryLease takes the lease key for me, or says who holds it.
func (s *Store) tryLease(ctx context.Context, key string, me Holder) (*Lease, Holder, error) {
	if s.leaseDB == nil {
		s.leaseMu.Lock()
		defer s.leaseMu.Unlock()
		if l, held := s.leases[key]; held {
			return nil, l.holder, nil
		}
		if s.leases == nil {
			s.leases = map[string]*Lease{}
		}
		l := &Lease{key: key, holder: me}
		l.release = func() error {
			s.leaseMu.Lock()
			delete(s.leases, key)
			s.leaseMu.Unlock()
			return nil
		}
		s.leases[key] = l
		return l, Holder{}, nil
	}
	conn, err := s.leaseDB.Conn(ctx)
	if err != nil {
		return nil, Holder{}, err
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(hashtextextended(?, 0))", "rsharvest lease "+key).Scan(&ok); err != nil {
		conn.Close()
		return nil, Holder{}, err
	}
	if !ok {
		defer conn.Close()
		var h Holder
		var b []byte
		if err := conn.QueryRowContext(ctx, "SELECT holder FROM leases WHERE key = ?", key).Scan(&b); err == nil {
			_ = json.Unmarshal(b, &h)
		}
		return nil, h, nil
	}
	b, _ := json.Marshal(me)
	l := &Lease{key: key, holder: me}
	if err := s.takeEpoch(ctx, conn, l, string(b)); err != nil {
		conn.Close() // the pool keeps no idle connection: closing it ends the session and its lock
		return nil, Holder{}, err
	}
	l.release = func() error {
		s.leaseMu.Lock()
		delete(s.pgLeases, l)
		s.leaseMu.Unlock()
		// The row goes first, so that no one reads a holder who has
		// left; closing the connection ends its session, which releases
		// the lock (the lease pool keeps no idle connection).
		_, err := conn.ExecContext(context.Background(), "DELETE FROM leases WHERE key = ?", key)
		if cerr := conn.Close(); err == nil {
			err = cerr
		}
		return err
	}
	s.leaseMu.Lock()
	if s.pgLeases == nil {
		s.pgLeases = map[*Lease]bool{}
	}
	s.pgLeases[l] = true
	s.leaseMu.Unlock()
	return l, Holder{}, nil
}

// LeaseHeld is a lease held, as Leases lists it.
type LeaseHeld struct {
	Key    string
	Holder Holder
}

// Leases returns the leases held now, by key: for a state file those of
// this process; for a store kept in PostgreSQL those of every process on
// every machine (the workers alive, and what each is doing), a lease
// whose holder's session has ended never among them.
func (s *Store) Leases(ctx context.Context) ([]LeaseHeld, error) {
	var out []LeaseHeld
	if s.leaseDB == nil {
		s.leaseMu.Lock()
		for k, l := range s.leases {
			out = append(out, LeaseHeld{Key: k, Holder: l.holder})
		}
		s.leaseMu.Unlock()
		slices.SortFunc(out, func(a, b LeaseHeld) int { return strings.Compare(a.Key, b.Key) })
		return out, nil
	}
	// A lease's advisory lock is in pg_locks while its session holds it:
	// its 64-bit key split into classid (high) and objid (low half).
	rows, err := s.r.QueryContext(ctx, `SELECT l.key, l.holder FROM leases l WHERE EXISTS (
		SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
			AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND ((k.classid::bigint << 32) | k.objid::bigint) = hashtextextended('rsharvest lease ' || l.key, 0))
		ORDER BY l.key`)
	if err != nil {
		return nil, fatal("leases", err)
	}
	defer rows.Close()
	for rows.Next() {
		var l LeaseHeld
		var b []byte
		if err := rows.Scan(&l.Key, &b); err != nil {
			return nil, fatal("leases", err)
		}
		_ = json.Unmarshal(b, &l.Holder)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("leases", err)
	}
	return out, nil
}

// Workers counts the workers alive: the worker leases held (WorkerLease),
// one per daemon, on every machine sharing a store kept in PostgreSQL.
func (s *Store) Workers(ctx context.Context) (int, error) {
	held, err := s.Leases(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range held {
		if l.Kind() == LeaseWorker {
			n++
		}
	}
	return n, nil
}
