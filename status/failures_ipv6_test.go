package status_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rsharvest/rsharvest/status"
)

// TestFailuresByIPv6Prefix: the failed logins of one client are limited
// (10, then one every 6 s), a client on IPv6 by its /64: it holds 2^64
// addresses, and counted by each it would get a fresh allowance each time.
func TestFailuresByIPv6Prefix(t *testing.T) {
	h, err := status.Handler(status.Options{Store: fixture(t), Operator: status.Credentials{User: "admin", Password: "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	const tries = 100
	for i := range tries {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = fmt.Sprintf("[2001:db8:1:2::%x]:40000", i+1) // one /64
		req.SetBasicAuth("admin", fmt.Sprintf("guess-%d", i))
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("%d wrong passwords from one IPv6 /64 (each from its own address): none refused with 429", tries)
	}
}
