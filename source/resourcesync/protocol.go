package resourcesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source"
)

// Name is the protocol's name in the registry.
const Name = "resourcesync"

// Protocol returns ResourceSync as a protocol of the registry: the
// fallback of --protocol auto (it has no probe: discovery finds a
// ResourceSync source from a bare site URL, a Source Description or any
// of its documents).
func Protocol() source.Protocol {
	return source.Protocol{
		Name:  Name,
		Help:  "Resource and Change Dumps, else Resource and Change Lists",
		New:   newPlanner,
		Whole: manifest.WellFormed,
		Options: []source.Option{{Name: "prefer", Default: "dump", Tuning: true,
			Help: "dump: Resource/Change Dumps, lists where no dump exists; list: Resource/Change Lists first",
			Check: func(v string) error {
				if v != "dump" && v != "list" {
					return errors.New("want dump or list")
				}
				return nil
			}},
			{Name: "identity", Default: "loc",
				Help: "the URI a resource an aggregator republishes is held under: loc (the aggregator's, as the specification says) or via (the original's, its rs:ln rel=\"via\": one identity across mirrors); its bytes come from the aggregator either way",
				Check: func(v string) error {
					if v != "loc" && v != "via" {
						return errors.New("want loc or via")
					}
					return nil
				}}},
	}
}

// newPlanner is the Protocol's New: one resource set, or all of them.
func newPlanner(s source.Settings, env source.Services) (source.Planner, error) {
	if len(s.Sets) > 1 {
		return nil, fmt.Errorf("--set: a ResourceSync source is synced one resource set at a time, or all of them (%d sets given)", len(s.Sets))
	}
	return &Planner{
		Open:            env.OpenDocument,
		OpenPackage:     env.OpenPackage,
		Client:          env.Client,
		MaxDocumentSize: env.MaxDocumentSize,
		Log:             env.Log,
		PreferList:      s.Option(Protocol(), "prefer") == "list",
		ViaIdentity:     s.Option(Protocol(), "identity") == "via",
		Concurrency:     env.Concurrency,
		ScratchDir:      env.ScratchDir,
	}, nil
}

// document returns the reader options of the planner's documents.
func (d *Planner) docOptions() manifest.Options {
	o := d.Document
	if o.Logger == nil {
		o.Logger = d.Log
	}
	return o
}

// openDocument opens the ResourceSync document at docURL (see Open); the
// function returned closes it.
func (d *Planner) openDocument(ctx context.Context, docURL string) (*manifest.Reader, func(), error) {
	rc, err := d.Open(ctx, docURL)
	return d.reader(rc, err, func(err error) error { return errclass.About(docURL, err) })
}

// openPackage opens the manifest.xml of change package j (see
// OpenPackage); the function returned closes it.
func (d *Planner) openPackage(ctx context.Context, j source.Package) (*manifest.Reader, func(), error) {
	rc, err := d.OpenPackage(ctx, j)
	return d.reader(rc, err, func(err error) error {
		return &source.StageError{Stage: "manifest", Err: fmt.Errorf("manifest.xml: %w", err)}
	})
}

// reader starts reading the document rc opened (unless opening it failed
// with err); a document that does not begin as one fails as wrap says.
func (d *Planner) reader(rc io.ReadCloser, err error, wrap func(error) error) (*manifest.Reader, func(), error) {
	if err != nil {
		return nil, nil, err
	}
	rd, err := manifest.NewReader(rc, d.docOptions())
	if err != nil {
		rc.Close()
		return nil, nil, wrap(err)
	}
	return rd, func() {
		if rd.Ended() {
			source.ReadWhole(rc)
		}
		rc.Close()
	}, nil
}

// packageIndex reads a dump package's manifest.xml (or the copy of it the
// package links) for the executor: a Resource Dump Manifest for a
// baseline's package, a Change Dump Manifest for a change package.
type packageIndex struct {
	change bool
	doc    manifest.Options
	set    string
	pkg    string
	at     time.Time
	via    bool // see Planner.ViaIdentity
}

var _ source.Index = packageIndex{}

func (x packageIndex) Read(r io.Reader, log *slog.Logger) (source.Entries, error) {
	doc := x.doc
	doc.Logger = log
	rd, err := manifest.NewReader(r, doc)
	if err != nil {
		return nil, fmt.Errorf("manifest.xml: %w", err)
	}
	want := manifest.ResourceDumpManifest
	if x.change {
		want = manifest.ChangeDumpManifest
	}
	if c := rd.Header().Metadata.Capability; c != want {
		return nil, errclass.Permanentf("manifest.xml: capability %q, expected %q", c, want)
	}
	return &manifestEntries{rd: rd, x: x}, nil
}

// manifestEntries are the entries of a package's manifest, as records.
type manifestEntries struct {
	rd *manifest.Reader
	x  packageIndex
}

func (m *manifestEntries) Next() (*source.Record, error) {
	e, err := m.rd.Next()
	if err != nil {
		var ee *manifest.EntryError
		switch {
		case errors.Is(err, io.EOF):
			return nil, io.EOF
		case errors.As(err, &ee):
			return nil, &source.EntryError{URI: ee.Loc, Err: err}
		}
		return nil, fmt.Errorf("manifest.xml: %w", err)
	}
	return recordOf(e, m.x.set, m.x.pkg, m.x.at, m.x.via), nil
}

// index returns the index of package j, a change package's when change
// says so.
func (d *Planner) index(j *source.Package, change bool) source.Index {
	return packageIndex{change: change, doc: d.docOptions(), set: j.ResourceSet, pkg: j.URL, at: j.At, via: d.ViaIdentity}
}
