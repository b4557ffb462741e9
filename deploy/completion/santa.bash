# bash completion of santad, santactl and santa-offload. The words come
# from the commands' own help (santactl's command table, the Go flag sets),
# read at each completion, so that they cannot drift from the binaries.
# Installed as .../bash-completion/completions/{santad,santactl,santa-offload};
# zsh runs it too (_santa, through bashcompinit): plain sh where it can be.

# _santa_flags [-v] HELP-COMMAND...: the flags a Go flag set's help lists
# ("  -name type" or "  -name"); with -v only those that take a value.
_santa_flags() {
	local valued= line name
	if [ "$1" = -v ]; then valued=1; shift; fi
	while IFS= read -r line; do
		case $line in "  -"[a-z0-9]*) ;; *) continue ;; esac
		line=${line#  }
		name=${line%%[ 	]*}
		case ${line#"$name"} in " "*) ;; *) [ -n "$valued" ] && continue ;; esac
		printf '%s\n' "$name"
	done < <("$@" 2>&1)
}

# _santa_words COMMAND WORD...: the candidates for the word after WORD...
_santa_words() {
	local cmd=$1 sub= prev= before= w
	shift
	for w; do
		prev=$w
	done
	case ${cmd##*/} in
	santactl)
		for w; do
			if [ -z "$sub" ] && [ "${w#-}" = "$w" ] && [ "$before" != -socket ]; then sub=$w; fi
			before=$w
		done
		case $prev in -*)
			_santa_flags -v "$cmd" help $sub | grep -qx -- "$prev" && return ;; # a value: files
		esac
		if [ -z "$sub" ]; then
			"$cmd" help 2>/dev/null | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }'
			_santa_flags "$cmd" -h
		else
			_santa_flags "$cmd" help "$sub"
		fi
		;;
	santad)
		_santa_flags -v "$cmd" -h | grep -qx -- "$prev" && return
		_santa_flags "$cmd" -h
		;;
	santa-offload)
		if [ $# -eq 0 ]; then
			# its usage line: "usage: santa-offload dns|memcached [...]"
			"$cmd" 2>&1 | sed -n 's/^usage: santa-offload \([a-z|]*\).*/\1/p' | tr '|' '\n'
		else
			_santa_flags -v "$cmd" "$1" -h | grep -qx -- "$prev" && return
			_santa_flags "$cmd" "$1" -h
		fi
		;;
	esac
}

_santa() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local IFS='
'
	COMPREPLY=($(compgen -W "$(_santa_words "${COMP_WORDS[@]:0:$COMP_CWORD}")" -- "$cur"))
}

complete -o default -F _santa santad santactl santa-offload
