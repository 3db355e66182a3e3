# Sourced (bash) by scripts/mariadb-tls.sh and scripts/postgres-tls.sh, from the workspace
# root. Each starts a throwaway server that takes only TLS, for one store's TLS tests, and
# the life of that server is the same for both: the same arguments and skip variables, the
# same certificates, a free port retried when taken, the same start timeout, a previous
# run's server stopped only while it is still that server, the same watcher. Kept here once
# so that the two cannot drift apart; each script keeps only its server's own: finding and
# starting the daemon, its config, its user and password, and the variables it prints.
#
# A script that sources this file sets, before sourcing:
#   name         e.g. mariadb-tls: its messages' prefix, its folder target/<name>/ (which
#                this file sets as $dir) and the name of its watcher process
# and, before calling begin_run:
#   store        the store in messages (MySQL, PostgreSQL)
#   skip_var     the variable that skips the store's server tests (GOTRY_SKIP_MYSQL)
#   url_var      the variable that names a TLS server of the user's own (GOTRY_MYSQL_TLS_URL)
#   pid_file     the server's pid file, the pid on its first line
#   server_mark  a piece of the server's command line (as /proc shows it, each argument
#                followed by a space) that names this run's data directory: a pid is only
#                signalled while it is still that server, since the pid file of an earlier
#                run may name a process that has since become something else
#   stop_signal  the signal of the server's fast shutdown (TERM, INT)
#   daemon_name  the server in messages (mariadbd, postgres)
#   server_log   where the server writes its errors
#   port_taken   a grep pattern of that log for a port another process took first
# and defines, before calling start_server:
#   launch       starts the server on $port as a background job of the current shell, so
#                that $! is the server's pid (with setsid: the server is to outlive the
#                caller's process group)
#   answers_tls  succeeds once the server answers a checked TLS connection
#
# The calls, in order: begin_run "$@", fresh_dir, make_certs, start_server (sets port and
# server, the server's pid), watch_server; elapsed for the closing message.

# The variables above are the sourcing script's.
# shellcheck shell=bash disable=SC2154

say() { printf '%s.sh: %s\n' "$name" "$*" >&2; }
die() {
    say "$@"
    exit 1
}

dir="$PWD/target/$name"
watch_pid_file="$dir/watcher.pid"

# The pid in $1 when it is alive and is the server of this data directory.
our_server() {
    local pid="$1"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$server_mark"
}

stop_previous() {
    if [[ -s "$watch_pid_file" ]]; then
        local watcher
        watcher="$(cat "$watch_pid_file")"
        if [[ -r "/proc/$watcher/cmdline" ]] && tr '\0' ' ' <"/proc/$watcher/cmdline" | grep -qF "$name-watch"; then
            kill "$watcher" 2>/dev/null || true
        fi
        rm -f "$watch_pid_file"
    fi
    [[ -s "$pid_file" ]] || return 0
    local pid
    pid="$(head -n 1 "$pid_file")"
    if our_server "$pid"; then
        say "stopping the server of the previous run (pid $pid)"
        kill "-$stop_signal" "$pid" 2>/dev/null || true
        for _ in $(seq 100); do
            our_server "$pid" || return 0
            sleep 0.2
        done
        say "pid $pid did not stop within 20 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
}

# The arguments ([--watch PID] | --stop), then the skip variables: `--stop` stops a server
# even when the tests are skipped now.
begin_run() {
    watch=""
    case "${1:-}" in
        --stop)
            stop_previous
            rm -rf "$dir"
            exit 0
            ;;
        --watch)
            watch="${2:?--watch takes a pid}"
            [[ "$watch" =~ ^[0-9]+$ ]] || die "--watch takes a pid, got '$watch'"
            ;;
        "") ;;
        *) die "unknown argument '$1'; usage: $0 [--watch PID] | --stop" ;;
    esac

    if [[ "${!skip_var:-}" == 1 ]]; then
        say "$skip_var=1: the TLS tests of the $store store are SKIPPED, no server started"
        exit 0
    fi
    if [[ -n "${!url_var:-}" ]]; then
        say "$url_var is set: the TLS tests use that server, nothing to start here"
        exit 0
    fi
    started_at=$(date +%s.%N)
}

# Seconds since begin_run, for the closing message.
elapsed() {
    awk -v a="$started_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

# Stops the previous run's server and makes its folder anew.
fresh_dir() {
    stop_previous
    rm -rf "$dir"
    mkdir -p "$dir"
}

# A CA and a server certificate (CN localhost, SAN DNS:localhost and IP:127.0.0.1, EC P-256),
# and a second CA that signed nothing (the tests' "wrong CA"), all new on every run.
make_certs() {
    certs >"$dir/openssl.log" 2>&1 || die "openssl failed; see $dir/openssl.log"
}

certs() {
    local days=30
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 \
        -days "$days" -subj "/CN=gotry test CA $$" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$dir/ca.key" -out "$dir/ca.pem"
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 \
        -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr"
    cat >"$dir/server.ext" <<'EXT'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
EXT
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -days "$days" -sha256 -extfile "$dir/server.ext" -out "$dir/server.pem"
    # Unrelated: same shape, its own key, signed nothing this server shows.
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 \
        -days "$days" -subj "/CN=gotry unrelated CA $$" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$dir/other-ca.key" -out "$dir/other-ca.pem"
    openssl verify -CAfile "$dir/ca.pem" "$dir/server.pem"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_server() {
    # Another process may take the free port between the probe and the bind: try a few.
    port=""
    local try ready
    for try in 1 2 3; do
        port="$(free_port)"
        # So that the pid file read below is this start's.
        rm -f "$pid_file"
        launch
        server=$!
        ready=""
        # A cold start on a busy machine can take a while: up to a minute.
        for _ in $(seq 240); do
            if ! kill -0 "$server" 2>/dev/null; then
                break
            fi
            if answers_tls; then
                ready=1
                break
            fi
            sleep 0.25
        done
        [[ -z "$ready" ]] || break
        if kill -0 "$server" 2>/dev/null; then
            kill -KILL "$server" 2>/dev/null || true
            die "$daemon_name did not answer over TLS on 127.0.0.1:$port within a minute; the end of its log:" \
                "$(tail -n 20 "$server_log" 2>/dev/null)"
        fi
        if ! grep -q "$port_taken" "$server_log" 2>/dev/null || [[ "$try" == 3 ]]; then
            die "$daemon_name exited at start; the end of its log:" "$(tail -n 20 "$server_log" 2>/dev/null)"
        fi
        say "port $port was taken meanwhile; trying another"
    done
    # The server wrote its pid file by now; it is the same process as $server (setsid does
    # not fork when its caller is not a process group leader, as a background job of a
    # script is not).
    [[ "$(head -n 1 "$pid_file" 2>/dev/null)" == "$server" ]] \
        || say "note: pid file says $(head -n 1 "$pid_file" 2>/dev/null), started $server"
}

# With --watch, a watcher stops the server once that pid has exited.
watch_server() {
    [[ -n "$watch" ]] || return 0
    # Detached, and with no descriptor of the caller's: a command substitution waits for
    # every writer of its pipe to close.
    # shellcheck disable=SC2016 # expanded by the watcher's bash, from its arguments
    local watcher='while kill -0 "$1" 2>/dev/null; do sleep 2; done
        if tr "\0" " " <"/proc/$2/cmdline" 2>/dev/null | grep -qF -- "$3"; then kill "-$4" "$2"; fi'
    setsid bash -c "$watcher" "$name-watch" "$watch" "$server" "$server_mark" "$stop_signal" \
        </dev/null >>"$dir/watcher.log" 2>&1 &
    echo $! >"$watch_pid_file"
}
