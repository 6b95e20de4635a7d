#!/bin/sh
# Installs runner-manager on a host without a package manager, or into a staging root
# for a package (DESTDIR). POSIX sh.
#
#   packaging/install.sh [--dry-run] [--destdir DIR] [--prefix PREFIX] [--bin PATH]
#                        [--runner-users START-END] [--users-only]
#
# DESTDIR and PREFIX may also come from the environment (--destdir/--prefix win).
# PREFIX defaults to /usr, where the unit's ExecStart=/usr/bin/runner-manager points;
# another prefix rewrites ExecStart (and ExecStopPost) to match. --bin defaults to the release build
# (under $CARGO_TARGET_DIR or target/: x86_64-unknown-linux-gnu/release, then release);
# the sysusers file names the --runner-users range's users. With an empty DESTDIR
# and root, it also creates the runner users (one per uid of --runner-users, default
# 61000-61063, named rm-runner-UID) and the state directory, sets the host's
# runner_uids to that range unless one is set, and reloads systemd. --users-only
# creates the runner users and nothing else. It never enables or starts the service:
# that is the operator's call. On a host whose init is not systemd (no
# /run/systemd/system) it names docs/supervisors.md's recipes, never systemctl.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
dry=0
destdir=${DESTDIR:-}
prefix=${PREFIX:-/usr}
bin=
runner_users=61000-61063
users_only=0
state_dir=/var/lib/runner-manager

usage() {
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit "$1"
}

while [ $# -gt 0 ]; do
    case $1 in
        --dry-run) dry=1 ;;
        --destdir) [ $# -ge 2 ] || usage 2; destdir=$2; shift ;;
        --destdir=*) destdir=${1#*=} ;;
        --prefix) [ $# -ge 2 ] || usage 2; prefix=$2; shift ;;
        --prefix=*) prefix=${1#*=} ;;
        --bin) [ $# -ge 2 ] || usage 2; bin=$2; shift ;;
        --bin=*) bin=${1#*=} ;;
        --runner-users) [ $# -ge 2 ] || usage 2; runner_users=$2; shift ;;
        --runner-users=*) runner_users=${1#*=} ;;
        --users-only) users_only=1 ;;
        -h|--help) usage 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

first=${runner_users%-*}
last=${runner_users#*-}
case $first$last in
    *[!0-9]*|'') echo "install.sh: --runner-users must be START-END, two uids (got $runner_users)" >&2; exit 2 ;;
esac
if [ "$first" -lt 1 ] || [ "$first" -gt "$last" ] || [ $((last - first)) -ge 65536 ]; then
    echo "install.sh: --runner-users must be 1 <= START <= END, at most 65536 uids (got $runner_users)" >&2
    exit 2
fi

run() {
    if [ "$dry" = 1 ]; then echo "would run: $*"; else "$@"; fi
}

# The runner users: rm-runner-UID with its own group (gid = uid), home
# STATE_DIR/homes/NAME (the daemon points it at each attempt's own), no login shell.
# Idempotent; a uid already taken by another name is an error, never reused.
make_runner_users() {
    u=$first
    while [ "$u" -le "$last" ]; do
        name=rm-runner-$u
        have=$(getent passwd "$u" | cut -d: -f1 || true)
        if [ "$have" = "$name" ]; then
            :
        elif [ -n "$have" ]; then
            echo "install.sh: uid $u belongs to $have, not $name; choose another --runner-users range" >&2
            exit 1
        else
            if ! getent group "$u" >/dev/null; then
                run groupadd -K GID_MAX=4294967293 --gid "$u" "$name"
            fi
            run useradd -K UID_MAX=4294967293 --uid "$u" --gid "$u" --no-create-home \
                --home-dir "$state_dir/homes/$name" --shell /usr/sbin/nologin \
                --comment "runner-manager runner $u" "$name"
        fi
        u=$((u + 1))
    done
}

if [ "$users_only" = 1 ]; then
    if [ "$(id -u)" != 0 ] && [ "$dry" != 1 ]; then
        echo "install.sh: --users-only creates users and needs root" >&2
        exit 1
    fi
    make_runner_users
    if [ "$dry" = 1 ]; then
        echo "dry run: nothing was done; without --dry-run, runner users rm-runner-$first .. rm-runner-$last would be made"
    else
        echo "runner users rm-runner-$first .. rm-runner-$last ready; set them with: runner-manager host set runner_uids=$runner_users"
    fi
    exit 0
fi

case $prefix in
    /*) ;;
    *) echo "install.sh: --prefix must be absolute (got $prefix)" >&2; exit 2 ;;
esac
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/usr

if [ -z "$bin" ]; then
    # Cargo's target directory: CARGO_TARGET_DIR (relative to the checkout, as cargo
    # takes it there), else the checkout's target/.
    targets=$top/target
    case ${CARGO_TARGET_DIR:-} in
        '') ;;
        /*) targets=$CARGO_TARGET_DIR ;;
        *) targets=$top/$CARGO_TARGET_DIR ;;
    esac
    for c in "$targets/x86_64-unknown-linux-gnu/release/runner-manager" \
             "$targets/release/runner-manager" "$here/runner-manager"; do
        if [ -x "$c" ]; then bin=$c; break; fi
    done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "install.sh: no runner-manager binary found: build it (cargo build --release) or give --bin PATH" >&2
    exit 1
fi

unit_src=$here/systemd/runner-manager.service
sysusers_src=$here/sysusers.d/runner-manager.conf
tmpfiles_src=$here/tmpfiles.d/runner-manager.conf
for f in "$unit_src" "$sysusers_src" "$tmpfiles_src" "$top/man/runner-manager.1" "$top/man/runner-manager-daemon.8" "$top/man/runner-manager-coordinator.8"; do
    [ -f "$f" ] || { echo "install.sh: missing $f" >&2; exit 1; }
done

# Where each file goes. systemd looks for units, sysusers and tmpfiles under
# PREFIX/lib for /usr and /usr/local alike.
bindir=$prefix/bin
mandir=$prefix/share/man
unitdir=$prefix/lib/systemd/system
sysusersdir=$prefix/lib/sysusers.d
tmpfilesdir=$prefix/lib/tmpfiles.d
bashdir=$prefix/share/bash-completion/completions
zshdir=$prefix/share/zsh/site-functions
fishdir=$prefix/share/fish/vendor_completions.d

# put MODE SRC DEST: installs one file, creating its directory.
put() {
    if [ "$dry" = 1 ]; then echo "would install $2 -> $destdir$3 (mode $1)"; return; fi
    mkdir -p "$destdir$(dirname "$3")"
    cp "$2" "$destdir$3.tmp.$$"
    chmod "$1" "$destdir$3.tmp.$$"
    mv -f "$destdir$3.tmp.$$" "$destdir$3"
    echo "installed $destdir$3"
}

# sysusers_for START-END: the packaged sysusers file's header, then one user per uid of
# the range, as the packaged file has them for 61000-61063.
sysusers_for() {
    grep '^#' "$sysusers_src"
    u=${1%-*}
    while [ "$u" -le "${1#*-}" ]; do
        echo "u rm-runner-$u $u \"runner-manager runner $u\" $state_dir/homes/rm-runner-$u /usr/sbin/nologin"
        u=$((u + 1))
    done
}

# gen MODE DEST COMMAND...: installs a command's output (completions, the unit).
gen() {
    mode=$1; dest=$2; shift 2
    tmp=$(mktemp)
    "$@" >"$tmp"
    put "$mode" "$tmp" "$dest"
    rm -f "$tmp"
}

put 0755 "$bin" "$bindir/runner-manager"
put 0644 "$top/man/runner-manager.1" "$mandir/man1/runner-manager.1"
put 0644 "$top/man/runner-manager-daemon.8" "$mandir/man8/runner-manager-daemon.8"
put 0644 "$top/man/runner-manager-coordinator.8" "$mandir/man8/runner-manager-coordinator.8"
gen 0644 "$unitdir/runner-manager.service" \
    sed -e "s|^ExecStart=/usr/bin/runner-manager|ExecStart=$bindir/runner-manager|" \
        -e "s|^ExecStopPost=-+/usr/bin/runner-manager|ExecStopPost=-+$bindir/runner-manager|" "$unit_src"
if [ "$runner_users" = 61000-61063 ]; then
    put 0644 "$sysusers_src" "$sysusersdir/runner-manager.conf"
else
    # Another range: the sysusers file names its users, so a boot makes the same ones.
    gen 0644 "$sysusersdir/runner-manager.conf" sysusers_for "$runner_users"
fi
put 0644 "$tmpfiles_src" "$tmpfilesdir/runner-manager.conf"
# Completions come from the binary itself, so they match its --help.
gen 0644 "$bashdir/runner-manager" "$bin" completions bash
gen 0644 "$zshdir/_runner-manager" "$bin" completions zsh
gen 0644 "$fishdir/runner-manager.fish" "$bin" completions fish

if [ -n "$destdir" ]; then
    if [ "$dry" = 1 ]; then
        echo "dry run: nothing was done; run it again without --dry-run to stage under $destdir"
    else
        echo "staged under $destdir; the user and state directory are created when installed for real"
    fi
    exit 0
fi
# What starts the daemon here: systemd when it is the init (sd_booted(3)'s test),
# else the host's own supervisor ($RUNNER_MANAGER_SYSTEMD_RUN_DIR moves the test, as
# it does for the binary's `service` and `doctor`).
systemd_run_dir=${RUNNER_MANAGER_SYSTEMD_RUN_DIR:-/run/systemd/system}
if [ -d "$systemd_run_dir" ] && [ ! -L "$systemd_run_dir" ]; then
    booted=1
    next="start it with 'systemctl enable --now runner-manager' (see runner-manager-daemon(8))"
else
    booted=0
    next="systemd is not running on this host (no $systemd_run_dir): run '$bindir/runner-manager daemon' under its supervisor, with a recipe from docs/supervisors.md (runit, s6, OpenRC, supervisord; the files are in packaging/)"
fi
if [ "$(id -u)" != 0 ]; then
    echo "not root: skipped creating the runner users and $state_dir"
    echo "then: $next"
    exit 0
fi

if [ "$runner_users" = 61000-61063 ] && command -v systemd-sysusers >/dev/null 2>&1; then
    run systemd-sysusers "$sysusersdir/runner-manager.conf"
else
    make_runner_users
fi
if command -v systemd-tmpfiles >/dev/null 2>&1; then
    run systemd-tmpfiles --create "$tmpfilesdir/runner-manager.conf"
else
    run install -d -m 0711 "$state_dir" "$state_dir/attempts" "$state_dir/homes"
    run install -d -m 0700 "$state_dir/logs"
fi
# Each job under its own uid from the range, unless the operator chose otherwise.
if ! "$bindir/runner-manager" --state-dir "$state_dir" --json host show 2>/dev/null \
        | grep -q '"runner_uids": "'; then
    run "$bindir/runner-manager" --state-dir "$state_dir" host set \
        "runner_uids=$runner_users" isolation=uids
fi
if [ "$booted" = 1 ]; then
    run systemctl daemon-reload
fi
if [ "$dry" = 1 ]; then
    echo "dry run: nothing was done; run it again without --dry-run to install, then: $next"
else
    echo "done: $next"
fi
