# bash completion for duro(1): verbs, each verb's options, status names.
# Installed as share/bash-completion/completions/duro.

_duro()
{
    local cur prev verb i
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    local verbs="list status history start raise wait cancel terminate
        suspend resume delete purge prune metrics version ui"
    local common="--db --json --help"

    verb=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        --db) ((i++)) ;;
        -*) ;;
        *) verb=${COMP_WORDS[i]}; break ;;
        esac
    done

    case $prev in
    --status)
        local statuses="pending running suspended completed failed
            cancelled terminated"
        case $verb in
        suspend) statuses="pending running" ;;
        cancel | terminate) statuses="pending running suspended" ;;
        resume) statuses="suspended" ;;
        purge) statuses="completed failed cancelled terminated" ;;
        esac
        # a comma-separated list: complete the last element with the
        # statuses not given yet
        local done_part="" last=$cur s left=""
        if [[ $cur == *,* ]]; then
            done_part=${cur%,*},
            last=${cur##*,}
        fi
        for s in $statuses; do
            [[ ,$done_part == *,$s,* ]] || left="$left $s"
        done
        COMPREPLY=($(compgen -P "$done_part" -W "$left" -- "$last"))
        return
        ;;
    --db)
        COMPREPLY=($(compgen -P sqlite: -f -- "${cur#sqlite:}"))
        return
        ;;
    --output | --token-file)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    --input)
        if [[ $cur == @* ]]; then
            COMPREPLY=($(compgen -P @ -f -- "${cur#@}"))
        fi
        return
        ;;
    --name | --since | --until | --limit | --version | --delay | --timeout | \
        --reason | --by | --before | --keep | --execution | --listen)
        return
        ;;
    esac

    if [[ -z $verb ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$common --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
        fi
        return
    fi

    local opts=""
    case $verb in
    list) opts="--status --name --since --until --limit" ;;
    status) opts="" ;;
    history) opts="--execution" ;;
    start) opts="--input --version --delay" ;;
    raise) opts="--event-id" ;;
    wait) opts="--timeout" ;;
    cancel | terminate | suspend | resume)
        opts="--reason --by --dry-run --name --status --before"
        ;;
    delete) opts="--force" ;;
    purge) opts="--before --status --name --dry-run" ;;
    prune) opts="--keep" ;;
    metrics) opts="--output" ;;
    ui) opts="--listen --token-file --read-only" ;;
    version) opts="" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts $common" -- "$cur"))
    elif [[ $cur == @* ]]; then
        COMPREPLY=($(compgen -P @ -f -- "${cur#@}"))
    fi
}
complete -F _duro duro
