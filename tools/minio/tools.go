//go:build tools

// Package tools pins the MinIO server used by the sink/s3 tests. It is built
// by scripts/servers.sh from this module, which keeps MinIO's large
// dependency graph out of the main module.
package tools

import _ "github.com/minio/minio"
