// Command rsharvest is a ResourceSync Destination: it copies a Source's
// resources in bulk from Resource Dumps into sinks, verified, and keeps a
// state store to skip what it already holds. Run "rsharvest help" for the
// commands; the work is done by package cli and the packages it drives.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/rsharvest/rsharvest/cli"
)

func main() {
	// A harvest allocates a little for every record and keeps little
	// alive: the garbage collector runs at GOGC=400 (a quarter of the
	// collections of Go's default, about 10 % less CPU a record), unless
	// GOGC says otherwise (GOGC=100 is Go's default; GOMEMLIMIT bounds
	// the heap as Go's documentation says).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
