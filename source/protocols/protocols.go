// Package protocols is the registry of the protocols rsharvest speaks:
// adding one is a package below source and a line here.
package protocols

import (
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/harvestlist"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/resourcesync"
)

// All returns every protocol, in the order --protocol auto probes them
// (the one without a probe, ResourceSync, is the fallback).
func All() source.Registry {
	return source.Registry{
		resourcesync.Protocol(),
		oaipmh.Protocol(),
		harvestlist.Protocol(),
	}
}
