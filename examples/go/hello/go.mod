module example.com/santa-hello

go 1.26.8

require github.com/santa-offload/santa v0.0.0

require golang.org/x/sys v0.43.0 // indirect

// The Santa module from this repository; outside it, replace with the path
// of a Santa checkout.
replace github.com/santa-offload/santa => ../../..
