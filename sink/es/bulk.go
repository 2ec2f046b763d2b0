package es

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/retry"
)

// action is one action of a bulk request: its metadata line and, for an
// index action, its document line.
type action struct {
	op     string // "index" or "delete"
	index  string
	id     string
	uri    string // the resource's URI, for reports
	kind   string // Failure.Op: "put", "delete" or "change"
	meta   []byte
	source []byte // nil for a delete
	rev    string // the rev of a resource document written by "index"
	// change is the change document an action of kind "change" writes:
	// stamped again when its batch is sent (see stamp).
	change *changeDoc
}

// stamp gives a change document the time its batch is sent, as its
// datetime: a change is stamped when it becomes visible, so that of two
// sinks writing one index, the change another sees later is stamped
// later (a publication from the index relies on it: see publish/fromes).
func (a *action) stamp(now time.Time) {
	if a.change == nil {
		return
	}
	a.change.Datetime, a.change.Timestamp = formatTime(now), formatTime(now)
	if src, err := json.Marshal(a.change); err == nil {
		a.source = src
	}
}

func newAction(op, index, id, uri, kind string, source []byte, rev string) *action {
	// Index names and ids are valid UTF-8 strings: this cannot fail.
	meta, _ := json.Marshal(map[string]map[string]string{op: {"_index": index, "_id": id}})
	return &action{op: op, index: index, id: id, uri: uri, kind: kind, meta: meta, source: source, rev: rev}
}

// size is the action's share of a request body.
func (a *action) size() int {
	n := len(a.meta) + 1
	if a.source != nil {
		n += len(a.source) + 1
	}
	return n
}

// resource reports whether the action writes a resource document.
func (a *action) resource() bool { return a.kind != "change" }

// batch is the queue of actions not sent yet.
type batch struct {
	actions []*action
	bytes   int
	slot    map[string]int // resource document _id → its position in actions
}

func (b *batch) reset() {
	b.actions, b.bytes, b.slot = nil, 0, map[string]int{}
}

// add queues a. An action on a resource document replaces the one queued
// for the same document: only the last state matters, and ZincSearch cannot
// delete a document written in the same request.
func (b *batch) add(a *action) {
	if a.resource() {
		if i, ok := b.slot[a.id]; ok {
			b.bytes += a.size() - b.actions[i].size()
			b.actions[i] = a
			return
		}
		b.slot[a.id] = len(b.actions)
	}
	b.actions = append(b.actions, a)
	b.bytes += a.size()
}

// enqueue queues acts together and, when that fills the batch, sends it.
func (s *ES) enqueue(ctx context.Context, acts ...*action) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errclass.Fatalf("es sink: used after Close")
	}
	for _, a := range acts {
		s.pending.add(a)
	}
	full := s.fullLocked()
	s.mu.Unlock()
	if !full {
		return nil
	}
	// The batch holds other callers' actions: send it even if ctx ends.
	s.flush(context.WithoutCancel(ctx), true)
	return s.takeError()
}

func (s *ES) fullLocked() bool {
	return len(s.pending.actions) >= s.opts.BatchSize || s.pending.bytes >= s.opts.BatchBytes
}

// flush sends the queued actions, when there are any and (with onlyIfFull)
// they fill a batch, and records what failed.
func (s *ES) flush(ctx context.Context, onlyIfFull bool) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	for {
		s.mu.Lock()
		if len(s.pending.actions) == 0 || onlyIfFull && !s.fullLocked() {
			s.mu.Unlock()
			return
		}
		acts := s.takeBatchLocked()
		s.mu.Unlock()

		failed := s.send(ctx, acts)
		if s.flavor == FlavorZinc {
			s.waitVisible(ctx, acts, failed)
		}
		s.record(failed)
	}
}

// takeBatchLocked takes from the queue the actions of one request: the
// first, and those after it while the request stays within BatchSize
// actions and BatchBytes (callers that queued while a request was on the
// wire may have filled the queue past them).
func (s *ES) takeBatchLocked() []*action {
	all := s.pending.actions
	n, size := 1, all[0].size()
	for n < len(all) && n < s.opts.BatchSize && size+all[n].size() <= s.opts.BatchBytes {
		size += all[n].size()
		n++
	}
	s.pending.reset()
	for _, a := range all[n:] {
		s.pending.add(a)
	}
	return all[:n:n]
}

// failure is an action that failed, with the classified reason.
type failure struct {
	a   *action
	err error
}

// record keeps failures for Failed and Close, logs them, and sets the error
// the next Put or Delete returns when some failed for other reasons than a
// rejection of their own document.
func (s *ES) record(failed []failure) {
	if len(failed) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var others []failure
	for _, f := range failed {
		s.failures = append(s.failures, Failure{URI: f.a.uri, Op: f.a.kind, Err: f.err, deleted: f.a.change != nil && f.a.change.Change == "deleted"})
		switch errclass.Of(f.err) {
		case errclass.Permanent:
			s.log.Warn("document rejected", "op", f.a.kind, "uri", f.a.uri, "err", f.err)
		case errclass.Fatal:
			if s.fatal == nil {
				s.fatal = f.err
			}
			others = append(others, f)
		default:
			others = append(others, f)
		}
	}
	if len(others) == 0 {
		return
	}
	first := others[0].err
	s.log.Error("queued actions not applied", "count", len(others), "err", first)
	err := fmt.Errorf("es sink: %d queued actions were not applied (see Failed): %w", len(others), first)
	class := errclass.Of(first)
	if class == errclass.Unclassified {
		class = errclass.Retryable
	}
	s.deferred = &errclass.Error{Class: class, Err: err}
}

// bulkResult is the outcome of one bulk request.
type bulkResult struct {
	// err, when set, failed the whole request: it is retried unless split
	// or fatal is set.
	err   error
	split bool // the request was refused as a whole, for one of its actions
	fatal bool
	// retryAfter is the wait a 429 asked for.
	retryAfter time.Duration
	// When err is nil: the actions the server rejected, and those to retry
	// (with the reason of the first).
	rejected []failure
	retry    []*action
	retryErr error
}

// send sends acts in one bulk request, retrying what failed for a
// temporary reason and splitting a request refused as a whole, and returns
// the actions that could not be applied.
func (s *ES) send(ctx context.Context, acts []*action) []failure {
	var failed []failure
	var retryAfter time.Duration
	var lastErr error
	err := retry.Do(ctx, retry.Policy{
		Retries:   s.opts.Retries,
		Initial:   s.opts.RetryWait,
		Max:       30 * time.Second,
		Retryable: func(error) bool { return true }, // the attempt decides
		Floor:     func(error) time.Duration { return retryAfter },
		Notify: func(r retry.Retry) {
			s.log.Debug("retrying bulk request", "actions", len(acts), "wait", r.Wait, "err", r.Err)
		},
		GiveUp: func(_ int, err error) error {
			return errclass.Retryablef("%w (gave up after %d retries)", err, s.opts.Retries)
		},
	}, func() error {
		// Changes are stamped when they are sent, at each attempt: one
		// that becomes visible later than another's is stamped later.
		now := time.Now().UTC()
		for _, a := range acts {
			a.stamp(now)
		}
		res := s.bulk(ctx, acts)
		retryAfter = res.retryAfter
		switch {
		case res.fatal:
			failed = append(failed, failAll(acts, res.err)...)
		case res.split && len(acts) == 1:
			failed = append(failed, failure{acts[0], errclass.NewPermanent(res.err)})
		case res.split:
			s.log.Debug("bulk request refused, splitting it", "actions", len(acts), "err", res.err)
			half := len(acts) / 2
			failed = append(failed, s.send(ctx, acts[:half])...)
			failed = append(failed, s.send(ctx, acts[half:])...)
		case res.err != nil:
			lastErr = res.err
			return res.err
		default:
			failed = append(failed, res.rejected...)
			if len(res.retry) > 0 {
				acts, lastErr = res.retry, res.retryErr
				return res.retryErr
			}
		}
		return nil
	})
	if err == nil {
		return failed
	}
	if cerr := ctx.Err(); cerr != nil && err == cerr && lastErr != nil {
		err = errclass.Retryablef("%w (retry cut short: %w)", lastErr, err)
	}
	return append(failed, failAll(acts, err)...)
}

func failAll(acts []*action, err error) []failure {
	out := make([]failure, len(acts))
	for i, a := range acts {
		out[i] = failure{a, err}
	}
	return out
}

// bulkItem is one item of a bulk response.
type bulkItem struct {
	Status int             `json:"status"`
	Error  json.RawMessage `json:"error"`
}

// bulk sends acts in one _bulk request and judges the response.
func (s *ES) bulk(ctx context.Context, acts []*action) bulkResult {
	var body bytes.Buffer
	for _, a := range acts {
		body.Write(a.meta)
		body.WriteByte('\n')
		if a.source != nil {
			body.Write(a.source)
			body.WriteByte('\n')
		}
	}
	resp, err := s.do(ctx, http.MethodPost, "/_bulk", nil, "application/x-ndjson", body.Bytes())
	if err != nil {
		return bulkResult{err: err}
	}
	if resp.status != http.StatusOK {
		err := s.statusError("bulk request", resp)
		switch errclass.Of(err) {
		case errclass.Fatal:
			return bulkResult{err: err, fatal: true}
		case errclass.Retryable:
			return bulkResult{err: err, retryAfter: retryAfter(resp.header)}
		default:
			return bulkResult{err: err, split: true}
		}
	}
	var br struct {
		Error json.RawMessage       `json:"error"`
		Items []map[string]bulkItem `json:"items"`
	}
	if err := json.Unmarshal(resp.body, &br); err != nil {
		return bulkResult{err: errclass.Retryablef("es sink %s: bulk request: malformed response: %w", s.base, err)}
	}
	// ZincSearch answers 200 with a top-level error when an action stops
	// the request; the items before it were applied.
	if e := bytes.TrimSpace(br.Error); len(e) > 0 && !bytes.Equal(e, []byte("null")) && !bytes.Equal(e, []byte(`""`)) {
		return bulkResult{err: fmt.Errorf("es sink %s: bulk request failed: %s", s.base, itemReason(e)), split: true}
	}
	if len(br.Items) != len(acts) {
		return bulkResult{err: fmt.Errorf("es sink %s: bulk request: %d items answered for %d actions", s.base, len(br.Items), len(acts)), split: true}
	}
	var res bulkResult
	for i, a := range acts {
		var item bulkItem
		for _, v := range br.Items[i] {
			item = v
		}
		switch {
		case item.Status >= 200 && item.Status < 300:
		case a.op == "delete" && item.Status == http.StatusNotFound:
		case item.Status == http.StatusUnauthorized || item.Status == http.StatusForbidden:
			res.rejected = append(res.rejected, failure{a, errclass.Fatalf("es sink %s: %s %s: HTTP %d: %s (the credentials may not write the index)",
				s.base, a.kind, short(a.uri), item.Status, itemReason(item.Error))})
		case retryableStatus(item.Status):
			res.retry = append(res.retry, a)
			if res.retryErr == nil {
				res.retryErr = errclass.Retryablef("es sink %s: %s %s: HTTP %d: %s", s.base, a.kind, short(a.uri), item.Status, itemReason(item.Error))
			}
		default:
			res.rejected = append(res.rejected, failure{a, errclass.Permanentf("es sink %s: %s %s rejected: HTTP %d: %s",
				s.base, a.kind, short(a.uri), item.Status, itemReason(item.Error))})
		}
	}
	return res
}

// waitVisible waits until the resource documents that acts wrote (and did
// not fail to) are visible to searches, as ZincSearch applies writes later
// than it acknowledges them. It gives up, with a warning, after
// Options.VisibleTimeout.
func (s *ES) waitVisible(ctx context.Context, acts []*action, failed []failure) {
	skip := make(map[*action]bool, len(failed))
	for _, f := range failed {
		skip[f.a] = true
	}
	want := map[string]string{} // _id → rev ("" for a delete)
	for _, a := range acts {
		if a.resource() && !skip[a] {
			want[a.id] = a.rev
		}
	}
	deadline := time.Now().Add(s.opts.VisibleTimeout)
	wait := 5 * time.Millisecond
	for len(want) > 0 {
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		got, err := s.revs(ctx, ids)
		if err == nil {
			for id, rev := range want {
				if have, ok := got[id]; ok == (rev != "") && have == rev {
					delete(want, id)
				}
			}
		}
		if len(want) == 0 {
			return
		}
		if time.Now().After(deadline) || retry.Sleep(ctx, wait) != nil {
			s.log.Warn("written documents not visible yet", "count", len(want), "err", err)
			return
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// revs returns the rev of each of the resource documents ids that a search
// finds.
func (s *ES) revs(ctx context.Context, ids []string) (map[string]string, error) {
	const chunk = 1000
	out := make(map[string]string, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), chunk)
		hits, err := s.search(ctx, s.opts.Index, map[string]any{
			"query":   map[string]any{"ids": map[string]any{"values": ids[:n]}},
			"size":    n,
			"_source": []string{"rev"},
		})
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			var d storedDoc
			if err := json.Unmarshal(h.Source, &d); err != nil {
				return nil, errors.New("es sink: malformed search hit")
			}
			out[h.ID] = d.Rev
		}
		ids = ids[n:]
	}
	return out, nil
}
