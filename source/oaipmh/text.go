package oaipmh

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The text forms of what a repository says, as "rsharvest oai" prints
// them (its --json prints the values themselves).

// WriteText writes what the repository says of itself, a field a line.
func (id *Identify) WriteText(w io.Writer) error {
	return writeTable(w, [][]string{{"repository:", id.RepositoryName}, {"base URL:", id.BaseURL}, {"protocol:", id.ProtocolVersion},
		{"granularity:", id.Granularity}, {"earliest:", id.EarliestDatestamp}, {"deleted records:", id.DeletedRecord},
		{"admin:", strings.Join(id.AdminEmail, ", ")}})
}

// Formats are the metadata formats a repository offers.
type Formats []MetadataFormat

// WriteText writes the formats as a table.
func (fs Formats) WriteText(w io.Writer) error {
	rows := [][]string{{"PREFIX", "NAMESPACE", "SCHEMA"}}
	for _, f := range fs {
		rows = append(rows, []string{f.Prefix, f.Namespace, f.Schema})
	}
	return writeTable(w, rows)
}

// Sets are a repository's sets.
type Sets []Set

// WriteText writes the sets as a table.
func (ss Sets) WriteText(w io.Writer) error {
	rows := [][]string{{"SPEC", "NAME"}}
	for _, s := range ss {
		rows = append(rows, []string{s.Spec, s.Name})
	}
	return writeTable(w, rows)
}

// writeTable writes rows with their columns aligned.
func writeTable(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// RecordView is a record as it is shown: its header, then its metadata as
// rsharvest stores it (a standalone document).
type RecordView struct {
	Identifier string   `json:"identifier"`
	Datestamp  string   `json:"datestamp"`
	Sets       []string `json:"sets"`
	Deleted    bool     `json:"deleted"`
	Metadata   string   `json:"metadata"`
}

// View is rec as it is shown.
func (rec *Record) View() RecordView {
	h := rec.Header
	return RecordView{Identifier: h.Identifier, Datestamp: h.Datestamp, Sets: h.Sets, Deleted: h.Deleted, Metadata: string(rec.Metadata)}
}

// WriteText writes the record's header, a field a line, then its
// metadata.
func (v RecordView) WriteText(w io.Writer) error {
	status := ""
	if v.Deleted {
		status = " (deleted)"
	}
	_, err := fmt.Fprintf(w, "identifier: %s%s\ndatestamp:  %s\nsets:       %s\n\n%s", v.Identifier, status, v.Datestamp, strings.Join(v.Sets, ", "), v.Metadata)
	return err
}
