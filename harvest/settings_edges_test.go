package harvest_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
)

// decodeConfig applies a config file's text to a default job, as sync
// --config does with no flag given.
func decodeConfig(t *testing.T, text string) (harvest.Job, error) {
	t.Helper()
	doc, err := config.Decode(strings.NewReader(text), "/x/c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j := harvest.DefaultJob()
	err = doc.Apply(harvest.Settings(), nil, &j)
	return j, err
}

// jobFromFlags sets a default job from flags, as a command that syncs
// registers them.
func jobFromFlags(t *testing.T, args ...string) harvest.Job {
	t.Helper()
	j := harvest.DefaultJob()
	fs := newFlagSet()
	harvest.Settings().Register(fs, config.AsFlag, &j)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestLeadingZeroInteger: an integer written with a leading zero is
// decimal everywhere: --retries 010 is 10, and so are retries: 010 and
// max_delete: 010 in a file (YAML 1.2, which the file is, writes octal
// 0o10).
func TestLeadingZeroInteger(t *testing.T) {
	flags := jobFromFlags(t, "--retries", "010", "--concurrency", "010")
	if flags.Retries != 10 || flags.Concurrency != 10 {
		t.Fatalf("flags: retries %d, concurrency %d", flags.Retries, flags.Concurrency)
	}
	j, err := decodeConfig(t, "retries: 010\nconcurrency: 010\nmax_delete: 010\nrange_parts: 010\n")
	if err != nil {
		t.Fatal(err)
	}
	if j.MaxDelete.String() != "10" {
		t.Fatalf("max_delete: 010 is %s", j.MaxDelete)
	}
	if j.Retries != 10 || j.Concurrency != 10 || j.RangeParts != 10 {
		t.Errorf("config file: retries: 010 is %d, concurrency: 010 is %d, range_parts: 010 is %d (max_delete: 010 is %s; --retries 010 is %d)",
			j.Retries, j.Concurrency, j.RangeParts, j.MaxDelete, flags.Retries)
	}
}

// TestHeaderNameCheckedAlike: a header whose name is not an HTTP token
// (RFC 9110) is refused as a --header as in a config file, rather than
// carried by every request, which Go's transport refuses to send.
func TestHeaderNameCheckedAlike(t *testing.T) {
	if _, err := decodeConfig(t, "headers: [\"X-Token(v2): abc\"]\n"); err == nil || !strings.Contains(err.Error(), "not a valid header name") {
		t.Fatalf("config file: %v", err)
	}
	j := jobFromFlags(t, "--source", "http://example.org/", "--sink", "fs:"+t.TempDir(), "--header", "X-Token(v2): abc")
	if err := j.Validate(); err == nil {
		t.Errorf("--header 'X-Token(v2): abc': Validate accepts it (headers %q), a config file refuses it", j.Headers)
	}
}

// TestFileSecondsOverflow: a duration given as a number of seconds too
// large for a duration is refused as such, not as a negative duration the
// file never gave.
func TestFileSecondsOverflow(t *testing.T) {
	if _, err := decodeConfig(t, "stall_timeout: 9223372036.854775807\n"); err != nil && strings.Contains(err.Error(), "negative") {
		t.Errorf("stall_timeout: 9223372036.854775807 (a positive number of seconds): %v", err)
	}
}

// TestKeyAndAliasAgreeingLists: two keys of one setting (a key and its
// alias) that agree are fine, lists too: sink: and sinks: giving the same
// list.
func TestKeyAndAliasAgreeingLists(t *testing.T) {
	if _, err := decodeConfig(t, "source: http://example.org/\nsink: [fs:/m]\nsinks: [fs:/m]\n"); err != nil {
		t.Errorf("sink: [fs:/m] with sinks: [fs:/m]: %v", err)
	}
}

// TestBandwidthOverflow: a bandwidth that overflows (1e308G) is refused
// where it is given, as a flag, rather than taken by sync and refused by
// run when laid over a site's job.
func TestBandwidthOverflow(t *testing.T) {
	flags := harvest.DefaultJob()
	fs := newFlagSet()
	harvest.Settings().Register(fs, config.AsFlag, &flags)
	if err := fs.Parse([]string{"--bwlimit", "1e308G"}); err != nil {
		return // refused where it is given: fine
	}
	given := func(s *config.Setting) bool { return s.Name == "bwlimit" }
	j := harvest.DefaultJob()
	if err := harvest.Over(flags, given)(&j); err != nil {
		t.Errorf("--bwlimit 1e308G: accepted as a flag (%v bytes/s), refused laid over a site's job: %v", float64(flags.BwLimit), err)
	}
}

func newFlagSet() *pflag.FlagSet { return pflag.NewFlagSet("flags", pflag.ContinueOnError) }

// TestInFlightBounded: --concurrency, --workers and --range-parts size
// buffers and goroutines: a value of a few digits too many is refused, not
// taken for memory.
func TestInFlightBounded(t *testing.T) {
	for _, args := range [][]string{
		{"--concurrency", "4611686018427387904"},
		{"--workers", "100000"},
		{"--range-parts", "5000"},
	} {
		j := jobFromFlags(t, append(args, "--source", "http://s.example/", "--sink", "fs:/tmp/x")...)
		if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "1024") {
			t.Errorf("%v: Validate = %v, want the bound refused", args, err)
		}
	}
	j := jobFromFlags(t, "--concurrency", "1024", "--workers", "1024", "--source", "http://s.example/", "--sink", "fs:/tmp/x")
	if err := j.Validate(); err != nil {
		t.Errorf("the bound itself: %v", err)
	}
}
