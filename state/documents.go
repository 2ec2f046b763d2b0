package state

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// MaxDocumentCopy is the largest document body PutDocument keeps: the
// documents that say what a source holds (Source Descriptions, Capability
// Lists, dump documents, most lists) are far smaller; a larger one is
// simply fetched again in full next time.
const MaxDocumentCopy = 8 << 20

// Document is the last copy of a ResourceSync document the destination
// read, with the validators the server sent with it.
type Document struct {
	URL                string
	ETag, LastModified string
	// Encoding is the Content-Encoding the body came with: Body is kept
	// as it came, compressed or not.
	Encoding string
	Body     []byte
	Updated  time.Time
}

// Document returns the copy of the document at url, if one is kept.
func (s *Store) Document(ctx context.Context, url string) (Document, bool, error) {
	d := Document{URL: url}
	var updated string
	err := s.r.QueryRowContext(ctx, "SELECT etag, last_modified, encoding, body, updated FROM documents WHERE url = ?", url).
		Scan(&d.ETag, &d.LastModified, &d.Encoding, &d.Body, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Document{}, false, nil
	}
	if err != nil {
		return Document{}, false, fatal("document", err)
	}
	d.Updated, _ = time.Parse(time.RFC3339Nano, updated)
	return d, true, nil
}

// PutDocument keeps d as the copy of its document, replacing any other. A
// document without validators, or over MaxDocumentCopy, cannot be asked
// about: its copy is removed instead.
func (s *Store) PutDocument(ctx context.Context, d Document) error {
	if d.URL == "" {
		return fatal("document", errors.New("empty URL"))
	}
	if (d.ETag == "" && d.LastModified == "") || len(d.Body) > MaxDocumentCopy {
		if _, err := s.w.ExecContext(ctx, "DELETE FROM documents WHERE url = ?", d.URL); err != nil {
			return fatal("document", err)
		}
		return nil
	}
	if d.Updated.IsZero() {
		d.Updated = time.Now()
	}
	if err := checkYear(d.Updated); err != nil {
		return fatal("document", err)
	}
	if d.Body == nil {
		d.Body = []byte{}
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO documents (url, etag, last_modified, encoding, body, updated) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (url) DO UPDATE SET etag = excluded.etag, last_modified = excluded.last_modified,
		encoding = excluded.encoding, body = excluded.body, updated = excluded.updated`,
		d.URL, d.ETag, d.LastModified, d.Encoding, d.Body, d.Updated.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fatal("document", err)
	}
	return nil
}
