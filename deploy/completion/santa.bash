# bash completion of santad, santactl and santa-offload. The words come
# from the commands' own help (santactl's command table, the Go flag sets),
# read at each completion, so that they cannot drift from the binaries.
# Installed as .../bash-completion/completions/{santad,santactl,santa-offload}.

# _santa_flags HELP-COMMAND...: the flags a Go flag set's help lists; with
# -v only those that take a value.
_santa_flags() {
	local re='^  (-[a-z0-9-]+)'
	if [[ $1 == -v ]]; then re='^  (-[a-z0-9-]+) [a-z]'; shift; fi
	local line
	while IFS= read -r line; do
		[[ $line =~ $re ]] && printf '%s\n' "${BASH_REMATCH[1]}"
	done < <("$@" 2>&1)
}

# _santa_words COMMAND WORD...: the candidates for the word after WORD...
_santa_words() {
	local cmd=$1; shift
	local prev=${*: -1}
	case ${cmd##*/} in
	santactl)
		local sub= before= w
		for w; do
			[[ -z $sub && $w != -* && $before != -socket ]] && sub=$w
			before=$w
		done
		if [[ $prev == -* ]] && _santa_flags -v "$cmd" help ${sub:+"$sub"} | grep -qx -- "$prev"; then
			return # a flag's value: files
		fi
		if [[ -z $sub ]]; then
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
		if [[ $# -eq 0 ]]; then
			"$cmd" 2>&1 | grep -o 'santa-offload [a-z][a-z]*' | awk '{ print $2 }' | sort -u
		else
			_santa_flags -v "$cmd" "$1" -h | grep -qx -- "$prev" && return
			_santa_flags "$cmd" "$1" -h
		fi
		;;
	esac
}

_santa() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local IFS=$'\n'
	COMPREPLY=($(compgen -W "$(_santa_words "${COMP_WORDS[@]:0:COMP_CWORD}")" -- "$cur"))
}

complete -o default -F _santa santad santactl santa-offload
