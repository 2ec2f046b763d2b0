package cli

import "github.com/rsharvest/rsharvest/pipeline"

// summary renders rep for standard output. When the run ended with err,
// the error line is left out: Main prints err on standard error, and the
// screen shows it once.
func summary(rep *pipeline.Report, err error) string {
	if err == nil {
		return rep.Summary()
	}
	r := *rep
	r.Error = ""
	return r.Summary()
}
