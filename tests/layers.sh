#!/bin/sh
# layers.sh: the include rule of src/ (doc/design.md, "Layers").  Each
# folder of src/ is a layer, in this order:
#	util parse conf keys audit loop dns conn daemon
# A file includes headers of its own folder and of folders to its left
# only, always by folder ("conf/policy.h"); a folder's *_int.h is for that
# folder alone.  src/main.c may include any layer; src/sluicectl/ (the
# CLI, a program of its own) may include its own headers and those of util,
# parse, conf, keys and audit.
#
# usage: tests/layers.sh [SRCDIR]   (default: $top_srcdir/src, or ./src)
# Prints each violation as FILE:LINE: message, then "N passed, N failed"
# (one check per file).  Exit 0 when no file breaks the rule.
set -u
src=${1:-${top_srcdir:-.}/src}
order="util parse conf keys audit loop dns conn daemon"

# rank FOLDER: its position in $order (1..), or 0 when it is no layer
rank() {
	i=1
	for l in $order; do
		[ "$l" = "$1" ] && { echo $i; return; }
		i=$((i + 1))
	done
	echo 0
}

npass=0 nfail=0
for f in $(cd "$src" && find . -name '*.[ch]' | sed 's|^\./||' | sort); do
	case "$f" in
	main.c) mine=main; max=99 ;;
	sluicectl/*) mine=sluicectl; max=$(rank audit) ;;
	*/*) mine=${f%%/*}; max=$(rank "$mine") ;;
	*) echo "$f:1: a source file outside every layer folder"; nfail=$((nfail + 1)); continue ;;
	esac
	if [ "$max" = 0 ]; then
		echo "$f:1: folder $mine is not a layer ($order)"
		nfail=$((nfail + 1))
		continue
	fi
	bad=$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$src/$f" |
	    sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' |
	    while read -r line inc; do
		case "$inc" in
		autoconf.h) continue ;;
		*/*) dir=${inc%%/*} ;;
		*) echo "$f:$line: \"$inc\" is included without its folder"; continue ;;
		esac
		if [ "$dir" = sluicectl ]; then
			[ "$mine" = sluicectl ] ||
			    echo "$f:$line: \"$inc\" belongs to sluicectl"
			continue
		fi
		r=$(rank "$dir")
		if [ "$r" = 0 ]; then
			echo "$f:$line: \"$inc\" is in no layer"
			continue
		fi
		if [ "$dir" != "$mine" ] && [ "$r" -gt "$max" ]; then
			echo "$f:$line: $mine includes \"$inc\" of $dir, a layer above it"
			continue
		fi
		case "$inc" in
		*_int.h) [ "$dir" = "$mine" ] ||
		    echo "$f:$line: \"$inc\" is internal to $dir" ;;
		esac
		[ -f "$src/$inc" ] || echo "$f:$line: \"$inc\" does not exist"
	    done)
	if [ -n "$bad" ]; then
		echo "$bad"
		nfail=$((nfail + 1))
	else
		npass=$((npass + 1))
	fi
done
[ $((npass + nfail)) -gt 0 ] || { echo "no source files under $src"; nfail=1; }
echo "$npass passed, $nfail failed"
[ "$nfail" = 0 ]
