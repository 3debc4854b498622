# bash completion for duro(1): verbs, each verb's options, status names,
# files after --db sqlite:, --output, --token-file, --tokens-file and @.
# Installed as share/bash-completion/completions/duro; needs bash alone,
# not the bash-completion package.

# The words of the command line up to the cursor as they were typed, in
# the array words and the index cword. Bash splits a word at each
# character of COMP_WORDBREAKS (':', '=' and '@' among them), so
# `--db sqlite:PATH` reaches a completion function as "--db", "sqlite",
# ":", "PATH"; the pieces no blank separates are joined again here
# (bash-completion's _get_comp_words_by_ref -n does the same). Without
# COMP_LINE (a caller that sets COMP_WORDS itself) the words are taken as
# given.
_duro_words()
{
    words=()
    cword=0
    if [[ -z ${COMP_LINE+set} ]]; then
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
        return
    fi
    local line=${COMP_LINE:0:COMP_POINT} rest piece i n=-1 blank
    for ((i = 0; i <= COMP_CWORD; i++)); do
        piece=${COMP_WORDS[i]}
        rest=${line#"${line%%[![:space:]]*}"} # the line without its blanks
        blank=0
        ((${#rest} != ${#line})) && blank=1
        if [[ $rest == "$piece"* ]]; then
            line=${rest:${#piece}}
        else # the word under the cursor, cut at the cursor
            piece=$rest
            line=""
        fi
        if ((n < 0 || blank)); then
            words[++n]=$piece
        else
            words[n]+=$piece
        fi
    done
    cword=$n
}

# Bash replaces only what follows the last COMP_WORDBREAKS character of
# the word being completed (from an '@' on: readline keeps it in the word,
# it is one of bash's rl_special_prefixes): takes what comes before off
# each completion (bash-completion's __ltrim_colon_completions, for ':',
# '=' and '@').
_duro_trim()
{
    [[ -n ${COMP_LINE+set} ]] || return 0
    local b breaks=""
    for b in @ = :; do
        [[ $COMP_WORDBREAKS == *"$b"* ]] && breaks+=$b
    done
    [[ -n $breaks && $cur == *[$breaks]* ]] || return 0
    local keep=${cur%"${cur##*[$breaks]}"}
    keep=${keep%@}
    [[ -n $keep ]] && COMPREPLY=("${COMPREPLY[@]#"$keep"}")
    return 0
}

_duro_complete()
{
    local verbs="list status history start raise wait cancel terminate
        suspend resume reset rewind delete purge prune schedule metrics runtimes version ui"
    local common="--db --json --help"

    verb=""
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        --db) ((i++)) ;;
        -*) ;;
        *) verb=${words[i]}; break ;;
        esac
    done

    case $cur in
    --db=*)
        local url=${cur#--db=}
        COMPREPLY=($(compgen -P --db=sqlite: -f -- "${url#sqlite:}"))
        return
        ;;
    esac

    case $prev in
    --status)
        local statuses="pending running suspended completed failed
            cancelled terminated"
        case $verb in
        suspend) statuses="pending running" ;;
        cancel | terminate) statuses="pending running suspended" ;;
        resume) statuses="suspended" ;;
        purge | reset) statuses="completed failed cancelled terminated" ;;
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
    --output | --token-file | --tokens-file)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    --input)
        if [[ $cur == @* ]]; then
            COMPREPLY=($(compgen -P @ -f -- "${cur#@}"))
        fi
        return
        ;;
    --overlap)
        COMPREPLY=($(compgen -W "skip buffer-one allow-all cancel-other
            terminate-other" -- "$cur"))
        return
        ;;
    --orchestration | --cron | --every | --offset | --zone | --catchup | \
        --jitter | --timeout | --note | --start | --end | --next | --fires)
        return
        ;;
    --name | --since | --until | --limit | --version | --delay | --timeout | \
        --deadline | --reason | --by | --before | --keep | --execution | --listen | \
        --to | --max)
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
    if [[ $verb == schedule ]]; then
        # the sub-verb: the first word after "schedule"
        local sub="" j
        for ((j = i + 1; j < cword; j++)); do
            case ${words[j]} in
            --db) ((j++)) ;;
            -*) ;;
            *) sub=${words[j]}; break ;;
            esac
        done
        if [[ -z $sub ]]; then
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$common" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "create update pause resume trigger
                    delete list describe" -- "$cur"))
            fi
            return
        fi
        case $sub in
        create | update)
            opts="--orchestration --cron --every --offset --zone --input
                --version --overlap --catchup --jitter --timeout --paused
                --note --start --end --dry-run"
            ;;
        pause) opts="--note --dry-run" ;;
        resume | trigger | delete) opts="--dry-run" ;;
        describe) opts="--next --fires" ;;
        esac
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$opts $common" -- "$cur"))
        elif [[ $cur == @* ]]; then
            COMPREPLY=($(compgen -P @ -f -- "${cur#@}"))
        fi
        return
    fi
    case $verb in
    list) opts="--status --name --version --since --until --limit" ;;
    status) opts="" ;;
    history) opts="--execution --export" ;;
    start) opts="--input --version --delay --deadline" ;;
    raise) opts="--event-id" ;;
    wait) opts="--timeout" ;;
    cancel | terminate)
        opts="--reason --by --dry-run --wait --yes --name --status --before"
        ;;
    suspend | resume)
        opts="--reason --by --dry-run --name --status --before"
        ;;
    reset)
        opts="--to --last-good --execution --deadline --no-deadline --reason
            --by --dry-run --name --status --since --before --max --yes"
        ;;
    rewind)
        opts="--deadline --no-deadline --reason --by --dry-run --name --since
            --before --max --yes"
        ;;
    delete) opts="--force" ;;
    purge) opts="--before --status --name --dry-run --yes" ;;
    prune) opts="--keep" ;;
    metrics) opts="--output" ;;
    runtimes) opts="--name" ;;
    ui) opts="--listen --token-file --tokens-file --operator --login-code-ttl --session-ttl --read-only" ;;
    version) opts="" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts $common" -- "$cur"))
    elif [[ $cur == @* ]]; then
        COMPREPLY=($(compgen -P @ -f -- "${cur#@}"))
    fi
}

_duro()
{
    local cur prev verb i words cword
    COMPREPLY=()
    _duro_words
    cur=${words[cword]}
    prev=""
    ((cword > 0)) && prev=${words[cword - 1]}
    _duro_complete
    _duro_trim
}
complete -F _duro duro
