package pipeline

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/xmlcap"
)

// Validation (Options.Validate, --validate) is a step of delivery any
// protocol can switch on: before a document is stored, its bytes must be
// well-formed XML whose root element is what its record's DocumentType
// says — the root's namespace when it is a namespace, the DOCTYPE's
// public identifier when it is a formal public identifier ("-//…"), the
// response's media type when it is a MIME type — and, with a schema given
// for that type (Options.Schemas), valid against it. The schema check runs
// Debian's xmllint (libxml2): libxml2 is the validator of reference for
// XSD 1.0, kept up by the GNOME project, and a command keeps its C out of
// the process (no cgo binding is maintained for it). A document that fails
// is that document's permanent failure, with the validator's message and
// line; nothing of it is stored (the sink aborts the write).

// ErrInvalid is wrapped by the error of a document that fails validation.
var ErrInvalid = errors.New("invalid document")

// docCheck checks one document's bytes as they stream to a sink: a
// goroutine parses them through a pipe; with a schema, they are also
// copied to a scratch file for xmllint at the end.
type docCheck struct {
	want, schema, contentType string
	pw                        *io.PipeWriter
	done                      chan error
	tmp                       *os.File
	xmllint                   string
}

// checkFor returns the check of a document whose record says docType, or
// nil when validation is off or the record says nothing of its type.
func (r *run) checkFor(docType, contentType string) (*docCheck, error) {
	if !r.opts.Validate || docType == "" {
		return nil, nil
	}
	c := &docCheck{want: docType, schema: r.opts.Schemas[docType], contentType: contentType, done: make(chan error, 1)}
	if c.schema != "" {
		var err error
		if c.xmllint, err = exec.LookPath("xmllint"); err != nil {
			return nil, errclass.Fatalf("--schema %s: xmllint is needed to validate against it (apt-get install libxml2-utils): %w", docType, err)
		}
		if c.tmp, err = os.CreateTemp(r.opts.SpoolDir, "validate-*.xml"); err != nil {
			return nil, errclass.Fatalf("validate: %w", err)
		}
	}
	pr, pw := io.Pipe()
	c.pw = pw
	go func() {
		err := rootCheck(pr, docType, contentType)
		pr.CloseWithError(err) // the writer's next write ends at once
		io.Copy(io.Discard, pr)
		c.done <- err
	}()
	return c, nil
}

// write gives the check the next bytes of the document.
func (c *docCheck) write(p []byte) {
	_, _ = c.pw.Write(p) // an error is the parser's: finish reports it
	if c.tmp != nil {
		_, _ = c.tmp.Write(p)
	}
}

// finish waits for the parse of the whole document and runs the schema
// check; its error wraps ErrInvalid (permanent) for a document that fails.
func (c *docCheck) finish(ctx context.Context) error {
	c.pw.Close()
	if err := <-c.done; err != nil {
		return err
	}
	if c.tmp == nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, c.xmllint, "--noout", "--nonet", "--schema", c.schema, c.tmp.Name())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return errclass.Fatalf("validate: xmllint: %w", err)
		}
		msg := strings.TrimSpace(strings.ReplaceAll(stderr.String(), c.tmp.Name(), "document"))
		if i := strings.IndexByte(msg, '\n'); i > 0 {
			msg = msg[:i] // the first error, with its line
		}
		msg = xmllintLine.ReplaceAllString(msg, "line $1: ")
		return errclass.NewPermanent(fmt.Errorf("%w: not valid against %s: %s", ErrInvalid, c.schema, msg))
	}
	return nil
}

// close releases the check (its scratch file).
func (c *docCheck) close() {
	c.pw.CloseWithError(io.ErrClosedPipe)
	if c.tmp != nil {
		c.tmp.Close()
		os.Remove(c.tmp.Name())
		c.tmp = nil
	}
}

// xmllintLine is how xmllint names the line of an error.
var xmllintLine = regexp.MustCompile(`^document:(\d+): `)

// fpi matches a formal public identifier.
var fpi = regexp.MustCompile(`^[-+]//`)

// publicID finds a DOCTYPE's public identifier, in quotes or apostrophes.
var publicID = regexp.MustCompile(`\bPUBLIC\s+(?:"([^"]*)"|'([^']*)')`)

// The limits of a validated document's parse: its memory is bounded by
// them, not by the document. A token (a text, a tag with its attributes,
// a comment) past validateMaxToken, or elements nested deeper than
// validateMaxDepth, make the document invalid.
const (
	validateMaxToken = xmlcap.DefaultMaxTokenSize
	validateMaxDepth = 256
)

// rootCheck parses r to its end: well-formed XML — one root element, and
// nothing but space, comments and processing instructions around it —
// whose root is docType's (see Validation).
func rootCheck(r io.Reader, docType, contentType string) error {
	invalid := func(line int, format string, a ...any) error {
		return errclass.NewPermanent(fmt.Errorf("%w: line %d: %s", ErrInvalid, line, fmt.Sprintf(format, a...)))
	}
	isMIME := !fpi.MatchString(docType) && !strings.Contains(docType, ":") && strings.Count(docType, "/") == 1
	if isMIME {
		got, _, _ := mime.ParseMediaType(contentType)
		want, _, _ := mime.ParseMediaType(docType)
		if got != want {
			return invalid(0, "served as %q, not %s", contentType, docType)
		}
		if !strings.HasSuffix(want, "xml") {
			return nil // not XML: nothing more to parse
		}
	}
	dec := xmlcap.NewDecoder(r, validateMaxToken, validateMaxDepth)
	doctype, root, bom, textBefore := "", false, false, 0
	// What encoding/xml lets pass and XML forbids is refused here: an XML
	// declaration anywhere but first (after a byte order mark), a <!…>
	// other than one DOCTYPE before the root, an attribute given twice.
	for n := 0; ; n++ {
		tok, err := dec.Token()
		line, _ := dec.InputPos()
		if err == io.EOF {
			if !root {
				return invalid(line, "no root element")
			}
			return nil
		}
		if err != nil {
			if se := dec.SourceErr(); se != nil {
				return se // the bytes did not come: not the document's fault
			}
			return invalid(line, "not well-formed XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.ProcInst:
			if strings.EqualFold(t.Target, "xml") && n > 0 && !(n == 1 && bom) {
				return invalid(line, "not well-formed XML: an XML declaration past the document's start")
			}
		case xml.Directive:
			if doctype != "" || root || !strings.HasPrefix(string(t), "DOCTYPE") {
				return invalid(line, "not well-formed XML: a <!…> declaration where only one DOCTYPE, before the root element, may be")
			}
			doctype = string(t)
		case xml.CharData:
			if n == 0 && bytes.HasPrefix(t, []byte("\ufeff")) {
				t, bom = t[len("\ufeff"):], true // a UTF-8 byte order mark
			}
			switch {
			case dec.Depth() > 0 || len(bytes.TrimSpace(t)) == 0:
			case root:
				return invalid(line, "not well-formed XML: text after the root element")
			case textBefore == 0:
				textBefore = line // refused at the root, if one comes
			}
		case xml.StartElement:
			for i, a := range t.Attr {
				for _, b := range t.Attr[:i] {
					if a.Name == b.Name {
						return invalid(line, "not well-formed XML: <%s> gives the attribute %s twice", t.Name.Local, a.Name.Local)
					}
				}
			}
			if dec.Depth() > 1 {
				continue
			}
			if root {
				return invalid(line, "not well-formed XML: a second root element <%s>", t.Name.Local)
			}
			if textBefore > 0 {
				return invalid(textBefore, "not well-formed XML: text before the root element")
			}
			root = true
			switch {
			case isMIME:
			case fpi.MatchString(docType):
				if m := publicID.FindStringSubmatch(doctype); m == nil || m[1]+m[2] != docType {
					return invalid(line, "its DOCTYPE does not name the public identifier %q", docType)
				}
			case t.Name.Space != docType:
				return invalid(line, "its root element {%s}%s is not in the namespace %s", t.Name.Space, t.Name.Local, docType)
			}
		}
	}
}
