package oaipmh

import (
	"context"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
)

// Name is the protocol's name in the registry.
const Name = "oai-pmh"

// Protocol returns OAI-PMH 2.0 as a protocol of the registry; with
// --protocol auto, a source is an OAI-PMH repository when its URL may be a
// base URL and it answers Identify.
func Protocol() source.Protocol {
	return source.Protocol{
		Name: Name,
		Help: "a repository's records by ListRecords, each set its own resource set",
		New: func(s source.Settings, env source.Services) (source.Planner, error) {
			return &Planner{Client: env.Client, MetadataPrefix: s.Format, MaxDocumentSize: max(env.MaxDocumentSize, 0),
				Log: env.Log, Concurrency: env.Concurrency, SetSpecs: s.Sets, MaxPages: s.MaxPages}, nil
		},
		Probe: func(ctx context.Context, c *fetch.Client, url string) (bool, error) {
			if !MayBeRepository(url) {
				return false, nil
			}
			_, err := (&Planner{Client: c}).Identify(ctx, url)
			return err == nil, err
		},
		NoDigests: true,
	}
}
