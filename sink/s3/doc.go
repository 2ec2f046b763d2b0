// Package s3 is the S3 sink, "--sink s3://BUCKET/PREFIX?options": it
// stores every resource as one object in an existing bucket of Amazon S3,
// MinIO or another S3-compatible store, under a key computed from the
// resource's URI alone.
//
// # Spec
//
//	s3://BUCKET[/PREFIX][?endpoint=HOST:PORT][&region=R][&secure=false][&concurrency=N][&partsize=SIZE]
//
// endpoint defaults to s3.amazonaws.com and secure (HTTPS) to true; region
// is found by asking the bucket when not given; concurrency (default 8) is
// the number of uploads in flight and partsize (default 16MiB, at least
// 5MiB; a number of bytes with an optional KiB, MiB or GiB suffix) the size
// of a multipart upload's parts. Credentials come from the environment:
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and AWS_SESSION_TOKEN for
// temporary ones; they are never logged or put in errors, and a spec with
// user information ("s3://key:secret@bucket") is refused. Opening the sink
// checks that the endpoint answers and the bucket exists; any failure is a
// fatal configuration error.
//
// # Key layout
//
// The key of a URI is PREFIX (with a "/" appended unless it is empty or
// already ends in one) followed by the path that the filesystem sink gives
// the URI: see package sink/fs for the mapping, which is reversible, keeps
// keys valid UTF-8 (every byte of invalid UTF-8, every control character
// and "%" itself are written %XX), never produces "." / ".." or empty
// segments or segments over 255 bytes, and never makes one URI's key a
// "directory" of another's, so that stores with a filesystem behind them
// (MinIO) can hold any set of URIs. Examples:
//
//	http://example.com/a/b.txt?x=1 → PREFIX/http/example.com/a/@b.txt?x=1
//	http://example.com/a/          → PREFIX/http/example.com/a/@
//	urn:isbn:0451450523            → PREFIX/_other/@urn:isbn:0451450523
//
// A key longer than 1024 bytes (the S3 limit), or one that MinIO would
// refuse or store under another name (a segment that is "." or ".." once
// surrounding spaces are trimmed, as in "http://h/ ../x", or one ending in
// "__XLDIR__", the name MinIO keeps directory objects under), is replaced by
//
//	PREFIX/_long/<hex SHA-256 of the URI>
//
// and the URI itself is kept, whole, as the body of the object
// PREFIX/_long/<hex>.uri: S3 and MinIO cap user metadata at 2 KiB, too
// little for such URIs. The URI object is written before the resource's
// object and is never deleted (it holds a few KiB at most, and its content
// depends on its key alone), so a Delete racing a Put of the same URI can
// never leave an object whose URI is lost. Walk decodes plain keys, and
// reads the URI object of each hashed one; keys it does not recognise are
// logged and skipped.
//
// Each sink writes, when it opens, the object PREFIX/!rsharvest-sink (a
// name no URI's key has, listed before any of the sink's objects): the
// Walk of a sink at a prefix above it skips the objects under it, so that
// an audit's repair of the one never deletes the other's.
//
// # Objects
//
// Each object's Content-Type is the resource's type (when it is a valid
// header value), and its user metadata (x-amz-meta-*) are:
//
//	rsharvest-uri      the URI, with bytes outside 0x21–0x7E and "%" written %XX
//	                   (left out when longer than 1 KiB: the key says it all)
//	rsharvest-md5      the published digests, lower-case hex, when known
//	rsharvest-sha1
//	rsharvest-sha256
//	rsharvest-length   the length in bytes, when known
//	rsharvest-lastmod  the last modification time, RFC 3339, when known
//	rsharvest-sets     the sets of a record (OAI-PMH setSpecs), space-separated,
//	                   when they fit in 1 KiB (a record's about containers are
//	                   not kept: they do not fit in metadata)
//
// S3 allows 2 KiB of user metadata in all (names and values): the URI and
// the sets are kept only when they fit after the others.
//
// # Writing
//
// Put streams the body with one PutObject call: with the resource's length
// when it is known (a single PUT up to the part size, a multipart upload
// beyond, its parts made larger, by whole MiB, for a body that would need
// more than S3's 10,000 of them), or as a multipart upload of part-size
// buffers when it is not, so memory stays within partsize × concurrency. An object appears only when
// its upload completes, which cannot happen before the body has ended:
// the last byte of the body is held back until the body has returned
// io.EOF with the expected length and ctx was still live, so a body error,
// a fixity error on the last Read or a cancelled ctx leaves a single PUT
// short (the store rejects it) and makes minio-go abort a multipart upload.
// The previous object, if any, stays in place. A process killed during a
// multipart upload leaves an incomplete upload behind; a lifecycle rule
// (AbortIncompleteMultipartUpload) on the bucket cleans those up.
//
// # Errors
//
// A ctx that ended, network errors, throttling and 5xx answers are
// retryable; a missing bucket, rejected credentials or a full store are
// fatal (every later request would fail too); other 4xx answers (such as
// AccessDenied for one key) are permanent for that resource. A body error
// is returned wrapped, with the class the body gave it.
package s3
