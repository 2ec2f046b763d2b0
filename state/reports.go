package state

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ClaimReport claims the report named key for sending: false when it was
// claimed before (it is being sent, or was sent: do not send it again).
// After sending, ReportSent records it; if sending failed, ReleaseReport
// lets a later attempt claim it. A process that dies between the claim
// and the send leaves the report claimed: it is then never sent, rather
// than sent twice.
func (s *Store) ClaimReport(ctx context.Context, key string) (bool, error) {
	res, err := s.w.ExecContext(ctx, "INSERT INTO reports_sent (key, state, updated) VALUES (?, 'sending', ?) ON CONFLICT (key) DO NOTHING",
		key, time.Now().UTC().Format(timeLayout))
	if err != nil {
		return false, fatal("claim report", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fatal("claim report", err)
	}
	return n == 1, nil
}

// ReportSent records that the report named key was sent.
func (s *Store) ReportSent(ctx context.Context, key string) error {
	if _, err := s.w.ExecContext(ctx, "UPDATE reports_sent SET state = 'sent', updated = ? WHERE key = ?", time.Now().UTC().Format(timeLayout), key); err != nil {
		return fatal("report sent", err)
	}
	return nil
}

// ReleaseReport gives up the claim on the report named key (its sending
// failed): a later attempt may claim it.
func (s *Store) ReleaseReport(ctx context.Context, key string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM reports_sent WHERE key = ? AND state = 'sending'", key); err != nil {
		return fatal("release report", err)
	}
	return nil
}

// LastReport returns the greatest key, in the order the store sorts text,
// of the reports sent whose keys begin with prefix (false when there is
// none). Keys that end in a time of one fixed-width layout sort by it, so
// the greatest is the newest. prefix holds no "%" nor "_".
func (s *Store) LastReport(ctx context.Context, prefix string) (string, bool, error) {
	var key string
	err := s.r.QueryRowContext(ctx, "SELECT key FROM reports_sent WHERE key LIKE ? AND state = 'sent' ORDER BY key DESC LIMIT 1", prefix+"%").Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fatal("last report", err)
	}
	return key, true, nil
}
