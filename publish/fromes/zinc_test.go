package fromes

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rsharvest/rsharvest/sink/es/zinctest"
)

// The test server's credentials.
const (
	zincUser     = zinctest.User
	zincPassword = zinctest.Password
)

// zinc starts the package's ZincSearch on first use; TestMain stops it.
var zinc = sync.OnceValues(func() (*zinctest.Server, error) { return zinctest.Start("publish/fromes") })

func TestMain(m *testing.M) {
	code := m.Run()
	if z, err := zinc(); err == nil {
		z.Stop()
	}
	os.Exit(code)
}

// zincAt returns the test server, failing the test when it cannot run.
func zincAt(t *testing.T) *zinctest.Server {
	t.Helper()
	z, err := zinc()
	if err != nil {
		t.Fatalf("ZincSearch: %v", err)
	}
	return z
}

// spec is the es spec of index on z, with the credentials.
func spec(z *zinctest.Server, index string) string {
	return strings.Replace(z.URL, "http://", "http://"+zincUser+":"+zincPassword+"@", 1) + "/" + index
}
