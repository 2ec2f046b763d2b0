// Command rsharvest is a ResourceSync Destination: it copies a Source's
// resources in bulk from Resource Dumps into sinks, verified, and keeps a
// state store to skip what it already holds. Run "rsharvest help" for the
// commands; the work is done by package cli and the packages it drives.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rsharvest/rsharvest/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
