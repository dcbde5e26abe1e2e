#!/bin/sh
# Assemble an ESP-IDF tree without network, from git snapshots of its repositories (the IDF and
# the submodules an esp32s3 MicroPython build uses), each at the commit the IDF's gitlink records.
# Also places the two component-manager packages of MicroPython's ports/esp32/main/idf_component.yml
# (espressif/mdns, espressif/tinyusb) as local components under $DEST/mpy-components; the build
# then runs with IDF_COMPONENT_MANAGER=0 and COMPONENT_DIRS naming it
# (firmware/esp32.mk). docs/FIRMWARE.md "ESP-IDF firmware" says which versions and why.
#
#   MIRROR=/work/.mirror IDF_REF=v5.3.1 DEST=/opt/esp-idf firmware/esp32s3/idf_tree.sh
#
# A snapshot is a bare git directory $MIRROR/<owner>+<name>/repo. A submodule whose recorded
# commit is absent from its snapshot stops the script with the commit and the snapshot named,
# unless SUBST_<name> names a replacement "<owner>+<name>@<ref>" (SUBST_mbedtls: upstream
# Mbed-TLS at the release Espressif's fork is based on). Files the snapshots lack (4 MiB and
# more) are listed; none is used by an esp32s3 build. A replacement is patched with
# subst-<name>.patch and configured with subst-<name>.sdkconfig (this directory) when they exist.
set -eu

MIRROR=${MIRROR:-/work/.mirror}
IDF_REF=${IDF_REF:-v5.3.1}
DEST=${DEST:-/opt/esp-idf}
MDNS_REF=${MDNS_REF:-mdns-v1.1.0}           # lockfiles/dependencies.lock.esp32s3: mdns 1.1.0
TINYUSB_REF=${TINYUSB_REF:-v0.18.0.4}       # espressif/tinyusb 0.18.0~4 (see FIRMWARE.md)
# The submodules an esp32s3 build compiles or links, and esp-mqtt (unused, but its component's
# CMakeLists.txt stops the configure step without it); the other targets' BT libraries,
# openthread, unity, ... are not needed. esp_wifi/lib is left out: its snapshot is 2.3 GB.
SUBMODULES=${SUBMODULES:-"components/mbedtls/mbedtls components/lwip/lwip components/esp_phy/lib
components/esp_coex/lib components/bt/controller/lib_esp32c3_family components/bt/host/nimble/nimble
components/heap/tlsf components/bootloader/subproject/components/micro-ecc/micro-ecc
components/mqtt/esp-mqtt"}

IDF_GIT="$MIRROR/espressif+esp-idf/repo"
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "idf_tree.sh: $*" >&2; exit 1; }
snapshot() { d="$MIRROR/$1/repo"; [ -d "$d" ] || die "no snapshot $d (fetch github:$(echo "$1" | tr + /))"; echo "$d"; }

# extract GIT REF [PATH] DIR: the tree (or a subtree) at REF into DIR, without blobs the snapshot lacks
extract() {
    git_dir=$1 ref=$2 sub=$3 out=$4
    tree=$(git --git-dir="$git_dir" ls-tree -r "$ref" -- $sub | awk '$2 == "blob" {print $3, $4}')
    absent=$(echo "$tree" | cut -d' ' -f1 | git --git-dir="$git_dir" cat-file --batch-check | awk '$2 == "missing" {print $1}')
    missing=$(for o in $absent; do echo "$tree" | awk -v o="$o" '$1 == o {print $2}'; done)
    excludes=""
    for p in $missing; do excludes="$excludes :(exclude)$p"; echo "  absent from the snapshot (not extracted): $p"; done
    mkdir -p "$out"
    # (git archive still reports the excluded absent blobs as "invalid object"; it skips them)
    if [ -n "$sub" ]; then
        git --git-dir="$git_dir" archive --format=tar "$ref" -- "$sub" $excludes | tar -x -C "$out" --strip-components=$(echo "$sub" | awk -F/ '{print NF}')
    else
        git --git-dir="$git_dir" archive --format=tar "$ref" -- . $excludes | tar -x -C "$out"
    fi
}

# nested GIT COMMIT DIR: the submodules of a submodule (mbedtls's framework), from their snapshots
nested() {
    for link in $(git --git-dir="$1" ls-tree -r "$2" | awk '$2 == "commit" {print $4 ":" $3}'); do
        npath=${link%%:*} ncommit=${link#*:}
        nurl=$(git --git-dir="$1" show "$2:.gitmodules" | awk -v p="$npath" '$1 == "path" {hit = ($3 == p)} hit && $1 == "url" {print $3; exit}')
        nrepo=$(echo "$nurl" | sed 's|^https://github.com/||; s|\.git$||; s|/|+|')
        ngit=$(snapshot "$nrepo")
        git --git-dir="$ngit" cat-file -e "$ncommit^{commit}" 2>/dev/null || die "$3/$npath: commit $ncommit is not in the snapshot $ngit"
        echo "$3/$npath: $nrepo $ncommit"
        rmdir "$3/$npath" 2>/dev/null || true
        extract "$ngit" "$ncommit" "" "$3/$npath"
    done
}

[ -d "$IDF_GIT" ] || die "no snapshot $IDF_GIT (fetch github:espressif/esp-idf)"
git --git-dir="$IDF_GIT" rev-parse -q --verify "$IDF_REF^{commit}" >/dev/null || die "$IDF_REF not in $IDF_GIT"
[ ! -e "$DEST" ] || die "$DEST exists: remove it first (the tree is made whole, never patched in place)"

echo "ESP-IDF $IDF_REF -> $DEST"
extract "$IDF_GIT" "$IDF_REF" "" "$DEST"
# The tree's own version file, as a clone's 'git describe' would give it (tools/cmake/version.cmake
# reads version.txt when $IDF_PATH is not a git checkout).
echo "$IDF_REF" > "$DEST/version.txt"

for path in $SUBMODULES; do
    commit=$(git --git-dir="$IDF_GIT" ls-tree "$IDF_REF" "$path" | awk '$2 == "commit" {print $3}')
    [ -n "$commit" ] || die "$path is no submodule at $IDF_REF"
    url=$(git --git-dir="$IDF_GIT" show "$IDF_REF:.gitmodules" | awk -v p="$path" '$1 == "path" {hit = ($3 == p)} hit && $1 == "url" {print $3; exit}')
    repo=$(echo "$url" | sed 's|^\.\./\.\./||; s|\.git$||; s|/|+|')
    git_dir=$(snapshot "$repo")
    name=$(basename "$path")
    if git --git-dir="$git_dir" cat-file -e "$commit^{commit}" 2>/dev/null; then
        echo "$path: $repo $commit"
        rmdir "$DEST/$path" 2>/dev/null || true
        extract "$git_dir" "$commit" "" "$DEST/$path"
        nested "$git_dir" "$commit" "$DEST/$path"
    else
        subst=$(eval echo "\${SUBST_$name:-}")
        [ -n "$subst" ] || die "$path: commit $commit (gitlink at $IDF_REF) is not in the snapshot $git_dir (its newest commit: $(git --git-dir="$git_dir" log --all -1 --format='%h %cs')); set SUBST_$name=<owner>+<name>@<ref> to use another tree"
        sub_git=$(snapshot "${subst%@*}")
        echo "$path: $commit not in $repo's snapshot; SUBST_$name: ${subst%@*} ${subst#*@}"
        rmdir "$DEST/$path" 2>/dev/null || true
        extract "$sub_git" "${subst#*@}" "" "$DEST/$path"
        nested "$sub_git" "${subst#*@}" "$DEST/$path"
        # what the replacement needs to build in the IDF: a patch of ours, sdkconfig settings
        # (idf_build.sh hands $DEST/sdkconfig.mpy_lazy_tree to the board)
        if [ -f "$here/subst-$name.patch" ]; then
            echo "  patch: subst-$name.patch"
            patch -d "$DEST/$path" -p1 < "$here/subst-$name.patch"
        fi
        [ ! -f "$here/subst-$name.sdkconfig" ] || cat "$here/subst-$name.sdkconfig" >> "$DEST/sdkconfig.mpy_lazy_tree"
    fi
done

# Component-manager packages as local components, named as the manager names them
# (MicroPython's CMake asks for espressif__tinyusb).
comp="$DEST/mpy-components"
echo "espressif__mdns: espressif/esp-protocols $MDNS_REF components/mdns"
extract "$(snapshot espressif+esp-protocols)" "$MDNS_REF" components/mdns "$comp/espressif__mdns"
echo "espressif__tinyusb: espressif/tinyusb $TINYUSB_REF"
extract "$(snapshot espressif+tinyusb)" "$TINYUSB_REF" "" "$comp/espressif__tinyusb"
echo "done: IDF_PATH=$DEST, components in $comp"
