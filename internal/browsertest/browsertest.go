// Package browsertest is for tests only: a headless Chromium (Debian's
// package, driven through chromedp) for the tests of pages.
package browsertest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// New starts a headless Chromium for t, stopped when t ends, and returns
// its context (each step bounded by a minute in all). When auth is not
// empty it is sent as the Authorization header of every request, as a
// browser sends the credentials it was given. Without chromium installed
// the test fails: .ci/run installs it.
func New(t *testing.T, auth string) context.Context {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("no chromium (apt-get install chromium; .ci/run installs it):", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true)) // chromedp makes (and removes) a fresh profile directory
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancel)
	if auth != "" {
		if err := chromedp.Run(ctx, network.Enable(), network.SetExtraHTTPHeaders(network.Headers{"Authorization": auth})); err != nil {
			t.Fatal(err)
		}
	}
	return ctx
}
