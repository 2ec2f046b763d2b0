package status

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestFailuresRemembered: a client that keeps failing stays remembered
// (its allowance spent) however many one-off addresses come after it: the
// table forgets the client heard from least recently, never all at once.
func TestFailuresRemembered(t *testing.T) {
	var f failures
	req := func(host string) *rateRequest { return &rateRequest{host} }
	attacker := req("192.0.2.1")
	for range failureBurst {
		f.limiters(attacker.r())[0].Allow()
	}
	if f.limiters(attacker.r())[0].Tokens() >= 1 {
		t.Fatal("the attacker's allowance is not spent")
	}
	for i := range 3 * maxClients {
		f.limiters(req(fmt.Sprintf("198.51.%d.%d", i/250, i%250)).r())
		if i%100 == 0 {
			f.limiters(attacker.r()) // still at it
		}
	}
	if f.limiters(attacker.r())[0].Tokens() >= 1 {
		t.Error("a flood of one-off addresses wiped out the attacker's spent allowance")
	}
	if len(f.by) > maxClients || f.order.Len() != len(f.by) {
		t.Errorf("%d clients remembered (%d in order), want at most %d", len(f.by), f.order.Len(), maxClients)
	}
}

type rateRequest struct{ host string }

func (q *rateRequest) r() *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = q.host + ":4242"
	return r
}
