// Package archtest holds the test that keeps the packages' dependencies
// pointing one way, as docs/ARCHITECTURE.md describes them: the CLI is
// imported by nothing but the binary, the benchmark code by nothing in
// production, and each layer only by the layers above it.
package archtest
