# Santa: build, test and benchmark. Everything runs as root on Debian 12.
# `make test` and `make demo` install what they need first (make setup).

GO       ?= go
# python3-matplotlib: bench/report's test; Debian's python3, not a pyenv one.
# nginx-light, curl, wrk: the TCP integration test's real server and clients.
PKGS     := clang llvm libbpf-dev bpftool iproute2 ethtool gcc make pkg-config python3 python3-matplotlib \
            nginx-light curl wrk
VMLINUX  := bpf/include/vmlinux.h
# The servers the offload agents' end-to-end tests start
# (test/integration, internal/dnstest, test/daemon): BIND (rndc), Knot
# (knotc), NSD (nsd-control), memcached (the agent, the linearizability
# check, the local-client tests);
# zsh for the completion test (deploy/).
TEST_PKGS  := bind9 knot nsd memcached zsh
# The real peers of the benchmarks (bench/dns, ...).
BENCH_PKGS := $(TEST_PKGS) dnsperf nginx-light wrk python3-matplotlib

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

.PHONY: setup test-deps bench-deps build test test-kubernetes fuzz bench report demo clean toolchain binaries man install uninstall deb

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
	rm -rf build
# ---- install (docs/operations.md, "Installing") ----
# make install [PREFIX=/usr/local] [DESTDIR=]: the binaries, units,
# configuration (only if absent), man pages, completion and the C SDK.
PREFIX      ?= /usr/local
SBINDIR     ?= $(PREFIX)/sbin
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
MANDIR      ?= $(PREFIX)/share/man
DOCDIR      ?= $(PREFIX)/share/doc/santa
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
CONFDIR     ?= /etc/santa
# Debian 12 keeps units in /lib; systemd reads /usr/local/lib/systemd too.
# systemd-sysusers reads no /usr/local: /etc/sysusers.d then.
# Debian's zsh reads vendor-completions only under /usr, and
# site-functions under /usr/local (another PREFIX's goes into fpath by hand).
USRPREFIX    = $(filter /usr,$(PREFIX))
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/$(if $(USRPREFIX),vendor-completions,site-functions)
UNITDIR     ?= $(if $(USRPREFIX),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
SYSUSERSDIR ?= $(if $(USRPREFIX),/usr/lib/sysusers.d,/etc/sysusers.d)
TMPFILESDIR ?= $(if $(USRPREFIX),/usr/lib/tmpfiles.d,$(PREFIX)/lib/tmpfiles.d)
COMMANDS    := santad santactl santa-offload
MANPAGES    := $(patsubst docs/man/%.md,build/man/%,$(wildcard docs/man/*.md))
INSTALL     ?= install

# The binaries, built from the data plane's objects (go build embeds them),
# which need the BPF toolchain (not the tests' packages of setup).
GO_LDFLAGS ?=
toolchain:
	$(call install-missing,clang llvm libbpf-dev bpftool)
binaries: toolchain $(DATAPLANE_GEN)
	$(GO) build -trimpath -ldflags="$(GO_LDFLAGS)" -o build/bin/ $(addprefix ./cmd/,$(COMMANDS))

# go-md2man: Debian's package of the same name.
man: $(MANPAGES)
# (mkman @includes the docs: any of them may change a page)
build/man/%: docs/man/%.md docs/man/mkman $(wildcard docs/*.md)
	$(call install-missing,go-md2man)
	@mkdir -p $(@D)
	docs/man/mkman $< | go-md2man > $@.tmp && mv $@.tmp $@

install: binaries man
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR)
	$(INSTALL) -m 755 build/bin/santad build/bin/santa-offload $(DESTDIR)$(SBINDIR)/
	$(INSTALL) -m 755 build/bin/santactl $(DESTDIR)$(BINDIR)/
	$(INSTALL) -d $(DESTDIR)$(UNITDIR)
	for u in deploy/*.service; do \
		sed 's|/usr/sbin/|$(SBINDIR)/|g' $$u > $(DESTDIR)$(UNITDIR)/$${u##*/} && chmod 644 $(DESTDIR)$(UNITDIR)/$${u##*/}; \
	done
	$(INSTALL) -D -m 644 deploy/santa.sysusers $(DESTDIR)$(SYSUSERSDIR)/santa.conf
	$(INSTALL) -D -m 644 deploy/santa.tmpfiles $(DESTDIR)$(TMPFILESDIR)/santa.conf
	$(INSTALL) -d $(DESTDIR)$(CONFDIR) $(DESTDIR)$(DOCDIR)/examples
	$(INSTALL) -m 644 deploy/*.json $(DESTDIR)$(DOCDIR)/examples/
	@# an operator's configuration is never overwritten
	[ -e $(DESTDIR)$(CONFDIR)/santad.json ] || $(INSTALL) -m 644 deploy/santad.json $(DESTDIR)$(CONFDIR)/santad.json
	$(INSTALL) -d $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	$(INSTALL) -m 644 $(filter %.5,$(MANPAGES)) $(DESTDIR)$(MANDIR)/man5/
	$(INSTALL) -m 644 $(filter %.8,$(MANPAGES)) $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -d $(DESTDIR)$(BASHCOMPDIR)
	for c in $(COMMANDS); do $(INSTALL) -m 644 deploy/completion/santa.bash $(DESTDIR)$(BASHCOMPDIR)/$$c; done
	@# _santactl sources the bash completion from where this installs it
	$(INSTALL) -d $(DESTDIR)$(ZSHCOMPDIR)
	sed 's|/usr/share/bash-completion/completions/|$(BASHCOMPDIR)/|g' deploy/completion/_santactl > $(DESTDIR)$(ZSHCOMPDIR)/_santactl
	chmod 644 $(DESTDIR)$(ZSHCOMPDIR)/_santactl
	$(MAKE) -C sdk/c install PREFIX=$(PREFIX) LIBDIR=$(LIBDIR) DESTDIR=$(abspath $(DESTDIR))
	@[ -n "$(DESTDIR)" ] || echo "installed; now: systemd-sysusers; systemd-tmpfiles --create; ldconfig; systemctl daemon-reload"

uninstall:
	rm -f $(addprefix $(DESTDIR)$(SBINDIR)/,santad santa-offload) $(DESTDIR)$(BINDIR)/santactl
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/,$(notdir $(wildcard deploy/*.service)))
	rm -f $(DESTDIR)$(SYSUSERSDIR)/santa.conf $(DESTDIR)$(TMPFILESDIR)/santa.conf
	rm -rf $(DESTDIR)$(DOCDIR)
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(filter %.5,$(MANPAGES)))) \
	      $(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(filter %.8,$(MANPAGES))))
	rm -f $(addprefix $(DESTDIR)$(BASHCOMPDIR)/,$(COMMANDS)) $(DESTDIR)$(ZSHCOMPDIR)/_santactl
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/,libsanta.a libsanta.so libsanta.so.0 libsanta.so.0.1.0 pkgconfig/santa.pc)
	rm -rf $(DESTDIR)$(PREFIX)/include/santa
	@echo "kept: $(CONFDIR) (your configuration)"

# ---- Debian package (docs/operations.md, "The Debian package") ----
# make deb: build/deb/santa_*.deb, libsanta0_*.deb, libsanta-dev_*.deb,
# checked by lintian. debian/rules builds with the targets above.
DEB_PKGS := debhelper dpkg-dev fakeroot lintian go-md2man
deb: $(DATAPLANE_GEN)
	$(call install-missing,$(DEB_PKGS))
	dpkg-buildpackage -b -us -uc
	@# dpkg-buildpackage writes next to the source tree: into build/deb.
	mkdir -p build/deb
	v=$$(dpkg-parsechangelog -S Version); a=$$(dpkg-architecture -qDEB_HOST_ARCH); \
	for f in santa_$${v}_$$a.deb santa-dbgsym_$${v}_$$a.deb libsanta0_$${v}_$$a.deb libsanta0-dbgsym_$${v}_$$a.deb \
		libsanta-dev_$${v}_$$a.deb santa_$${v}_$$a.buildinfo santa_$${v}_$$a.changes; do \
		[ ! -e ../$$f ] || mv ../$$f build/deb/; \
	done
	@# every tag lintian knows but the experimental ones fails the build,
	@# pedantic and info included, unless debian/*.lintian-overrides says why
	lintian --pedantic -I --fail-on error,warning,info,pedantic build/deb/santa_*.changes
