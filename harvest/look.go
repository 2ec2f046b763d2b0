package harvest

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// Look looks at a source without harvesting it — its tree of ResourceSync
// documents, what an OAI-PMH repository says of itself, one record — with
// the requests a harvest of it would make: its headers (to its origin
// alone), rate, retries, the address rule, the credentials of its URL.
type Look struct {
	// Job holds the settings of the requests, as a harvest's: Headers,
	// Rate, Retries, AllowPrivateAddresses, MaxDocumentSize (what
	// Discover reads of one document) — the settings LookSettings names.
	Job Job
	// MaxDocuments bounds the documents Discover reads.
	MaxDocuments int
	// UserAgent is sent with every request; Log takes the warnings.
	UserAgent string
	Log       *slog.Logger
}

// LookSettings are the settings of Look.Job a command that looks at a
// source takes.
var LookSettings = []string{"header", "rate", "retries", "allow-private-addresses", "max-document-size"}

// DefaultLook returns a Look at its defaults.
func DefaultLook() Look {
	return Look{Job: DefaultJob(), MaxDocuments: resourcesync.DefaultMaxDocuments}
}

// Found is what a look found: written for people by WriteText, as JSON by
// encoding/json.
type Found interface {
	WriteText(io.Writer) error
}

// client is the HTTP client of a look at src, and the URL to ask.
func (l Look) client(src string) (*fetch.Client, string, error) {
	hdr, err := l.Job.headerValues()
	if err != nil {
		return nil, "", err
	}
	if l.Job.Rate < 0 || l.Job.Retries < 0 {
		return nil, "", invalidf("--rate and --retries must not be negative")
	}
	src, auth := source.Credentials(src)
	if auth != "" && hdr.Get("Authorization") == "" {
		hdr.Set("Authorization", auth)
	}
	return fetch.New(fetch.Options{UserAgent: l.UserAgent, Header: hdr, HeaderOrigins: []string{src}, Rate: l.Job.Rate, Retries: FetchRetries(l.Job.Retries), Logger: l.Log,
		Addresses: &fetch.AddressPolicy{Source: src, Allow: l.Job.AllowPrivateAddresses}}), src, nil
}

// ask runs what, and makes a failure to read the source at (named
// without its credentials, as source.Credentials leaves it) a
// *SourceError.
func ask[T any](ctx context.Context, at string, what func() (T, error)) (T, error) {
	v, err := what()
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) && !IsInvalid(err) {
		return v, &pipeline.SourceError{URL: at, Err: err}
	}
	return v, err
}

// Discover finds a source's Source Description, resource sets and
// capability documents from any URL (see resourcesync.Discover).
func (l Look) Discover(ctx context.Context, url string) (*resourcesync.Source, error) {
	c, start, err := l.client(url)
	if err != nil {
		return nil, err
	}
	return ask(ctx, start, func() (*resourcesync.Source, error) {
		return resourcesync.Discover(ctx, c, start, resourcesync.Options{MaxDocuments: l.MaxDocuments, MaxDocumentSize: l.Job.MaxDocumentSize, Logger: l.Log})
	})
}

// oai runs f with an OAI-PMH planner asking the repository at base.
func (l Look) oai(ctx context.Context, base string, f func(p *oaipmh.Planner, base string) (Found, error)) (Found, error) {
	c, at, err := l.client(base)
	if err != nil {
		return nil, err
	}
	return ask(ctx, at, func() (Found, error) { return f(&oaipmh.Planner{Client: c}, at) })
}

// Identify is what an OAI-PMH repository says of itself.
func (l Look) Identify(ctx context.Context, base string) (Found, error) {
	return l.oai(ctx, base, func(p *oaipmh.Planner, at string) (Found, error) { return p.Identify(ctx, at) })
}

// Formats are the metadata formats an OAI-PMH repository offers.
func (l Look) Formats(ctx context.Context, base string) (Found, error) {
	return l.oai(ctx, base, func(p *oaipmh.Planner, at string) (Found, error) { return p.Formats(ctx, at) })
}

// Sets are the sets of an OAI-PMH repository.
func (l Look) Sets(ctx context.Context, base string) (Found, error) {
	return l.oai(ctx, base, func(p *oaipmh.Planner, at string) (Found, error) { return p.Sets(ctx, at) })
}

// Record is one record of an OAI-PMH repository (GetRecord) in format
// prefix ("": the default), its metadata as a harvest stores it.
func (l Look) Record(ctx context.Context, base, identifier, prefix string) (Found, error) {
	return l.oai(ctx, base, func(p *oaipmh.Planner, at string) (Found, error) {
		rec, err := p.GetRecord(ctx, at, identifier, prefix)
		if err != nil {
			return nil, err
		}
		return rec.View(), nil
	})
}
