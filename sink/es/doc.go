// Package es is the Elasticsearch sink: it keeps the current state of every
// resource as one document of a resource index, and appends one document per
// Put or Delete to a change index, after the ResourceSync-in-Elasticsearch
// state model. It speaks the Elasticsearch REST API
// (_bulk, _doc, _search) and also works with ZincSearch's
// Elasticsearch-compatible API (under "/es/").
//
// # Spec
//
//	--sink es:http://HOST:PORT[/PREFIX]/INDEX[?OPTION=VALUE&…]
//
// The last path segment is the resource index; whatever comes before it is
// the server's base URL ("/es" for ZincSearch). Options: changes=INDEX (the
// change index, default INDEX-changes), batch=N (actions per bulk request,
// default 500), batch_bytes=N (default 16 MiB), store_body=BOOL,
// text_max=N (bytes, default 1 MiB, 0 disables), resource_set=NAME,
// concurrency=N, retries=N. Credentials come from the URL's user
// information or, when it has none, from ES_USERNAME and ES_PASSWORD; they
// are sent as HTTP basic authentication and never appear in errors or logs.
//
// # Documents
//
// The resource document of a URI has the _id docID(URI): the URI itself
// when it is valid UTF-8 of 1 to 512 bytes (Elasticsearch's limit) that
// does not start with "sha256:", else "sha256:" and the hex SHA-256 of the
// URI's bytes. Its fields:
//
//	doc_id        the _id again (keyword; _id itself cannot be sorted on)
//	uri           the URI (keyword); invalid UTF-8 replaced by U+FFFD
//	uri_b64       the URI's bytes in base64, only when it is not valid UTF-8
//	resource_set  Options.ResourceSet, when set
//	location      {"value": URI, "type": "url"}
//	length        bytes read from the body
//	md5, sha1, sha256  hex digests: as published, md5 and sha256 computed
//	              while reading when not published
//	mime          the media type, when known
//	lastmod       the resource's lastmod (RFC 3339), when known
//	timestamp     when the sink queued the document (RFC 3339, UTC, ms)
//	rev           a token unique to this write (also the change document's _id)
//	text          the body, for text types when it is valid UTF-8 and at
//	              most Options.TextMax bytes (analysed full text)
//	body          the body in base64, only with Options.StoreBody (not
//	              indexed; it is what Get returns)
//	sets          the sets of a record (OAI-PMH setSpecs), when it has any
//	about         a record's about containers (XML documents; not indexed)
//	dc_*          an oai_dc record's Dublin Core elements (see sink.DublinCore)
//
// The model's "ln" field holds the resource's links (rel, href, mime).
// "location" is a plain object, not "nested": ZincSearch has no nested type.
//
// A change document (_id = rev) has uri, uri_b64, resource_set, location,
// change, datetime (when the sink saw the change), lastmod (Put only),
// timestamp and rev. Put appends change "updated" and Delete "deleted":
// telling "created" from "updated" would cost a read per Put, so the sink
// does not try; a Delete of a URI the index does not hold is logged too.
//
// # Batching and errors
//
// Put reads the body to io.EOF, builds the documents and queues them; Delete
// queues its actions. Nothing of a Put whose body fails is queued. Queued
// actions are sent in one _bulk request when the batch holds Options.
// BatchSize actions or Options.BatchBytes bytes (by the call that filled it,
// which therefore waits for the request), before Get and Walk (which wait
// for it no longer than their ctx allows), and at Close. A request holds at
// most BatchSize actions and BatchBytes bytes (but for one action larger
// alone). Batches are sent one at a time, in order; a later action on the
// same resource replaces a queued one. A change document is stamped with
// the time its request is sent, again at each retry. So Put and Delete
// returning nil means "queued", not "indexed":
//
//   - An item the server rejects with a 4xx status is a permanent failure of
//     that document alone; the others of its request are applied.
//   - Items answered 429 or 5xx, and whole requests failing with a transport
//     error, 429 or 5xx, are retried with exponential backoff
//     (Options.Retries times). When retries run out, they fail as retryable.
//   - A whole request rejected with another 4xx (413 too large, 400) or with
//     a top-level error is split in halves and each half resent, until the
//     offending action is alone and fails permanently.
//   - 401 and 403, of a request or of one item, are fatal.
//
// Every failed action is logged and listed by Failed, and returned by the
// next Flush as a failure of its resource (a failed change document too: the
// pipeline then writes the resource and its change again). A flush failure
// that is not a per-document rejection, and that no Flush returned, is also
// returned, once, by the Put or Delete that sent the batch, or else by the
// next one (a fatal one by every later call). Close returns an error when any action failed, classified
// fatal, else retryable, else permanent. A batch being sent is not cut short
// when the ctx of the call sending it ends: it holds other calls' actions.
//
// # ZincSearch
//
// The flavour is detected at New from the root document ("name": "zinc").
// ZincSearch applies writes asynchronously (through a write-ahead log, every
// ZINC_WAL_SYNC_INTERVAL) and cannot delete a document that is still in that
// log, so after each bulk request the sink waits until the resource
// documents it wrote are visible (or Options.VisibleTimeout passes). It has
// no GET _doc or search_after under /es/: Get searches by _id and Walk pages
// with from/size, so a Walk during deletes may miss documents.
package es
