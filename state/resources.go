package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
)

// The outcomes a Resource records: what the run that last touched the
// resource did with it.
const (
	OutcomeWritten   = "written"   // delivered to every sink
	OutcomeUnchanged = "unchanged" // already held with the same fixity; not rewritten
	OutcomeDeleted   = "deleted"   // removed from every sink
	OutcomeFailed    = "failed"    // the last attempt failed (see Failures)
)

// Resource is the current state of one resource at the destination. A
// resource belongs to a source: it is identified by (Source, URI), so two
// sources may publish the same URI.
type Resource struct {
	// URI identifies the resource within its source; it must not be empty.
	URI string
	// Source is the source the resource came from (the source URL a run
	// was given).
	Source string
	// ResourceSet is the capability list URL of its resource set, or "".
	ResourceSet string
	// Length is the length in bytes, or -1 when unknown.
	Length int64
	// Hashes are its digests; nil digests are stored as NULL.
	Hashes fixity.Hashes
	// Type is the media type, or "".
	Type string
	// Lastmod is the source's last modification time, or zero.
	Lastmod time.Time
	// ChangeTime is the datetime of the change that produced this state
	// (zero for a baseline), so that an older change never overwrites a
	// newer one.
	ChangeTime time.Time
	// Package is the URL of the dump package it came from ("" when fetched
	// from a list).
	Package string
	// Outcome is one of the Outcome constants.
	Outcome string
	// Deleted marks a tombstone: the resource was deleted at the source.
	// The row is kept, with ChangeTime.
	Deleted bool
	// RunID is the run that produced this state (0 for none; otherwise it
	// must be an existing run).
	RunID int64
	// Updated is when this state was recorded; Commit fills a zero value
	// with the current time.
	Updated time.Time
	// ETag and LastModified are HTTP validators for conditional GETs, or "".
	ETag, LastModified string
	// Links are the resource's rs:ln links worth keeping (describedby,
	// describes, …), as the source gave them.
	Links []Link
	// Version is the version of the resource held, as its protocol names
	// it (a revision number, an ETag, an OAI-PMH datestamp), or "" when
	// the protocol gives none: "already held?" then compares it.
	Version string
	// Verified says which check the bytes the destination holds passed:
	// one of the Verified constants, or "" when not recorded (resources
	// recorded by an older version, deletions).
	Verified string
}

// What a resource's bytes were checked against when they were delivered.
const (
	// VerifiedHash: every digest the source gave (md5, sha-1, sha-256,
	// sha-512) matched, and the length when given.
	VerifiedHash = "hash"
	// VerifiedLengthCRC: no usable digest; the declared length and the ZIP
	// entry's CRC-32 matched.
	VerifiedLengthCRC = "length+crc32"
	// VerifiedCRC: no digest and no declared length; the ZIP entry's
	// CRC-32 (and its own declared size) matched.
	VerifiedCRC = "crc32"
	// VerifiedLength: a resource fetched by GET with no digest; its
	// declared length matched.
	VerifiedLength = "length"
	// VerifiedNone: a resource fetched by GET with neither digest nor
	// length: only the transfer itself was complete.
	VerifiedNone = "none"
)

// Link is a link of a resource recorded in the state.
type Link struct {
	Rel  string `json:"rel"`
	Href string `json:"href"`
	Type string `json:"type,omitempty"`
	// Modified, Hash (the hash attribute's text: "md5:… sha-256:…") and
	// Length describe what the link names, as the source gave them: a
	// rel="via" link's original (zero: not given).
	Modified time.Time `json:"modified,omitzero"`
	Hash     string    `json:"hash,omitempty"`
	Length   int64     `json:"length,omitempty"`
}

func validOutcome(o string) bool {
	switch o {
	case OutcomeWritten, OutcomeUnchanged, OutcomeDeleted, OutcomeFailed:
		return true
	}
	return false
}

const resourceCols = `uri, source, resource_set, length, md5, sha1, sha256, hash_other, type,
	lastmod, change_time, package, outcome, deleted, run_id, updated, etag, last_modified, links, verified, version`

const selectResource = "SELECT " + resourceCols + " FROM resources"

// upsertResourcesWith returns the upsert of the resources values gives
// (its parenthesised groups of the columns cols lists, resourceCols in
// some order), in one statement (in order: a later row for the same key
// wins).
func upsertResourcesWith(cols, values string) string {
	return "INSERT INTO resources (" + cols + ") VALUES " + values + `
ON CONFLICT (source, uri) DO UPDATE SET
	resource_set = excluded.resource_set, length = excluded.length,
	md5 = excluded.md5, sha1 = excluded.sha1, sha256 = excluded.sha256, hash_other = excluded.hash_other,
	type = excluded.type, lastmod = excluded.lastmod, change_time = excluded.change_time,
	package = excluded.package, outcome = excluded.outcome, deleted = excluded.deleted,
	run_id = excluded.run_id, updated = excluded.updated, etag = excluded.etag,
	last_modified = excluded.last_modified, links = excluded.links, verified = excluded.verified, version = excluded.version`
}

// resourceArgs validates r and appends the upsert's arguments to dst,
// its times encoded through tt. A zero Updated becomes now.
func resourceArgs(dst []any, r *Resource, now time.Time, tt *timeTexts) ([]any, error) {
	switch {
	case r.URI == "":
		return nil, errors.New("empty URI")
	case r.Length < -1:
		return nil, fmt.Errorf("length %d (want >= 0, or -1 for unknown)", r.Length)
	case !validOutcome(r.Outcome):
		return nil, fmt.Errorf("outcome %q (want written, unchanged, deleted or failed)", r.Outcome)
	}
	updated := r.Updated
	if updated.IsZero() {
		updated = now
	}
	ts, err := timeCols(tt, []string{"lastmod", "change time", "updated"}, r.Lastmod, r.ChangeTime, updated)
	if err != nil {
		return nil, err
	}
	links, err := linksArg(r.Links)
	if err != nil {
		return nil, err
	}
	return append(dst,
		r.URI, r.Source, r.ResourceSet, r.Length,
		encodeDigest(r.Hashes.MD5), encodeDigest(r.Hashes.SHA1), encodeDigest(r.Hashes.SHA256), encodeOther(r.Hashes),
		r.Type, ts[0], ts[1], r.Package, r.Outcome, boolInt(r.Deleted), nullID(r.RunID), ts[2],
		r.ETag, r.LastModified, links, r.Verified, nullString(r.Version),
	), nil
}

// linksArg is the column value of links ls: JSON, each time in UTC (as
// every time comes back), a time outside the years 0000-9999 refused.
func linksArg(ls []Link) (any, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	out := make([]Link, len(ls))
	for i, l := range ls {
		if !l.Modified.IsZero() {
			if err := checkYear(l.Modified); err != nil {
				return nil, fmt.Errorf("link %s: %w", l.Href, err)
			}
			l.Modified = l.Modified.UTC()
		}
		out[i] = l
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func scanResource(sc scanner) (Resource, error) {
	var (
		r                            Resource
		md5, sha1, sha256, other     sql.NullString
		lastmod, changeTime, updated sql.NullString
		runID                        sql.NullInt64
		deleted                      int
		links, version               sql.NullString
	)
	if err := sc.Scan(&r.URI, &r.Source, &r.ResourceSet, &r.Length, &md5, &sha1, &sha256, &other, &r.Type,
		&lastmod, &changeTime, &r.Package, &r.Outcome, &deleted, &runID, &updated, &r.ETag, &r.LastModified, &links, &r.Verified, &version); err != nil {
		return Resource{}, err
	}
	r.Version = version.String
	if links.Valid && links.String != "" {
		if err := json.Unmarshal([]byte(links.String), &r.Links); err != nil {
			return Resource{}, fmt.Errorf("resource %q: links: %w", r.URI, err)
		}
	}
	var err error
	if r.Hashes, err = decodeHashes(md5, sha1, sha256, other); err != nil {
		return Resource{}, fmt.Errorf("resource %q: %w", r.URI, err)
	}
	if r.Lastmod, err = decodeTime("lastmod", lastmod); err != nil {
		return Resource{}, fmt.Errorf("resource %q: %w", r.URI, err)
	}
	if r.ChangeTime, err = decodeTime("change_time", changeTime); err != nil {
		return Resource{}, fmt.Errorf("resource %q: %w", r.URI, err)
	}
	if r.Updated, err = decodeTime("updated", updated); err != nil {
		return Resource{}, fmt.Errorf("resource %q: %w", r.URI, err)
	}
	r.Deleted = deleted != 0
	r.RunID = runID.Int64
	return r, nil
}

// Resource returns the recorded state of uri from source, and false when
// there is none
// (a deleted resource's tombstone is returned, with Deleted set). It is a
// primary-key lookup through a prepared statement on the read pool, safe to
// call from many goroutines while another commits; it sees every Commit that
// returned before it was called.
func (s *Store) Resource(ctx context.Context, source, uri string) (Resource, bool, error) {
	r, err := scanResource(s.getResource.QueryRowContext(ctx, source, uri))
	if errors.Is(err, sql.ErrNoRows) {
		return Resource{}, false, nil
	}
	if err != nil {
		return Resource{}, false, fatal("resource", err)
	}
	return r, true, nil
}

// PutResources inserts or overwrites (by source and URI) the state of every resource
// in rs, in one transaction: all or none are stored. The last write wins;
// keeping older changes from overwriting newer ones (ChangeTime) is the
// caller's decision. Each resource must have a URI, a Length >= -1 and a
// valid Outcome; a zero Updated is recorded as the current time. Records
// put this way, outside a run, make every package record stale, so they are
// removed (see ForgetPackages).
func (s *Store) PutResources(ctx context.Context, rs []Resource) error {
	if err := s.Commit(ctx, Batch{Resources: rs}); err != nil {
		return err
	}
	return s.ForgetPackages(ctx)
}

// CountResources returns the number of resources recorded from source
// (from every source when source is ""), counting tombstones (Deleted) only
// when includeDeleted is set.
func (s *Store) CountResources(ctx context.Context, source string, includeDeleted bool) (int64, error) {
	q := "SELECT count(*) FROM resources WHERE (? = '' OR source = ?)"
	if !includeDeleted {
		q += " AND deleted = 0"
	}
	var n int64
	if err := s.r.QueryRowContext(ctx, q, source, source).Scan(&n); err != nil {
		return 0, fatal("count resources", err)
	}
	return n, nil
}

// WalkResources calls fn for every resource recorded from source (from
// every source when source is ""), tombstones included, in (source, URI)
// order, streaming rows from one read transaction (a consistent
// snapshot; commits made meanwhile are not seen). If fn returns an error the
// walk stops and WalkResources returns that error unchanged. fn may call
// the Store's other methods.
func (s *Store) WalkResources(ctx context.Context, source string, fn func(Resource) error) error {
	return walkResources(ctx, s.r, ResourceQuery{Source: source}, fn)
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
