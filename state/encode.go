package state

import (
	"crypto/sha512"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
)

// timeLayout is RFC 3339 with exactly nine fractional digits: fixed width
// for years 0000–9999, so text order is time order.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// encodeTime gives the column value for t: NULL for the zero time, else
// fixed-width UTC text.
func encodeTime(t time.Time) (any, error) {
	if t.IsZero() {
		return nil, nil
	}
	if err := checkYear(t); err != nil {
		return nil, err
	}
	return t.UTC().Format(timeLayout), nil
}

// decodeTime reverses encodeTime.
func decodeTime(col string, v sql.NullString) (time.Time, error) {
	if !v.Valid {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeLayout, v.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("column %s: %w", col, err)
	}
	return t, nil
}

// checkYear rejects times outside the years 0000–9999, which the columns
// do not hold.
func checkYear(t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("time %s is outside the years 0000-9999", t.Format(time.RFC3339Nano))
	}
	return nil
}

// stamp gives a change stamp's column value: t in whole microseconds since
// the Unix epoch (rounded down).
func stamp(t time.Time) int64 { return t.UnixMicro() }

// decodeStamp reverses stamp: the zero time for NULL, else a UTC time.
func decodeStamp(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// timeTexts encodes times as encodeTime does, keeping the texts of the
// last few it encoded: the rows a commit writes share most of their times
// (the commit's own, a record's lastmod and change time in its resource
// row and its change row), and formatting a time is a good part of a
// row's cost. The zero value is ready to use; it is not safe for
// concurrent use.
type timeTexts struct {
	times [4]time.Time
	texts [4]any
	next  int
}

// encode gives the column value for t, as encodeTime (which a nil c
// calls, keeping nothing).
func (c *timeTexts) encode(t time.Time) (any, error) {
	if c == nil {
		return encodeTime(t)
	}
	if t.IsZero() {
		return nil, nil
	}
	for i, v := range c.texts {
		if v != nil && c.times[i].Equal(t) {
			return v, nil
		}
	}
	v, err := encodeTime(t)
	if err != nil {
		return nil, err
	}
	c.times[c.next], c.texts[c.next] = t, v
	c.next = (c.next + 1) % len(c.times)
	return v, nil
}

// timeCols encodes several times at once through tt (nil: none kept),
// naming the field that fails.
func timeCols(tt *timeTexts, names []string, ts ...time.Time) ([]any, error) {
	out := make([]any, len(ts))
	for i, t := range ts {
		v, err := tt.encode(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		out[i] = v
	}
	return out, nil
}

// encodeDigest gives the column value for a digest: NULL when absent, else
// lower-case hex.
func encodeDigest(b []byte) any {
	if b == nil {
		return nil
	}
	return hex.EncodeToString(b)
}

func decodeDigest(col string, v sql.NullString) ([]byte, error) {
	if !v.Valid {
		return nil, nil
	}
	b, err := hex.DecodeString(v.String)
	if err != nil {
		return nil, fmt.Errorf("column %s: %w", col, err)
	}
	return b, nil
}

// encodeOther stores, space-separated, the sha-512 digest (as a
// "sha-512:<hex>" token) and the tokens of algorithms fixity does not
// verify; NULL when there are none. sha-512 shares the column so that
// adding it needed no new column in every table that keeps hashes.
func encodeOther(h fixity.Hashes) any {
	tokens := h.Unknown
	if h.SHA512 != nil {
		tokens = append([]string{sha512Prefix + hex.EncodeToString(h.SHA512)}, tokens...)
	}
	if len(tokens) == 0 {
		return nil
	}
	return strings.Join(tokens, " ")
}

const sha512Prefix = "sha-512:"

func decodeHashes(md5, sha1, sha256, other sql.NullString) (fixity.Hashes, error) {
	var h fixity.Hashes
	var err error
	if h.MD5, err = decodeDigest("md5", md5); err != nil {
		return fixity.Hashes{}, err
	}
	if h.SHA1, err = decodeDigest("sha1", sha1); err != nil {
		return fixity.Hashes{}, err
	}
	if h.SHA256, err = decodeDigest("sha256", sha256); err != nil {
		return fixity.Hashes{}, err
	}
	if other.Valid {
		for _, tok := range strings.Fields(other.String) {
			if d, ok := strings.CutPrefix(tok, sha512Prefix); ok && len(d) == 2*sha512.Size {
				if h.SHA512, err = hex.DecodeString(d); err != nil {
					return fixity.Hashes{}, fmt.Errorf("column hash_other: %w", err)
				}
				continue
			}
			h.Unknown = append(h.Unknown, tok)
		}
	}
	return h, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nullID stores the id 0 ("no run") as NULL, so that foreign keys accept it.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}
