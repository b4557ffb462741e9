module github.com/santa-offload/santa

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/prometheus/client_golang v1.23.2
	golang.org/x/sys v0.43.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
