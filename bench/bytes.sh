#!/usr/bin/env bash
# Bytes to a ready node, berth against kata-deploy 4.1.0, per amd64 shim
# that kata-deploy 4.1 ships (bench/RESULTS.md, "Bytes to a ready node").
#
# Inputs, all committed with their sources:
#   bench/data/kata-4.1-amd64-shims.tsv  each shim's component tarballs
#       (kata-deploy's shim-components.json at tag 4.1.0) and the release
#       tarball that carries them;
#   bench/data/kata-4.1-sizes.tsv        the sizes found for 4.1.0 (release
#       tarballs, the kata-deploy image's make-up), with provenance.
#
# Per shim: what berth fetches for that one platform is at most the
# components kata-deploy's own map says the shim needs (berth's manifest
# lists the files of those components, so it can only be fewer), and
# kata-deploy fetches its image, which holds the component tarballs of every
# shim. Both then write the shim's components onto the host; kata-deploy
# has first written its image twice (containerd's content store and the
# unpacked snapshot, in which the component tarballs stay compressed).
#
# The per-component sizes of 4.1.0 were not found (see the sizes file), so
# without COMPONENT_SIZES the berth column is the bound the release tarball
# of the shim's runtime gives, and the ratio is an upper bound. With
#   COMPONENT_SIZES=FILE   lines "<bytes> <name>" or `ls -l`/`tar -tv`
#                          output naming kata-static-<name>.tar.zst files,
#                          e.g. the listing of /opt/kata-artifacts/tarballs
#                          in quay.io/kata-containers/kata-deploy:4.1.0:
#     crane export quay.io/kata-containers/kata-deploy:4.1.0 - | tar -tvf - opt/kata-artifacts/tarballs
# the table is exact: berth's bytes are the sum of the shim's components
# (compressed, as fetched) and kata-deploy's image is the sum of all 29.
#
# Usage: bench/bytes.sh            (prints a Markdown table)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - bench/data/kata-4.1-amd64-shims.tsv bench/data/kata-4.1-sizes.tsv "${COMPONENT_SIZES:-}" <<'PY'
import csv, re, sys

shims_file, sizes_file, comp_file = sys.argv[1], sys.argv[2], sys.argv[3]

def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))

sizes = {r["item"]: r for r in rows(sizes_file)}
def size(item):
    v = sizes[item]["bytes"]
    if not v.isdigit():
        sys.exit(f"{sizes_file}: item {item!r}: bytes {v!r} is not a number")
    return int(v)

tarball = {
    "rust": size("kata-static-4.1.0-amd64.tar.zst"),
    "go": size("kata-go-static-4.1.0-amd64.tar.zst"),
}
image_lower = size("kata-deploy 4.1.0 image: lower bound")

comp = {}
if comp_file:
    pat = re.compile(r"(\d+)\s.*?kata-static-([a-z0-9-]+)\.tar\.zst\s*$|^\s*(\d+)\s+([a-z0-9-]+)\s*$")
    with open(comp_file) as f:
        for n, line in enumerate(f, 1):
            m = pat.search(line)
            if not m:
                continue
            b, name = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            comp[name] = int(b)
    if not comp:
        sys.exit(f"COMPONENT_SIZES={comp_file}: no line names a kata-static-<name>.tar.zst with its size")

def mb(b):
    return f"{b/1e6:,.0f} MB"

exact = bool(comp)
if exact:
    image = sum(comp.values())
    image_note = f"{mb(image)} (sum of {len(comp)} component tarballs)"
else:
    image = image_lower
    image_note = f">= {mb(image)}"

print("| shim | runtime | components (kata-deploy's map) | berth fetches | kata-deploy fetches (image) | ratio | goal <= 0.25x | kata-deploy writes besides what berth writes |")
print("|---|---|---|---|---|---|---|---|")
for r in rows(shims_file):
    comps = r["components"].split()
    if exact:
        missing = [c for c in comps if c not in comp]
        if missing:
            sys.exit(f"COMPONENT_SIZES: no size for {missing} (shim {r['shim']})")
        berth = sum(comp[c] for c in comps)
        berth_s = mb(berth)
        ratio = f"{berth/image:.2f}x"
        met = "yes" if berth <= 0.25 * image else "NO"
    else:
        berth = tarball[r["runtime"]]
        berth_s = f"<= {mb(berth)}"
        ratio = f"<= {berth/image:.2f}x"
        met = "not shown"
    # Both extract the shim's components onto the host; kata-deploy first
    # writes its image into containerd's content store and the unpacked
    # snapshot (the tarballs inside stay compressed, so each is the image).
    written = f">= {mb(2*image)}"
    print(f"| `{r['shim']}` | {r['runtime']} | {len(comps)}: {', '.join(comps)} | {berth_s} | {image_note} | {ratio} | {met} | {written} |")
PY
