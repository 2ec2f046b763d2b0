package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/rsharvest/rsharvest/fetch"
)

// Protocol is one protocol a source may speak: its name, the planner it
// plans tasks with, and how --protocol auto recognises it. A new protocol
// is a package below source that returns one, and one line in the
// registry (see source/protocols).
type Protocol struct {
	// Name is what --protocol and a configuration's protocol key say.
	Name string
	// Help is a short description, for --protocol's help.
	Help string
	// New makes the planner of a job with settings s, served by env. It
	// does no I/O, and may be called with a zero env to check s: its
	// error is a setting wrong for this protocol.
	New func(s Settings, env Services) (Planner, error)
	// Probe reports whether the source at url speaks this protocol (with
	// --protocol auto). A protocol without one is the fallback, chosen
	// when no probe says yes.
	Probe func(ctx context.Context, c *fetch.Client, url string) (bool, error)
	// Whole, when set, judges whether a document body read from r is
	// whole, for a document its planner did not read to its proper end
	// (see Services.OpenDocument: a planner that reads only a document's
	// head, or stops early): the executor keeps a copy of such a document
	// for the next run's conditional request only then (a body cut short
	// would stand for the document on every 304). Nil: only the copies of
	// documents the planner read whole are kept.
	Whole func(r io.Reader) bool
	// CompareVersions, when set, orders the versions of a resource the
	// protocol's records carry (Record.Version): negative when a is older
	// than b, 0 when they are the same version, positive when a is newer.
	// A record listing an older version than the one held is then not
	// applied, and reported. Nil: versions are only the same or not.
	CompareVersions func(a, b string) int
	// NoDigests says the protocol's records never give a digest: what
	// they bring is checked by length alone, and --require-hash is no
	// remedy (the summary says so).
	NoDigests bool
	// WholeListing says a plan, a baseline's or an incremental's, names
	// every resource the source holds, as records, every time (it never
	// resumes from marks, nor leaves out what is held): what is held and
	// not named is no longer listed, which the executor then reports, or
	// deletes (pipeline.Options.DeleteUnlisted).
	WholeListing bool
	// Options are the settings the protocol declares for itself
	// (OAI-PMH's metadata-prefix): each a flag of the commands that
	// harvest and a key of config files and sites, handed to New in
	// Settings.Options.
	Options []Option
}

// Option is a setting a protocol declares: given as text, read by the
// protocol's planner (Settings.Option).
type Option struct {
	// Name is the flag's name ("metadata-prefix"); its file key has '_'
	// for '-'.
	Name string
	// Help is the flag's help; Default its value when it is not given.
	Help, Default string
	// Check, when set, checks a value as given: its error says what is
	// wrong.
	Check func(string) error
	// Tuning says that the option is of how a harvest goes (max-pages),
	// not of what it harvests (metadata-prefix): a harvest of registry
	// sites may lay it over a site's for one run (config.OfRun).
	Tuning bool
}

// Settings are what a job says of its source that a protocol may read.
type Settings struct {
	// Sets are the resource sets to harvest (empty: all of them).
	Sets []string
	// Options are the protocols' options given (Protocol.Options), by
	// name; one not given has its default.
	Options map[string]string
}

// Option is the value of option name of protocol p in s: as given, else
// its default.
func (s Settings) Option(p Protocol, name string) string {
	if v, ok := s.Options[name]; ok {
		return v
	}
	for _, o := range p.Options {
		if o.Name == name {
			return o.Default
		}
	}
	return ""
}

// Services are what the executor offers the planner of one run.
type Services struct {
	// Client makes the run's requests (rate limit, retries, the address
	// rule).
	Client *fetch.Client
	// Log takes the planner's warnings.
	Log *slog.Logger
	// OpenDocument reads the document at url the executor's way: spooled,
	// under the run's size cap, asked for conditionally when a copy is
	// kept, decompressed. Closing it releases the spool. A planner that
	// read the document to its proper end, whole as its protocol reads
	// it, says so with ReadWhole before closing it: a copy is then kept
	// for the next run's conditional request without a second reading
	// (of another document, only when the protocol's Whole judges it
	// whole).
	OpenDocument func(ctx context.Context, url string) (io.ReadCloser, error)
	// OpenPackage downloads package p for the planner to read its index
	// entry (the archive's manifest.xml), and keeps the package for the
	// run to apply. An error naming its stage is a *StageError.
	OpenPackage func(ctx context.Context, p Package) (io.ReadCloser, error)
	// MaxDocumentSize caps one document's bytes (0: no cap).
	MaxDocumentSize int64
	// Concurrency is how many documents or packages the planner may read
	// at once (at least 1).
	Concurrency int
	// ScratchDir holds the planner's temporary files ("": the system's).
	ScratchDir string
}

// ErrUnknownProtocol is wrapped by Registry.Choose's error for a name no
// protocol has.
var ErrUnknownProtocol = errors.New("no such protocol")

// Registry lists the protocols a harvester knows, in the order --protocol
// auto probes them.
type Registry []Protocol

// Lookup returns the protocol named name.
func (reg Registry) Lookup(name string) (Protocol, bool) {
	for _, p := range reg {
		if p.Name == name {
			return p, true
		}
	}
	return Protocol{}, false
}

// Options returns the options of every protocol, each name once, in the
// protocols' order.
func (reg Registry) Options() []Option {
	var out []Option
	seen := map[string]bool{}
	for _, p := range reg {
		for _, o := range p.Options {
			if !seen[o.Name] {
				seen[o.Name] = true
				out = append(out, o)
			}
		}
	}
	return out
}

// Names returns the protocols' names, in order.
func (reg Registry) Names() []string {
	out := make([]string, len(reg))
	for i, p := range reg {
		out[i] = p.Name
	}
	return out
}

// Help describes the protocols for --protocol's help: "auto (…), name
// (help), …".
func (reg Registry) Help() string {
	parts := []string{"auto (the first protocol whose probe the source answers, else " + reg.fallback().Name + ")"}
	for _, p := range reg {
		parts = append(parts, fmt.Sprintf("%s (%s)", p.Name, p.Help))
	}
	return strings.Join(parts, ", ")
}

// fallback is the protocol chosen when no probe says yes: the first
// without a probe.
func (reg Registry) fallback() Protocol {
	for _, p := range reg {
		if p.Probe == nil {
			return p
		}
	}
	return Protocol{}
}

// Choose returns the protocol named name, or with "auto" the first whose
// probe says the source at url speaks it, else the fallback. A probe that
// fails only means "not this one", unless ctx ended.
func (reg Registry) Choose(ctx context.Context, name string, c *fetch.Client, url string) (Protocol, error) {
	if name != "auto" {
		p, ok := reg.Lookup(name)
		if !ok {
			return Protocol{}, fmt.Errorf("%w %q: want auto, %s", ErrUnknownProtocol, name, strings.Join(reg.Names(), ", "))
		}
		return p, nil
	}
	for _, p := range reg {
		if p.Probe == nil {
			continue
		}
		ok, err := p.Probe(ctx, c, url)
		if ctx.Err() != nil {
			return Protocol{}, ctx.Err()
		}
		if err == nil && ok {
			return p, nil
		}
	}
	p := reg.fallback()
	if p.New == nil {
		return Protocol{}, fmt.Errorf("no protocol answers for %s", url)
	}
	return p, nil
}

// WholeReader is a document that can be told it was read whole: those
// Services.OpenDocument returns are.
type WholeReader interface {
	// ReadWhole says the document was read to its proper end, whole as
	// its protocol reads it (not a body cut short).
	ReadWhole()
}

// ReadWhole tells doc, a document Services.OpenDocument opened, that the
// planner read it to its proper end (see WholeReader); call it before
// Close. A document that is not a WholeReader is left as it is.
func ReadWhole(doc io.Reader) {
	if w, ok := doc.(WholeReader); ok {
		w.ReadWhole()
	}
}
