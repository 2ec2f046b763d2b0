// Package sinks is the registry of every kind of sink: a sink spec's
// scheme (fs:, s3://, es:, solr:) and the function that opens one. Adding
// a kind of sink is a package below sink and a line here.
package sinks

import (
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/es"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/sink/s3"
	"github.com/rsharvest/rsharvest/sink/solr"
)

// All returns the registry of every kind of sink.
func All() sink.Registry {
	return sink.Registry{
		"fs":   fs.Open,
		"s3":   s3.Open,
		"es":   es.Open,
		"solr": solr.Open,
	}
}
