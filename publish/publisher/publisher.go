// Package publisher runs a publication (package publish) as the publish
// commands and the daemon do: it opens what to publish from (the state
// store, or the documents an es sink wrote) and the sink holding the
// bodies, publishes one generation at a time however many callers ask at
// once, and serves what it published.
package publisher

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rsharvest/rsharvest/internal/httpserve"
	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/publish/fromes"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/state"
)

// ErrNoInventory is returned by OpenBodies for a sink that cannot give
// back what it holds (it is no sink.Inventory).
var ErrNoInventory = errors.New("this sink cannot give back what it holds")

// OpenBodies opens the sink spec with reg as the inventory of the bodies
// (what dumps pack and the server serves as copies); "" opens nothing and
// gives a nil inventory. close closes the sink.
func OpenBodies(ctx context.Context, reg sink.Registry, spec string) (inv sink.Inventory, close func(context.Context) error, err error) {
	if spec == "" {
		return nil, func(context.Context) error { return nil }, nil
	}
	s, err := reg.Open(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	inv, ok := s.(sink.Inventory)
	if !ok {
		s.Close(ctx)
		return nil, nil, fmt.Errorf("%s: %w", sink.Redact(spec), ErrNoInventory)
	}
	return inv, s.Close, nil
}

// OpenHoldings opens what to publish from: the resource and change
// documents of the es sink's index fromES (see fromes.Open) when it is not
// "", else the state store file stateFile. close releases it.
func OpenHoldings(ctx context.Context, stateFile, fromES string, opts ...state.Option) (h publish.Holdings, close func() error, err error) {
	if fromES != "" {
		h, err := fromes.Open(ctx, fromES, nil)
		if err != nil {
			return nil, nil, err
		}
		return h, func() error { return nil }, nil
	}
	st, err := state.Open(ctx, stateFile, opts...)
	if err != nil {
		return nil, nil, err
	}
	return publish.FromState(st), st.Close, nil
}

// Publisher publishes Holdings with Options, one generation at a time
// however many callers ask at once (the daemon publishes after each
// harvest, several harvests running at once). It is safe for concurrent
// use.
type Publisher struct {
	Holdings publish.Holdings
	Options  publish.Options
	// Published, when set, is told of each generation published, in the
	// order they were.
	Published func(publish.Result)

	mu sync.Mutex
}

// Run publishes one generation (publish.Publish), after any other call's
// has ended.
func (p *Publisher) Run(ctx context.Context) (publish.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res, err := publish.Publish(ctx, p.Holdings, p.Options)
	if err != nil {
		return res, err
	}
	if p.Published != nil {
		p.Published(res)
	}
	return res, nil
}

// Serve serves srv on listen until stop is called, and gives the address
// it listens on. It closes nothing of srv's. A failure to listen is an
// *httpserve.ListenError; any other error is srv's (its BaseURL).
func Serve(ctx context.Context, srv *publish.Server, listen string) (stop func(), addr string, err error) {
	h, err := srv.Handler()
	if err != nil {
		return nil, "", err
	}
	return httpserve.Start(ctx, listen, h)
}
