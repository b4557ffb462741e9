#!/bin/sh
# libsanta.so exports exactly the functions santa.h declares, all under
# LIBSANTA_0.1, with soname libsanta.so.0; and a DESTDIR install is usable
# through `pkg-config --cflags --libs santa`.
#   sh tests/test_exports.sh BUILD   (from sdk/c; make test runs it)
set -eu
BUILD=${1:-build}
CC=${CC:-cc}
CFLAGS=${CFLAGS:-}
MAKE=${MAKE:-make}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
so=$BUILD/libsanta.so.0.1.0
tmp=$BUILD/tests/exports
mkdir -p "$tmp"
fail=0

# The API: every name declared with SANTA_API in santa.h.
grep 'SANTA_API' include/santa/santa.h | grep -o 'santa_[a-z_]*(' | tr -d '(' | sort -u >"$tmp/want"
# What the library exports (the version node LIBSANTA_0.1 aside).
nm -D --defined-only "$so" | awk '$3 != "LIBSANTA_0.1" { print $3 }' | sort -u >"$tmp/got"
if ! sed 's/@.*//' "$tmp/got" | sort -u | cmp -s - "$tmp/want"; then
	echo "FAIL exports differ from santa.h (< exported, > declared):" >&2
	sed 's/@.*//' "$tmp/got" | sort -u | diff - "$tmp/want" >&2 || true
	fail=1
fi
if grep -v '@@LIBSANTA_0\.1$' "$tmp/got" >&2; then
	echo "FAIL symbols above are not versioned LIBSANTA_0.1" >&2
	fail=1
fi
if ! readelf -d "$so" | grep -q 'Library soname: \[libsanta\.so\.0\]'; then
	echo "FAIL soname is not libsanta.so.0" >&2
	fail=1
fi

# Install into a DESTDIR and build a program from what pkg-config says.
dest=$(cd "$BUILD" && pwd)/destdir
rm -rf "$dest"
$MAKE --no-print-directory install DESTDIR="$dest" PREFIX=/opt/santa >"$tmp/install.log"
for f in include/santa/santa.h lib/libsanta.a lib/libsanta.so.0.1.0 lib/libsanta.so.0 \
	lib/libsanta.so lib/pkgconfig/santa.pc; do
	[ -e "$dest/opt/santa/$f" ] || { echo "FAIL install: no $f" >&2; fail=1; }
done
flags=$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$dest/opt/santa/lib/pkgconfig" \
	PKG_CONFIG_SYSROOT_DIR="$dest" $PKG_CONFIG --cflags --libs santa)
want="-I$dest/opt/santa/include -L$dest/opt/santa/lib -Wl,-rpath,$dest/opt/santa/lib -lsanta" # pkgconf puts the sysroot before ${libdir} everywhere
if [ "$(echo $flags)" != "$want" ]; then
	echo "FAIL pkg-config gave '$flags', want '$want'" >&2
	fail=1
fi
# shellcheck disable=SC2086 # flags are words
$CC $CFLAGS -o "$tmp/consumer" tests/consumer.c $flags
LD_LIBRARY_PATH="$dest/opt/santa/lib" "$tmp/consumer" >"$tmp/consumer.out" || fail=1
# the program found libsanta.so.0, the soname, in the DESTDIR
LD_LIBRARY_PATH="$dest/opt/santa/lib" ldd "$tmp/consumer" | grep -q "libsanta.so.0 => $dest/opt/santa/lib/libsanta.so.0" ||
	{ echo "FAIL consumer does not load libsanta.so.0 from the DESTDIR" >&2; fail=1; }

# Install into a prefix of its own, no DESTDIR: a program built from
# pkg-config's flags runs without LD_LIBRARY_PATH (santa.pc's rpath).
prefix=$(cd "$BUILD" && pwd)/prefix
rm -rf "$prefix"
$MAKE --no-print-directory install PREFIX="$prefix" >"$tmp/install-prefix.log"
flags=$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig" $PKG_CONFIG --cflags --libs santa)
# shellcheck disable=SC2086 # flags are words
$CC $CFLAGS -o "$tmp/consumer-prefix" tests/consumer.c $flags
env -u LD_LIBRARY_PATH "$tmp/consumer-prefix" >"$tmp/consumer-prefix.out" ||
	{ echo "FAIL consumer of $prefix does not run without LD_LIBRARY_PATH" >&2; fail=1; }
env -u LD_LIBRARY_PATH ldd "$tmp/consumer-prefix" | grep -q "libsanta.so.0 => $prefix/lib/libsanta.so.0" ||
	{ echo "FAIL consumer does not load libsanta.so.0 from $prefix/lib" >&2; fail=1; }
# A system libdir needs no rpath.
$MAKE --no-print-directory -s -B "$BUILD/santa.pc" PREFIX=/usr LIBDIR=/usr/lib/x86_64-linux-gnu >/dev/null
grep -q '^Libs: -L${libdir} -lsanta$' "$BUILD/santa.pc" ||
	{ echo "FAIL santa.pc for /usr/lib/x86_64-linux-gnu: $(grep ^Libs "$BUILD/santa.pc")" >&2; fail=1; }

# build/santa.pc back to the prefix of the make that runs us
$MAKE --no-print-directory "$BUILD/santa.pc" >/dev/null

if [ $fail = 0 ]; then
	echo "test_exports: $(wc -l <"$tmp/want") symbols, pkg-config '$(echo $flags)': ok"
else
	echo "test_exports: FAIL"
fi
exit $fail
