package solr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/rsharvest/rsharvest/errclass"
)

// enqueue appends o to the queue and, when that fills it, sends it. A
// failure to send is kept for the next call (see admit); an interrupted
// send leaves its operations queued.
func (s *Solr) enqueue(ctx context.Context, o op) {
	s.mu.Lock()
	s.queue = append(s.queue, o)
	s.queueBytes += o.size()
	s.queued++
	full := s.fullLocked()
	s.mu.Unlock()
	if !full {
		return
	}
	s.sending.Lock()
	defer s.sending.Unlock()
	if err := s.sendQueue(ctx, false); err != nil {
		s.log.Debug("the queue was not sent", "err", err)
	}
}

func (s *Solr) fullLocked() bool {
	return len(s.queue) >= s.opts.BatchSize || s.queueBytes >= s.opts.BatchMaxBytes
}

// sendQueue sends the queue, a batch at a time, while it is full, or until
// it is empty when all is set. The caller holds s.sending. A batch that
// fails is recorded (Failed) and its error kept for admit; sendQueue then
// goes on with the next. It returns an error only when it stopped early:
// the sink's fatal error, or ctx's, in which case the batch being sent is
// back at the head of the queue.
func (s *Solr) sendQueue(ctx context.Context, all bool) error {
	for {
		s.mu.Lock()
		if s.fatal != nil {
			err := s.fatal
			s.mu.Unlock()
			return err
		}
		if len(s.queue) == 0 || (!all && !s.fullLocked()) {
			s.mu.Unlock()
			return nil
		}
		n, size := 0, 0
		for n < len(s.queue) && n < s.opts.BatchSize && (n == 0 || size+s.queue[n].size() <= s.opts.BatchMaxBytes) {
			size += s.queue[n].size()
			n++
		}
		batch := append([]op(nil), s.queue[:n]...)
		clear(s.queue[:n]) // let the documents go once sent
		s.queue = s.queue[n:]
		s.queueBytes -= size
		s.mu.Unlock()

		done, err := s.send(ctx, batch)
		if err == nil {
			continue
		}
		rest := batch[done:]
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			s.mu.Lock()
			s.queue = append(rest, s.queue...)
			for _, o := range rest {
				s.queueBytes += o.size()
			}
			s.mu.Unlock()
			return err
		}
		s.log.Warn("a batch failed", "operations", len(rest), "first", short(rest[0].uri), "err", err)
		s.mu.Lock()
		for _, o := range rest {
			s.failLocked(o, err)
		}
		if errclass.IsFatal(err) {
			s.fatal = err
		} else {
			s.pending = append(s.pending, batchError(len(rest), rest[0].uri, err))
		}
		s.mu.Unlock()
	}
}

// batchError describes a batch that was not applied, keeping err's class
// (retryable when it has none).
func batchError(n int, first string, err error) error {
	if errclass.Of(err) == errclass.Unclassified {
		err = errclass.NewRetryable(err)
	}
	return fmt.Errorf("solr: %d queued operations (the first on %s) were not applied: %w", n, short(first), err)
}

// send sends a batch in order: one request per run of adds or of deletes.
// When Solr rejects a run's request as bad (400, 413), its operations are
// sent one by one, and those rejected alone are recorded as permanent
// failures. It returns how many operations were dealt with, and the error
// that stopped it.
func (s *Solr) send(ctx context.Context, batch []op) (int, error) {
	for i := 0; i < len(batch); {
		j := i + 1
		for j < len(batch) && batch[j].del == batch[i].del {
			j++
		}
		run := batch[i:j]
		err := s.sendRun(ctx, run)
		if isBadRequest(err) {
			for k := range run {
				if len(run) > 1 {
					err = s.sendRun(ctx, run[k:k+1])
				}
				switch {
				case isBadRequest(err):
					s.log.Warn("document rejected", "uri", short(run[k].uri), "err", err)
					s.mu.Lock()
					s.failLocked(run[k], err)
					s.mu.Unlock()
				case err != nil:
					return i + k, err
				}
			}
			err = nil
		}
		if err != nil {
			return i, err
		}
		i = j
	}
	return len(batch), nil
}

// isBadRequest reports whether Solr refused a request for its content.
func isBadRequest(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.StatusCode == http.StatusBadRequest || se.StatusCode == http.StatusRequestEntityTooLarge)
}

// sendRun sends a run of adds, as a JSON array of documents, or of
// deletes.
func (s *Solr) sendRun(ctx context.Context, run []op) error {
	var body bytes.Buffer
	if !run[0].del {
		body.WriteByte('[')
		for i, o := range run {
			if i > 0 {
				body.WriteByte(',')
			}
			body.Write(o.doc)
		}
		body.WriteByte(']')
	} else {
		ids := make([]string, len(run))
		for i, o := range run {
			ids[i] = o.id
		}
		var cmd any = map[string]any{"delete": ids}
		if len(ids) == 1 {
			cmd = map[string]any{"delete": map[string]string{"id": ids[0]}}
		}
		b, err := json.Marshal(cmd)
		if err != nil {
			return errclass.Permanentf("solr: encoding a delete: %w", err)
		}
		body.Write(b)
	}
	q := url.Values{"wt": {"json"}}
	if s.opts.CommitWithin > 0 {
		q.Set("commitWithin", strconv.FormatInt(s.opts.CommitWithin.Milliseconds(), 10))
	}
	_, err := s.do(ctx, request{
		method: http.MethodPost, handler: "update", query: q,
		contentType: "application/json", body: body.Bytes(), ops: len(run),
	})
	return err
}

// commit asks for a hard commit. The caller holds s.sending.
func (s *Solr) commit(ctx context.Context) error {
	s.mu.Lock()
	queued := s.queued
	s.mu.Unlock()
	_, err := s.do(ctx, request{
		method: http.MethodPost, handler: "update",
		query:       url.Values{"commit": {"true"}, "wt": {"json"}},
		contentType: "application/json", body: []byte("{}"),
	})
	if err != nil {
		return fmt.Errorf("solr %s: commit: %w", s.name, err)
	}
	s.mu.Lock()
	s.committed = max(s.committed, queued)
	s.mu.Unlock()
	return nil
}

// sync sends the queue and commits, when anything was queued since the
// last commit, so that Get and Walk see every operation queued before.
func (s *Solr) sync(ctx context.Context) error {
	s.sending.Lock()
	defer s.sending.Unlock()
	s.mu.Lock()
	clean := s.queued == s.committed && len(s.queue) == 0
	s.mu.Unlock()
	if clean {
		return nil
	}
	if err := s.sendQueue(ctx, true); err != nil {
		return err
	}
	return s.commit(ctx)
}
