package es

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// maxResponse bounds the response bodies the sink reads.
const maxResponse = 512 << 20

// response is an HTTP response read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request to the server. path is relative to the base URL
// and already escaped. A transport error is returned retryable; any status
// is returned as a response for the caller to judge.
func (s *ES) do(ctx context.Context, method, path string, query url.Values, contentType string, body []byte) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	target := s.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, errclass.Fatalf("es sink: %s %s: %w", method, s.base+path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if s.opts.Username != "" {
		req.SetBasicAuth(s.opts.Username, s.opts.Password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// The request URL carries no credentials, so the error may be shown.
		return nil, errclass.Retryablef("es sink: %s %s: %w", method, s.base+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, errclass.Retryablef("es sink: %s %s: reading the response: %w", method, s.base+path, err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// statusError describes a response with an unexpected status, classified:
// 401 and 403 fatal, 408, 429 and 5xx retryable, other statuses permanent.
func (s *ES) statusError(what string, r *response) error {
	err := fmt.Errorf("es sink %s: %s: HTTP %d: %s", s.base, what, r.status, serverReason(r.body))
	switch {
	case r.status == http.StatusUnauthorized || r.status == http.StatusForbidden:
		return errclass.NewFatal(fmt.Errorf("%w (check the credentials)", err))
	case retryableStatus(r.status):
		return errclass.NewRetryable(err)
	default:
		return errclass.NewPermanent(err)
	}
}

func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// retryAfter returns the wait a response's Retry-After header asks for
// (seconds or an HTTP date), capped at a minute, or 0.
func retryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return min(max(d, 0), time.Minute)
}

// serverReason extracts a short reason from an error body: Elasticsearch's
// {"error":{"type":…,"reason":…}}, ZincSearch's {"error":"…"}, or the text.
func serverReason(body []byte) string {
	var withObject struct {
		Error struct {
			Type   string `json:"type"`
			Reason string `json:"reason"`
		} `json:"error"`
	}
	var withString struct {
		Error string `json:"error"`
	}
	switch {
	case json.Unmarshal(body, &withObject) == nil && withObject.Error.Type != "":
		return clip(withObject.Error.Type + ": " + withObject.Error.Reason)
	case json.Unmarshal(body, &withString) == nil && withString.Error != "":
		return clip(withString.Error)
	case len(bytes.TrimSpace(body)) == 0:
		return "(no body)"
	default:
		return clip(string(body))
	}
}

// itemReason describes a bulk item's error object (or string).
func itemReason(raw json.RawMessage) string {
	var obj struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
	}
	var str string
	switch {
	case json.Unmarshal(raw, &obj) == nil && obj.Type != "":
		return clip(obj.Type + ": " + obj.Reason)
	case json.Unmarshal(raw, &str) == nil && str != "":
		return clip(str)
	default:
		return clip(string(raw))
	}
}

func clip(s string) string {
	const shown = 300
	s = strings.TrimSpace(s)
	if len(s) > shown {
		return s[:shown] + "…"
	}
	return s
}

// escapeSegment escapes s as one path segment, leaving only unreserved
// characters as they are: "." and ".." must not be read as dot segments.
func escapeSegment(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
