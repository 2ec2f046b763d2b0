package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/rsharvest/rsharvest/errclass"
)

// ContextReader reads from R until Ctx ends, and remembers in Err the error
// (a Read error of R, or Ctx's) that stopped it, so that a Put can tell the
// body's errors from its own write errors.
type ContextReader struct {
	Ctx context.Context
	R   io.Reader
	Err error
}

// Read reads from R, or fails with Ctx's error once Ctx has ended.
func (c *ContextReader) Read(p []byte) (int, error) {
	if err := c.Ctx.Err(); err != nil {
		c.Err = err
		return 0, err
	}
	n, err := c.R.Read(p)
	if err != nil && err != io.EOF {
		c.Err = err
	}
	return n, err
}

// BodyError says whether err, the error of a copy that read c, is the
// body's — a Read error of R, or Ctx's end — and returns it as a Put
// returns it: retryable when Ctx ended, wrapped as a failure reading the
// body otherwise (a fixity mismatch, a broken download). It returns nil
// when err is not the body's: a sink's own write error, which the sink
// classifies. what names the operation ("fs: put URI").
func (c *ContextReader) BodyError(err error, what string) error {
	if c.Err == nil || !errors.Is(err, c.Err) {
		return nil
	}
	if cerr := c.Ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return errclass.Retryablef("%s: %w", what, err)
	}
	return fmt.Errorf("%s: reading body: %w", what, err)
}

// IsText reports whether a body of media type typ is text worth indexing
// as full text by a search sink: text/*, XML, JSON (and their +xml, +json
// kinds), in UTF-8 or ASCII when a charset is given.
func IsText(typ string) bool {
	mt, params, err := mime.ParseMediaType(typ)
	if err != nil {
		return false
	}
	if cs, ok := params["charset"]; ok {
		switch strings.ToLower(cs) {
		case "utf-8", "utf8", "us-ascii":
		default:
			return false
		}
	}
	switch {
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+xml"), strings.HasSuffix(mt, "+json"):
		return true
	}
	switch mt {
	case "application/xml", "application/json", "application/javascript", "application/x-ndjson", "application/xhtml+xml":
		return true
	}
	return false
}
