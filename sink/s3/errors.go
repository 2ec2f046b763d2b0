package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/minio/minio-go/v7"

	"github.com/rsharvest/rsharvest/errclass"
)

// sinkWide reports whether an S3 error code concerns the whole sink rather
// than one object: every later request would fail the same way.
func sinkWide(code string) bool {
	switch code {
	case "NoSuchBucket", "InvalidBucketName", "InvalidAccessKeyId", "SignatureDoesNotMatch",
		"InvalidToken", "ExpiredToken", "AccountProblem", "AllAccessDisabled", "XMinioStorageFull",
		"XMinioAdminBucketQuotaExceeded":
		return true
	}
	return false
}

// retryableCode reports whether an S3 error code is one a later attempt
// may not meet, whatever its HTTP status.
func retryableCode(code string) bool {
	switch code {
	case "RequestTimeout", "RequestTimeTooSkewed", "SlowDown", "SlowDownRead", "SlowDownWrite",
		"Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled",
		"InternalError", "ServiceUnavailable", "XMinioServerNotInitialized",
		"XMinioBucketMetadataNotInitialized", "XMinioBackendDown":
		return true
	}
	return false
}

// classify wraps err, from a request about one object, with its class:
// retryable for a ctx that ended, network errors, throttling and 5xx;
// fatal for errors that concern the whole sink (missing bucket, rejected
// credentials); permanent for other 4xx (access denied, bad key or
// metadata). what says what failed, for the message.
func classify(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return errclass.Retryablef("%s: %w", what, ctx.Err())
	}
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) || (resp.StatusCode == 0 && resp.Code == "") {
		// Not an S3 answer: the connection failed, timed out or was reset.
		return errclass.Retryablef("%s: %w", what, err)
	}
	err = fmt.Errorf("%s: %s: %w", what, describe(resp), err)
	switch {
	case sinkWide(resp.Code):
		return errclass.NewFatal(err)
	case retryableCode(resp.Code), resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode >= 500:
		return errclass.NewRetryable(err)
	}
	return errclass.NewPermanent(err)
}

// describe names an S3 error by its code and status, which its message
// (often a sentence) does not.
func describe(resp minio.ErrorResponse) string {
	s := resp.Code
	if s == "" {
		s = "error"
	}
	if resp.StatusCode != 0 {
		s += " (HTTP " + strconv.Itoa(resp.StatusCode) + ")"
	}
	return s
}
