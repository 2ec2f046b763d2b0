// Package solr is the Solr sink, "--sink solr:http://HOST:PORT/solr/CORE":
// it indexes each resource as one document of a Solr core, through Solr's
// JSON update API, in batches.
//
// # Documents
//
// A resource becomes one document with the fields of the resource model
// (location, length, md5, mime, lastmod, links, resource_set):
//
//	id            string  the resource's URI (see "Identities" below); uniqueKey
//	location      string  the URI (invalid UTF-8 replaced by U+FFFD)
//	length        plong   bytes read from the (verified) body
//	md5           string  hex; as published, else computed while reading
//	sha1          string  hex; only when published
//	sha256        string  hex; as published, else computed while reading
//	mime          string  Resource.Type, when given
//	lastmod       pdate   Resource.Lastmod in UTC, "2006-01-02T15:04:05Z"
//	links         string  multiValued; reserved: written once sink.Resource carries links
//	resource_set  string  the capability list of the resource's set
//	sets          string  multiValued; the sets of a record (OAI-PMH setSpecs)
//	about         string  multiValued, stored only; a record's about containers (XML)
//	text          text_general  the body, for text types only (see below)
//	body          binary  the whole body, base64; only with Options.StoreBody
//
// Fields without a value are left out. The core needs a schema with these
// fields (with "add-unknown-fields-to-the-schema" Solr would guess types
// and drop empty strings); in a managed schema:
//
//	<field name="id" type="string" indexed="true" stored="true" required="true"/>
//	<field name="location" type="string" indexed="true" stored="true"/>
//	<field name="length" type="plong" indexed="true" stored="true"/>
//	<field name="md5" type="string" indexed="true" stored="true"/>
//	<field name="sha1" type="string" indexed="true" stored="true"/>
//	<field name="sha256" type="string" indexed="true" stored="true"/>
//	<field name="mime" type="string" indexed="true" stored="true"/>
//	<field name="lastmod" type="pdate" indexed="true" stored="true"/>
//	<field name="links" type="string" indexed="true" stored="true" multiValued="true"/>
//	<field name="resource_set" type="string" indexed="true" stored="true"/>
//	<field name="sets" type="string" indexed="true" stored="true" multiValued="true"/>
//	<field name="about" type="string" indexed="false" stored="true" multiValued="true"/>
//	<field name="text" type="text_general" indexed="true" stored="true"/>
//	<field name="body" type="binary" indexed="false" stored="true"/>
//	<dynamicField name="dc_*" type="text_general" indexed="true" stored="true" multiValued="true"/>
//
// The text field is filled only when Resource.Type is a text type (text/*,
// application/xml, application/json, or a +xml or +json suffix; a charset
// parameter other than UTF-8 or US-ASCII rules it out) and the whole body
// is valid UTF-8. It holds at most Options.TextMaxBytes of the body, cut at
// a character boundary, without a leading byte order mark. Only that much
// of a body is kept in memory; the rest streams through the hashes.
//
// When that text is an OAI-PMH oai_dc record (root oai_dc:dc), its Dublin
// Core elements are fields too: dc_title, dc_creator, … (sink.DCElements),
// multi-valued text; the XML stays in text (and body).
//
// # Identities
//
// Solr's strings are Unicode, so a URI that is not valid UTF-8, contains
// NUL, is empty, or starts with "rsharvest:b64:" is stored under the id
// "rsharvest:b64:" followed by its bytes in unpadded base64url. Every other
// URI is its own id. Walk decodes ids back to the exact URIs given to Put.
// A URI whose id would pass Lucene's term limit (32766 bytes) is refused by
// Put with a permanent error.
//
// # Batches, commits and errors
//
// Put reads the body to io.EOF and only then queues the document; a body
// error, an ended ctx or an oversized body queues nothing and leaves the
// core as it was. Put and Delete return nil once the operation is queued.
// Adds and deletes share one ordered queue: the queue is sent in order, as
// one POST /update?commitWithin=N&wt=json per run of adds (a JSON array of
// documents) and per run of deletes ({"delete":{"id":…}} or
// {"delete":[…]}), so that the last operation on an id wins. The queue is
// sent when it holds Options.BatchSize operations or Options.BatchMaxBytes
// of documents, by the Put or Delete that filled it; Close sends the rest
// and then asks for a hard commit (POST /update?commit=true&wt=json), when
// anything was queued since the last one. Until a commit, or until
// commitWithin has passed, Solr's searches do not see the changes.
//
// Requests are retried Options.Retries times, with exponential backoff, on
// connection errors, 429, 502, 503 and 504 (a Retry-After longer than the
// backoff is honoured up to Options.BackoffMax). When Solr answers 400 or
// 413 for a batch, its operations are sent again one by one: the bad ones
// are recorded as permanent failures and the others go through. 401, 403,
// 404 and 405 are fatal: the sink stops and every later call returns the
// error.
//
// Because documents are sent after Put returned, the error of a batch that
// could not be sent (retries used up, or fatal) is returned by the next
// Put, Delete or Close, which then does nothing else (the error keeps its
// errclass class). Failed lists every operation that was queued but not
// applied: permanent rejections and the operations of failed batches.
// Close returns, besides its own errors and those not yet returned, a
// permanent error counting the rejected documents. A caller that records
// outcomes per resource uses sink.Batcher instead: Flush sends the queue
// and returns each operation that failed since the previous Flush, and what
// it returned is not reported again by Put, Delete or Close.
//
// # Inventory
//
// The sink implements sink.Inventory for the conformance suite and audits.
// Get and Walk first send the queue and commit (when anything changed
// since the last commit), so they are slow; Walk pages through
// /select?q=*:*&fl=id&sort=id asc with cursorMark. Get returns the body only
// when it was stored (Options.StoreBody; off by default, since it doubles
// the index size): for a document indexed without it, Get's error wraps
// errors.ErrUnsupported. An empty body needs no stored field.
//
// The Header option (authentication) is sent with every request and never
// logged; user information in the URL is used for basic authentication and
// redacted from logs and errors.
package solr
