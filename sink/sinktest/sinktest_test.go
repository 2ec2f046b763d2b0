package sinktest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sync"
	"testing"

	"github.com/rsharvest/rsharvest/sink"
)

// memSink is a minimal correct sink, to show that the suite asks nothing
// of a sink beyond its contracts.
type memSink struct {
	mu   sync.Mutex
	held map[string][]byte
}

var (
	_ sink.Sink      = (*memSink)(nil)
	_ sink.Inventory = (*memSink)(nil)
)

func (m *memSink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, body); err != nil {
		return fmt.Errorf("mem: put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem: put: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[r.URI] = buf.Bytes()
	return nil
}

func (m *memSink) Delete(_ context.Context, uri string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, uri)
	return nil
}

func (m *memSink) Close(context.Context) error { return nil }

func (m *memSink) Get(_ context.Context, uri string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.held[uri]
	if !ok {
		return nil, fmt.Errorf("mem: get %q: %w", uri, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *memSink) Walk(_ context.Context, fn func(string) error) error {
	m.mu.Lock()
	uris := make([]string, 0, len(m.held))
	for uri := range m.held {
		uris = append(uris, uri)
	}
	m.mu.Unlock()
	for _, uri := range uris {
		if err := fn(uri); err != nil {
			return err
		}
	}
	return nil
}

func TestRunOnMemorySink(t *testing.T) {
	Run(t, func(*testing.T) sink.Sink { return &memSink{held: map[string][]byte{}} })
}

func TestOddURIsDistinct(t *testing.T) {
	uris := OddURIs()
	sorted := slices.Clone(uris)
	slices.Sort(sorted)
	if c := slices.Compact(sorted); len(c) != len(uris) {
		t.Fatalf("OddURIs has %d duplicates", len(uris)-len(c))
	}
	if longest := slices.MaxFunc(uris, func(a, b string) int { return len(a) - len(b) }); len(longest) < 5000 {
		t.Errorf("longest odd URI is %d bytes, want ≥ 5000", len(longest))
	}
}

func TestReaders(t *testing.T) {
	tests := []struct {
		name     string
		r        io.Reader
		wantN    int64
		wantFail bool
	}{
		{"gen", genReader(3, 1000), 1000, false},
		{"fail after 10", &failReader{r: genReader(3, 1000), after: 10, err: io.ErrUnexpectedEOF}, 10, true},
		{"fail instead of EOF", &failReader{r: genReader(3, 1000), after: 1000, err: io.ErrUnexpectedEOF}, 1000, true},
		{"last read fails", &lastReadErrReader{r: genReader(3, 1000), left: 1000, err: io.ErrUnexpectedEOF}, 1000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := io.Copy(io.Discard, tt.r)
			if n != tt.wantN || (err != nil) != tt.wantFail {
				t.Fatalf("copied %d bytes, err %v; want %d bytes, failure %t", n, err, tt.wantN, tt.wantFail)
			}
		})
	}
}
