package harvest

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/source/protocols"
)

// Settings is the table of a harvest's settings: each one's flag, file
// key, help and where it may be given, bound to its field of a *Job. The
// flags of every command that harvests, the keys of config files and
// sites, sites add/edit's flags and the reference in the documentation are
// all made from it: a new setting is a field of Job and a row here.
func Settings() config.Table {
	return append(config.Table{
		row("source", config.Harvest, "source URL: a ResourceSync Source Description, Capability List, Resource Dump (Index) or site URL, or an OAI-PMH repository's base URL",
			func(j *Job) config.Value { return config.Checked(&j.Source, checkSource) }, alias("capability_list_url")),
		row("sink", config.Harvest, "where resources go (repeatable): fs:DIR, s3://BUCKET/PREFIX?endpoint=HOST:PORT, es:http://HOST:PORT[/es]/INDEX, solr:http://HOST:PORT/solr/CORE",
			func(j *Job) config.Value { return config.Sinks(&j.Sinks) }, key("sinks"), alias("sink")),
		row("header", config.Harvest, "extra HTTP header 'Name: value' for every request to the source's origin (repeatable); a value may name an environment variable, ${NAME}, resolved at harvest time",
			func(j *Job) config.Value { return config.Headers(&j.Headers) }, key("headers")),
		row("header-origin", config.Harvest, "an origin (https://host[:port]) besides the source's that the --header values are sent to (repeatable; by default they go to the source's origin only)",
			func(j *Job) config.Value { return config.Origins(&j.HeaderOrigins) }, key("header_origins")),
		row("protocol", config.Harvest, "the source's protocol: "+protocols.All().Help(),
			func(j *Job) config.Value {
				return config.OneOf(&j.Protocol, append([]string{"auto"}, protocols.All().Names()...)...)
			}),
		row("set", config.Harvest, "sync only this resource set: its capability list's URL, file or directory name (default: every set); OAI-PMH: a setSpec, repeatable (each set its own resource set, harvested in parallel)",
			func(j *Job) config.Value { return config.Strings(&j.Sets) }),
		row("concurrency", config.Tuning, "packages downloaded and unpacked at once; with lists, resource requests in flight (default 16 then)",
			func(j *Job) config.Value {
				return config.After(config.Int(&j.Concurrency, 1), func() { j.ConcurrencySet = true })
			}),
		row("workers", config.Tuning, "entries verified and delivered in parallel",
			func(j *Job) config.Value { return config.Int(&j.Workers, 1) }, shown("the number of CPUs")),
		row("rate", config.Tuning, "requests per second per host (0 = unlimited)",
			func(j *Job) config.Value { return config.Float(&j.Rate) }),
		row("bwlimit", config.Tuning, "cap the bytes per second received, all requests together: 10M (MiB/s), 500k, 2.5MB/s (default: no cap)",
			func(j *Job) config.Value { return config.Text(&j.BwLimit) }),
		row("retries", config.Tuning, "retries of a failed request (timeouts, resets, 429, 5xx)",
			func(j *Job) config.Value { return config.Int(&j.Retries, 0) }),
		row("stall-timeout", config.Tuning, "fail (and resume) a download that receives no bytes for this long",
			func(j *Job) config.Value { return config.Duration(&j.StallTimeout) }),
		row("low-speed-limit", config.Tuning, "bytes a second: a response slower than this for --low-speed-time fails, temporarily (0: no cutoff)",
			func(j *Job) config.Value { return config.Count(&j.LowSpeedLimit) }),
		row("low-speed-time", config.Tuning, "how long a response may stay under --low-speed-limit",
			func(j *Job) config.Value { return config.Duration(&j.LowSpeedTime) }),
		row("require-hash", config.Tuning, "refuse resources that give no md5, sha-1, sha-256 or sha-512 (by default they are delivered after their length and CRC-32 checks, and counted as unverified)",
			func(j *Job) config.Value { return config.Bool(&j.RequireHash) }),
		row("verify", config.Tuning, "which digests of those an entry lists are checked: strongest (sha-512, else sha-256, else sha-1, else md5; with the length and CRC-32) or all",
			func(j *Job) config.Value { return config.OneOf(&j.Verify, "strongest", "all") }),
		row("allow-missing-hash", config.Tuning, "no effect, kept for compatibility: resources without a hash are accepted by default (see --require-hash)",
			func(j *Job) config.Value { return config.Bool(&j.AllowMissingHash) }),
		row("allow-private-addresses", config.Tuning, "let the URLs a source lists (resources, mirrors, redirects) lead to loopback, link-local, private or cloud metadata addresses; by default only a source served from such an address may list addresses of its kind",
			func(j *Job) config.Value { return config.Bool(&j.AllowPrivateAddresses) }),
		row("max-delete", config.Tuning, "stop a run that would delete more than this many resources (100), or this share of those held (5%), before it deletes any; exit 1 (default: no bound)",
			func(j *Job) config.Value { return config.Text(&j.MaxDelete) }),
		row("delete-unlisted", config.Tuning, "remove what a harvest list no longer names (by default it stays held and is reported as no longer listed)",
			func(j *Job) config.Value { return config.Bool(&j.DeleteUnlisted) }),
		row("validate", config.Tuning, "check each document that says what it must be (a harvest list's documentType) before it is stored: well-formed XML whose root is in that namespace (or whose DOCTYPE names that public identifier, or served as that MIME type); one that is not is that document's permanent failure, logged, and the harvest goes on (--validate=false: store documents unchecked)",
			func(j *Job) config.Value { return config.Not(&j.NoValidate) }),
		row("schema", config.Tuning, "TYPE=FILE.xsd: also validate documents of TYPE against the schema, with xmllint (repeatable; implies --validate)",
			func(j *Job) config.Value { return config.Schemas(&j.Schemas) }),
		row("spread", config.Tuning, "for a registry site whose state is kept in PostgreSQL: divide its harvest into units that any daemon sharing the registry executes, each a River job (OAI-PMH: its date windows and sets; ResourceSync: its packages, and slices of 1,000 of the records it lists outside them; planned once, each unit receiving its own plan); elsewhere, or for a protocol that does not divide, the harvest runs whole",
			func(j *Job) config.Value { return config.Bool(&j.Spread) }),
		row("range-parts", config.Tuning, "download each large package as N parallel Range requests (for links where one connection is slower than the link)",
			func(j *Job) config.Value { return config.Int(&j.RangeParts, 1) }),
		row("max-document-size", config.Tuning, "largest document read from the source, in bytes, once decompressed (-1: no cap)",
			func(j *Job) config.Value { return config.Bytes(&j.MaxDocumentSize) }),
		row("max-package-size", config.Tuning, "largest package downloaded when its dump does not give its length, in bytes (-1: no cap; a length given is held to exactly)",
			func(j *Job) config.Value { return config.Bytes(&j.MaxPackageSize) }),
		row("spool-dir", config.AsFlag|config.InFile|config.OfRun, "directory for packages being unpacked (default: the system temp dir)",
			func(j *Job) config.Value { return config.Path(&j.SpoolDir) }),
		row("from", config.AsFlag|config.InFile, "start of the range, inclusive: a W3C datetime, or a duration back from now (24h) (default: the checkpoint)",
			func(j *Job) config.Value { return config.Checked(&j.From, checkWhen) }),
		withCheck(row("until", config.AsFlag|config.InFile, "end of the range, inclusive: a W3C datetime, or a duration back from now (default: now)",
			func(j *Job) config.Value { return config.Checked(&j.Until, checkWhen) }), checkPeriod),
	}, protocolSettings()...)
}

// protocolSettings are the rows of the options the protocols declare
// (source.Protocol.Options), each bound to its entry of Job.Options.
func protocolSettings() config.Table {
	var out config.Table
	for _, o := range protocols.All().Options() {
		where := config.Harvest
		if o.Tuning {
			where = config.Tuning
		}
		out = append(out, row(o.Name, where, o.Help,
			func(j *Job) config.Value { return config.Entry(&j.Options, o.Name, o.Default, o.Check) }))
	}
	return out
}

// row is a setting of a *Job.
func row(name string, where config.Where, help string, bind func(*Job) config.Value, opts ...func(*config.Setting)) config.Setting {
	s := config.Setting{Name: name, Where: where, Help: help, Bind: func(t any) config.Value {
		if j, ok := t.(*Job); ok {
			return bind(j)
		}
		return nil
	}}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// shown says the setting's default as the help shows it (config.Setting.Shown).
func shown(s string) func(*config.Setting) { return func(set *config.Setting) { set.Shown = s } }

// key names the setting's key in files.
func key(k string) func(*config.Setting) { return func(s *config.Setting) { s.Key = k } }

// alias adds a key files may give the setting by.
func alias(a string) func(*config.Setting) {
	return func(s *config.Setting) { s.Aliases = append(s.Aliases, a) }
}

// withCheck sets s's check.
func withCheck(s config.Setting, check func(*config.Context, *yaml.Node, []any) error) config.Setting {
	s.Check = check
	return s
}

// checkWhen checks a time given in a file as ParseWhen reads it.
func checkWhen(s string) error {
	_, err := ParseWhen(s, time.Now())
	return err
}

// checkPeriod checks, of a file's until (at n), that its from is not
// later.
func checkPeriod(c *config.Context, n *yaml.Node, targets []any) error {
	now := time.Now()
	for _, t := range targets {
		j, ok := t.(*Job)
		if !ok || j.From == "" || c.Line("from") == 0 {
			continue
		}
		from, errF := ParseWhen(j.From, now)
		until, errU := ParseWhen(j.Until, now)
		if errF == nil && errU == nil && from.After(until) {
			return c.Errorf(n, "until %s is before from %s (line %d)", j.Until, j.From, c.Line("from"))
		}
	}
	return nil
}
