package progress

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/fetch"
)

// TestRetryLineNarrowerThanTerminal: the detail row of a retry is never
// wider than the terminal, however long its reason.
func TestRetryLineNarrowerThanTerminal(t *testing.T) {
	const u = "http://127.0.0.1:9/cl.xml"
	r := fetch.Retry{URL: u, Attempt: 2, Attempts: 6, Wait: time.Second,
		Err: errors.New("GET " + u + ": dial tcp 127.0.0.1:9: connect: connection refused by the remote host after a long while")}
	const width = 60
	got := retryLine(r, 3, width)
	if n := utf8.RuneCountInString(got); n >= width {
		t.Errorf("detail row of %d columns on a terminal of %d: %q", n, width, got)
	}
}

// TestRetryLineEscapesControls: a retried URL's control characters (C1
// included: XML allows &#x9b;) are escaped in the detail row, as in the
// summary: nothing a source names reaches the terminal raw.
func TestRetryLineEscapesControls(t *testing.T) {
	u := "http://127.0.0.1:9/a\u009b2Jb.xml"
	r := fetch.Retry{URL: u, Attempt: 2, Attempts: 6, Wait: time.Second, Err: errors.New("GET " + u + ": HTTP 503 Service Unavailable")}
	for _, width := range []int{0, 200} {
		if got := retryLine(r, 0, width); strings.ContainsRune(got, '\u009b') {
			t.Errorf("width %d: the detail row holds a raw C1 CSI: %q", width, got)
		}
	}
}
