package oaipmh

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
)

// Name is the protocol's name in the registry.
const Name = "oai-pmh"

// Protocol returns OAI-PMH 2.0 as a protocol of the registry; with
// --protocol auto, a source is an OAI-PMH repository when its URL may be a
// base URL and it answers Identify.
func Protocol() source.Protocol {
	p := source.Protocol{
		Name: Name,
		Help: "a repository's records by ListRecords, each set its own resource set",
		Probe: func(ctx context.Context, c *fetch.Client, url string) (bool, error) {
			if !MayBeRepository(url) {
				return false, nil
			}
			_, err := (&Planner{Client: c}).Identify(ctx, url)
			return err == nil, err
		},
		NoDigests: true,
		Options: []source.Option{
			{Name: "metadata-prefix", Default: DefaultMetadataPrefix, Help: "OAI-PMH: the metadata format harvested (each format its own resource set)",
				Check: func(v string) error {
					if v == "" {
						return errors.New("must not be empty")
					}
					return nil
				}},
			{Name: "max-pages", Default: "0", Tuning: true, Help: fmt.Sprintf("OAI-PMH: the most pages of one list or date window a run reads; a repository still sending resumption tokens then is stopped, the run partial, and the next run goes on from there (0: %d)", DefaultMaxPages),
				Check: func(v string) error {
					if n, err := strconv.Atoi(v); err != nil || n < 0 {
						return errors.New("want a number of pages, at least 0")
					}
					return nil
				}},
		},
	}
	p.New = func(s source.Settings, env source.Services) (source.Planner, error) {
		pages, _ := strconv.Atoi(s.Option(p, "max-pages")) // checked as given
		return &Planner{Client: env.Client, MetadataPrefix: s.Option(p, "metadata-prefix"), MaxDocumentSize: max(env.MaxDocumentSize, 0),
			Log: env.Log, Concurrency: env.Concurrency, SetSpecs: s.Sets, MaxPages: pages}, nil
	}
	return p
}
