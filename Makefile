# Santa: build, test and benchmark. Everything runs as root on Debian 12.
# `make test` and `make demo` install what they need first (make setup).

GO       ?= go
# python3-matplotlib: bench/report's test; Debian's python3, not a pyenv one.
# nginx-light, curl, wrk: the TCP integration test's real server and clients.
PKGS     := clang llvm libbpf-dev bpftool iproute2 ethtool gcc make pkg-config python3 python3-matplotlib \
            nginx-light curl wrk
VMLINUX  := bpf/include/vmlinux.h
# The DNS servers the offload agent's end-to-end tests start
# (test/integration, internal/dnstest): BIND (rndc), Knot (knotc), NSD
# (nsd-control).
TEST_PKGS  := bind9 knot nsd
# The real peers of the benchmarks (bench/dns, ...).
BENCH_PKGS := $(TEST_PKGS) dnsperf memcached nginx-light wrk python3-matplotlib

# bpf2go's loaders (a .go and its .o each), one generate step per package,
# each from its own sources: the data plane's from bpf/, the test
# programs' from test/bpf/, the benchmark's from bench/bpf/. Those take
# only vmlinux.h from bpf/include.
DATAPLANE_GEN := internal/datapath/santa_bpfel.go internal/datapath/santatcp_bpfel.go \
                 internal/datapath/santahandover_bpfel.go
XDPPASS_GEN   := internal/xdppass/xdppass_bpfel.go
DROPONCE_GEN  := test/droponce/droponce_bpfel.go
INDEXHOME_GEN := test/indexhome/indexhome_bpfel.go
MCPARSE_GEN   := test/mcparse/mcparse_bpfel.go
BENCHGEN_GEN  := bench/gen/gen_bpfel.go
MEMLAT_GEN    := bench/memlat/memlat_bpfel.go
GEN := $(DATAPLANE_GEN) $(XDPPASS_GEN) $(DROPONCE_GEN) $(INDEXHOME_GEN) $(MCPARSE_GEN) $(BENCHGEN_GEN) $(MEMLAT_GEN)
# Runs the //go:generate lines of the target's package.
BPF2GO = $(GO) generate ./$(@D)/

.PHONY: setup test-deps bench-deps build test test-kubernetes fuzz bench report demo clean

# Installs those of the Debian packages $(1) that are missing.
install-missing = @missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# Idempotent: installs only missing Debian packages, then Go modules.
setup:
	$(call install-missing,$(PKGS))
	$(GO) mod download

# The tests' and the benchmarks' peers; their Debian services are not
# started (no systemd here) and each test or benchmark runs its own
# instances in network namespaces.
test-deps:
	$(call install-missing,$(TEST_PKGS))
bench-deps:
	$(call install-missing,$(BENCH_PKGS))

# CO-RE: compiled once against the running kernel's BTF.
$(VMLINUX):
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(DATAPLANE_GEN) &: $(VMLINUX) $(wildcard bpf/*.bpf.c bpf/include/*.h)
	$(BPF2GO)
$(XDPPASS_GEN): $(VMLINUX) test/bpf/xdp_pass.bpf.c
	$(BPF2GO)
$(DROPONCE_GEN): $(VMLINUX) test/bpf/drop_once.bpf.c
	$(BPF2GO)
$(INDEXHOME_GEN): $(VMLINUX) test/bpf/index_home.bpf.c bpf/include/index_home.h bpf/include/santa_abi.h
	$(BPF2GO)
$(MCPARSE_GEN): $(VMLINUX) test/bpf/mc_parse.bpf.c $(wildcard bpf/include/mc_*.h)
	$(BPF2GO)
$(BENCHGEN_GEN): $(VMLINUX) bench/bpf/gen.bpf.c
	$(BPF2GO)
$(MEMLAT_GEN): $(VMLINUX) bench/bpf/memlat.bpf.c
	$(BPF2GO)

build: setup $(GEN)
	$(GO) build ./...
	$(GO) vet ./...

test: build test-deps
	$(GO) test -count=1 -timeout 30m ./...
	python3 -m unittest discover -s sdk/python/tests -t sdk/python
	/usr/bin/python3 -m unittest discover -s bench/report
	$(MAKE) -C sdk/c test
	$(MAKE) test-kubernetes
	$(MAKE) fuzz

# The Helm chart and plain manifests of deploy/kubernetes, rendered and
# decoded offline: a module of its own, so that the main one does not
# depend on Helm and Kubernetes (its modules come from the Go proxy).
test-kubernetes:
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...

# A short run of every fuzz target (each func FuzzX of a _test.go file);
# a longer one is FUZZTIME=10m. A failing input lands in the package's
# testdata/fuzz, where the plain tests run it from then on.
FUZZTIME ?= 15s
fuzz: build
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz: $$fn in $$(dirname $$f) for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f); \
		done; \
	done

# Runs every benchmark, keeps the RESULT lines in bench/results/latest.txt
# and regenerates the generated part of docs/benchmarks.md with its plots.
bench: build bench-deps
	mkdir -p bench/results
	bash -o pipefail -c 'bash bench/run-all.sh | tee bench/results/latest.txt'
	$(MAKE) report

# Debian's python3 (not a pyenv one), for Debian's matplotlib.
report:
	/usr/bin/python3 bench/report/report.py bench/results/latest.txt docs/benchmarks.md docs/img

demo: build
	bash examples/demo.sh

clean:
	rm -f $(VMLINUX) $(GEN) $(GEN:.go=.o)
