package manifest

import (
	"encoding/xml"
	"io"
)

// WellFormed reports whether the XML document r holds reads to its end
// without a syntax error (in any encoding UTF8 knows; one it does not know
// counts as well-formed, since reading it fails the same way every time).
// It tells a whole document from a body cut short.
func WellFormed(r io.Reader) bool {
	in, _, err := UTF8(r)
	if err != nil {
		return true
	}
	d := xml.NewDecoder(in)
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	for {
		if _, err := d.Token(); err == io.EOF {
			return true
		} else if err != nil {
			return false
		}
	}
}
