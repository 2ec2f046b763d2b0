// The manifest tokenizer candidates measured against encoding/xml, in a
// module of their own so that the project's build does not depend on them:
//
//	cd bench/tokenizers && go test -run XXX -bench . -benchtime 3x
module github.com/rsharvest/rsharvest/bench/tokenizers

go 1.26.0

require (
	github.com/orisano/gosax v1.1.4
	github.com/rsharvest/rsharvest v0.0.0
	github.com/tdewolff/parse/v2 v2.8.1
)

require golang.org/x/text v0.43.0 // indirect

replace github.com/rsharvest/rsharvest => ../..
