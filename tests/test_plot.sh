#!/usr/bin/env bash
# cltrain plot LOG.jsonl -o FILE.svg: the SVG of a real training log (two replicas)
# is well-formed XML with the four panels, a marker per epoch and series and one
# legend entry per replica, and is the same bytes every time; a resumed log's
# repeated epoch counts once (the later record wins), a log without a test set
# and one of several processes are drawn, names are escaped; each bad input gives
# one error line and leaves no file (and keeps an existing one).
#   test_plot.sh CLTRAIN
set -u
CLT=$1
. "$(dirname "$0")/lib.sh"

# facts SVG: what the picture holds, one fact a line (see the checks below), or
# "not XML: ..." and a failure.
cat >"$tmp/facts.py" <<'EOF'
import sys
import xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
try:
    root = E.parse(sys.argv[1]).getroot()
except (E.ParseError, OSError) as err:
    print("not XML:", err)
    sys.exit(1)
text = lambda el: "".join(el.itertext())
print("root: %s %s %s" % (root.tag, root.get("width"), root.get("height")))
print("font-family:", root.get("font-family"))
print("svg-title:", text(root.find(ns + "title")))
for t in root.iter(ns + "text"):
    if t.get("class") in ("title", "subtitle", "panel-title", "legend-entry"):
        print("%s: %s" % (t.get("class"), text(t)))
for g in root.iter(ns + "g"):
    if g.get("class") == "series":
        marks = [el for el in g.iter() if el.get("class") == "marker"]
        lines = [el for el in g.iter() if el.get("class") == "line"]
        print("series %s: %d markers, %d lines" % (g.get("id"), len(marks), len(lines)))
        for el in marks:
            print("point %s: %s" % (g.get("id"), text(el.find(ns + "title"))))
for el in root.iter():
    if el.tag in (ns + "script", ns + "style", ns + "image", ns + "foreignObject"):
        print("external:", el.tag)
    for k, v in el.attrib.items():
        if k.endswith("href") or "url(" in v or "@import" in v:
            print("external:", el.tag, k, v)
EOF
facts() { python3 "$tmp/facts.py" "$1" >"$1.facts" 2>&1; }

# has NAME FACTS LINE...: each LINE is a whole line of the facts file.
has() {
  local name=$1 file=$2 line
  shift 2
  for line in "$@"; do
    if ! grep -Fqx -- "$line" "$file"; then
      bad "$name: '$line' (facts: $(head -c 600 "$file" | tr '\n' '|'))"
      return
    fi
  done
  ok "$name"
}

# lacks NAME FACTS REGEX: no line of the facts file matches.
lacks() {
  if grep -Eq -- "$3" "$2"; then bad "$1: $(grep -E -- "$3" "$2" | head -3 | tr '\n' '|')"; else
    ok "$1"
  fi
}

# --- a real log: two replicas, two epochs with a test set ---------------------------
if (cd "$tmp" && POCL_DEVICES="pthread pthread" "$CLT" train --epochs 2 --train-limit 512 \
  --test-limit 100 --checkpoint-every 0 --log "$tmp/a.jsonl" >"$tmp/train.txt" 2>&1) &&
  [ "$(wc -l <"$tmp/a.jsonl")" -eq 2 ]; then
  ok "cltrain train writes a two-epoch log"
else
  bad "cltrain train writes a two-epoch log ($(tail -3 "$tmp/train.txt"))"
  finish
  exit
fi

expect_ok "plot: the command's line" "^Wrote $tmp/a.svg: 2 epochs of fmnist-cnn\$" \
  "$CLT" plot "$tmp/a.jsonl" -o "$tmp/a.svg"
facts "$tmp/a.svg"
has "the SVG is well-formed XML, 1000x720, sans-serif" "$tmp/a.svg.facts" \
  "root: {http://www.w3.org/2000/svg}svg 1000 720" "font-family: sans-serif"
has "the title names the model and the log" "$tmp/a.svg.facts" \
  "title: Training of fmnist-cnn (a.jsonl)" "subtitle: 2 epochs (1 to 2), 2 replicas"
has "the four panels" "$tmp/a.svg.facts" "panel-title: Loss" "panel-title: Accuracy (%)" \
  "panel-title: Training throughput (images/s)" "panel-title: Share of the examples per replica (%)"
has "a line and a marker per epoch for each series" "$tmp/a.svg.facts" \
  "series loss-training: 2 markers, 1 lines" "series loss-test: 2 markers, 1 lines" \
  "series accuracy-training: 2 markers, 1 lines" "series accuracy-test: 2 markers, 1 lines" \
  "series throughput-training: 2 markers, 1 lines" \
  "series share-device0: 2 markers, 1 lines" "series share-device1: 2 markers, 1 lines"
has "the legends" "$tmp/a.svg.facts" "legend-entry: training" "legend-entry: test/validation"
# A long device name is cut short with an ellipsis (which replaces the ")").
if [ "$(grep -Ec '^legend-entry: device [01] \(.+(\)|…)$' "$tmp/a.svg.facts")" -eq 2 ]; then
  ok "one legend entry per replica, 'device N (name)'"
else
  bad "one legend entry per replica ($(grep legend-entry "$tmp/a.svg.facts" | tr '\n' '|'))"
fi
loss2=$(field "$tmp/a.jsonl" 2 train_loss)
has "the points are the log's values" "$tmp/a.svg.facts" \
  "point loss-training: epoch 2: $(awk -v v="$loss2" 'BEGIN { printf "%.6g", v }')" \
  "point share-device1: epoch 1: $(awk -v v="$(sed -n 1p "$tmp/a.jsonl" |
    grep -Eo '"share": [0-9.]+' | sed -n 2p | cut -d' ' -f2)" 'BEGIN { printf "%.6g", v * 100 }')"
lacks "no external resources (scripts, styles, images, links)" "$tmp/a.svg.facts" "^external:"
"$CLT" plot "$tmp/a.jsonl" -o "$tmp/a2.svg" >/dev/null 2>&1
if cmp -s "$tmp/a.svg" "$tmp/a2.svg"; then ok "the same log gives the same bytes"; else
  bad "the same log gives the same bytes"
fi
echo "old picture" >"$tmp/replace.svg"
"$CLT" plot "$tmp/a.jsonl" -o "$tmp/replace.svg" >/dev/null 2>&1
if cmp -s "$tmp/a.svg" "$tmp/replace.svg"; then ok "an existing SVG is replaced"; else
  bad "an existing SVG is replaced"
fi

# --- a resumed log: epoch 2 logged again (different values), epoch 1 after it -------
{
  cat "$tmp/a.jsonl"
  sed -n 2p "$tmp/a.jsonl" | sed -E 's/"train_loss": [0-9.]+/"train_loss": 0.123456/'
} >"$tmp/resumed.jsonl"
expect_ok "plot: a resumed log counts a repeated epoch once" \
  "^Wrote $tmp/resumed.svg: 2 epochs of fmnist-cnn\$" \
  "$CLT" plot "$tmp/resumed.jsonl" -o "$tmp/resumed.svg"
facts "$tmp/resumed.svg"
has "the later record of an epoch wins" "$tmp/resumed.svg.facts" \
  "series loss-training: 2 markers, 1 lines" "point loss-training: epoch 2: 0.123456" \
  "subtitle: 2 epochs (1 to 2), 2 replicas; 1 repeated epoch record (a resumed run): the last kept"
lacks "the earlier record of the epoch is gone" "$tmp/resumed.svg.facts" \
  "^point loss-training: epoch 2: $(awk -v v="$loss2" 'BEGIN { printf "%.6g", v }')\$"
{
  sed -n 2p "$tmp/a.jsonl"
  sed -n 1p "$tmp/a.jsonl"
} >"$tmp/unordered.jsonl"
"$CLT" plot "$tmp/unordered.jsonl" -o "$tmp/unordered.svg" >/dev/null 2>&1
if cmp -s "$tmp/a.svg" <(sed 's/unordered\.jsonl/a.jsonl/g' "$tmp/unordered.svg"); then
  ok "records are sorted by epoch"
else
  bad "records are sorted by epoch"
fi

# --- no test set: test values null ----------------------------------------------------
sed -E 's/"test_loss": [0-9.]+/"test_loss": null/; s/"test_accuracy": [0-9.]+/"test_accuracy": null/' \
  "$tmp/a.jsonl" >"$tmp/notest.jsonl"
expect_ok "plot: a log without a test set" "^Wrote $tmp/notest.svg: 2 epochs of fmnist-cnn\$" \
  "$CLT" plot "$tmp/notest.jsonl" -o "$tmp/notest.svg"
facts "$tmp/notest.svg"
has "without a test set: training drawn, test said absent" "$tmp/notest.svg.facts" \
  "series loss-training: 2 markers, 1 lines" "series loss-test: 0 markers, 0 lines" \
  "series accuracy-test: 0 markers, 0 lines" "legend-entry: test/validation: none in the log"

# --- one epoch; several processes; names that need escaping -------------------------
sed -n 1p "$tmp/a.jsonl" >"$tmp/one.jsonl"
expect_ok "plot: a single epoch" "^Wrote $tmp/one.svg: 1 epochs? of fmnist-cnn\$" \
  "$CLT" plot "$tmp/one.jsonl" -o "$tmp/one.svg"
facts "$tmp/one.svg"
has "a single epoch still shows a point per series" "$tmp/one.svg.facts" \
  "series loss-training: 1 markers, 0 lines" "series loss-test: 1 markers, 0 lines" \
  "series share-device1: 1 markers, 0 lines"
cat >"$tmp/mpi.jsonl" <<'EOF'
{"epoch": 1, "train_loss": 1.5, "train_accuracy": 40.0, "test_loss": 1.2, "test_accuracy": 50.0, "images_per_second": 900.0, "model": "a<b&\"c'", "processes": 2, "replicas": [{"rank": 0, "host": "h0", "index": 0, "device": "GPU <x>", "examples": 300, "share": 0.6}, {"rank": 1, "host": "h1", "index": 0, "device": "odd\u0001name", "examples": 200, "share": 0.4}]}
{"epoch": 2, "train_loss": 1.0, "train_accuracy": 60.0, "test_loss": 0.9, "test_accuracy": 65.0, "images_per_second": 950.0, "model": "a<b&\"c'", "processes": 2, "replicas": [{"rank": 0, "host": "h0", "index": 0, "device": "GPU <x>", "examples": 250, "share": 0.5}, {"rank": 1, "host": "h1", "index": 0, "device": "odd\u0001name", "examples": 250, "share": 0.5}]}
EOF
printf '{"epoch": 3, "train_loss": 0.8, "model": "a<b&\\"c'"'"'", "processes": 2, "replicas": [{"rank": 0, "index": 0, "device": "GPU <x>", "share": 0.5}, {"rank": 1, "index": 0, "device": "bad\\u0001\xff byte", "share": 0.5}]}\n' \
  >>"$tmp/mpi.jsonl"
expect_ok "plot: a log of several processes" "^Wrote $tmp/mpi.svg: 3 epochs of a<b&\"c'\$" \
  "$CLT" plot "$tmp/mpi.jsonl" -o "$tmp/mpi.svg"
facts "$tmp/mpi.svg"
has "ranks in the legend, names escaped, bad bytes replaced" "$tmp/mpi.svg.facts" \
  "title: Training of a<b&\"c' (mpi.jsonl)" \
  "subtitle: 3 epochs (1 to 3), 2 replicas in 2 processes" \
  "legend-entry: rank 0 device 0 (GPU <x>)" "legend-entry: rank 1 device 0 (bad � byte)" \
  "series share-rank0-device0: 3 markers, 1 lines" "point share-rank1-device0: epoch 1: 40" \
  "series accuracy-training: 2 markers, 1 lines"

# --- bad input: one error line, no file, no temp file, an existing file kept --------
# fail_case NAME REGEX LOG OUT
fail_case() {
  local name=$1 re=$2 log=$3 out=$4
  rm -f "$out"
  expect_fail "$name" "^cltrain: error: $re\$" "$CLT" plot "$log" -o "$out"
  if [ -e "$out" ] || compgen -G "$(dirname "$out")/.*.tmp-*" >/dev/null; then
    bad "$name: a file was left ($(ls -a "$(dirname "$out")" | tr '\n' ' '))"
  fi
}
fail_case "a missing log" "$tmp/none.jsonl: cannot open: No such file or directory" \
  "$tmp/none.jsonl" "$tmp/x.svg"
: >"$tmp/empty.jsonl"
fail_case "an empty log" "$tmp/empty.jsonl: empty: no epoch records to plot" \
  "$tmp/empty.jsonl" "$tmp/x.svg"
{
  head -2 "$tmp/a.jsonl"
  echo "Epoch 3, Loss: 1.0"
} >"$tmp/text.jsonl"
fail_case "a line that is not JSON" "$tmp/text.jsonl:3: not a JSON object" \
  "$tmp/text.jsonl" "$tmp/x.svg"
{
  head -1 "$tmp/a.jsonl"
  echo '[1, 2]'
} >"$tmp/array.jsonl"
fail_case "a line that is JSON but no object" "$tmp/array.jsonl:2: not a JSON object" \
  "$tmp/array.jsonl" "$tmp/x.svg"
{
  head -1 "$tmp/a.jsonl"
  echo '{"epoch": 1, "train_loss": 2.0} trailing'
} >"$tmp/trailing.jsonl"
fail_case "text after the object" "$tmp/trailing.jsonl:2: not a JSON object" \
  "$tmp/trailing.jsonl" "$tmp/x.svg"
{
  head -1 "$tmp/a.jsonl"
  sed -n 2p "$tmp/a.jsonl" | sed -E 's/"train_loss": [0-9.]+, //'
} >"$tmp/noloss.jsonl"
fail_case "a record without train_loss" "$tmp/noloss.jsonl:2: no \"train_loss\"" \
  "$tmp/noloss.jsonl" "$tmp/x.svg"
sed -n 1p "$tmp/a.jsonl" | sed -E 's/"epoch": [0-9]+, //' >"$tmp/noepoch.jsonl"
fail_case "a record without epoch" "$tmp/noepoch.jsonl:1: no \"epoch\"" \
  "$tmp/noepoch.jsonl" "$tmp/x.svg"
echo '{"epoch": 1.5, "train_loss": 2.0}' >"$tmp/halfepoch.jsonl"
fail_case "a fractional epoch" \
  "$tmp/halfepoch.jsonl:1: \"epoch\": expected a whole number, got 1.5" \
  "$tmp/halfepoch.jsonl" "$tmp/x.svg"
echo '{"epoch": 1, "train_loss": "2.0"}' >"$tmp/strloss.jsonl"
fail_case "a loss that is a string" "$tmp/strloss.jsonl:1: \"train_loss\" is not a number" \
  "$tmp/strloss.jsonl" "$tmp/x.svg"
{
  head -1 "$tmp/a.jsonl"
  sed -n 2p "$tmp/a.jsonl" | sed -E 's/"train_loss": [0-9.]+/"train_loss": 1e999/'
} >"$tmp/inf.jsonl"
fail_case "a non-finite loss" "$tmp/inf.jsonl:2: \"train_loss\" is not finite" \
  "$tmp/inf.jsonl" "$tmp/x.svg"
sed -n 1p "$tmp/a.jsonl" | sed -E 's/"images_per_second": [0-9.]+/"images_per_second": -1e400/' \
  >"$tmp/inf2.jsonl"
fail_case "a non-finite rate" "$tmp/inf2.jsonl:1: \"images_per_second\" is not finite" \
  "$tmp/inf2.jsonl" "$tmp/x.svg"
sed -n 1p "$tmp/a.jsonl" | sed -E 's/"share": [0-9.]+/"share": 1e999/' >"$tmp/inf3.jsonl"
fail_case "a non-finite share" "$tmp/inf3.jsonl:1: \"share\" is not finite" \
  "$tmp/inf3.jsonl" "$tmp/x.svg"
fail_case "an output folder that does not exist" \
  "$tmp/no/such/x.svg: cannot create: No such file or directory" "$tmp/a.jsonl" "$tmp/no/such/x.svg"
mkdir -p "$tmp/folder/dir.svg"
expect_fail "an output that is a folder" \
  "^cltrain: error: $tmp/folder/dir.svg: cannot rename into place: Is a directory\$" \
  "$CLT" plot "$tmp/a.jsonl" -o "$tmp/folder/dir.svg"
if [ -n "$(ls -A "$tmp/folder/dir.svg")" ] || [ "$(ls -A "$tmp/folder")" != "dir.svg" ]; then
  bad "an output that is a folder: a temp file was left ($(ls -a "$tmp/folder" | tr '\n' ' '))"
else
  ok "an output that is a folder: no temp file left"
fi
fail_case "an output that is not .svg" \
  "only SVG is written: $tmp/x.png; name the output FILE.svg" "$tmp/a.jsonl" "$tmp/x.png"
echo "old picture" >"$tmp/keep.svg"
expect_fail "a failed plot" "^cltrain: error: $tmp/text.jsonl:3: not a JSON object\$" \
  "$CLT" plot "$tmp/text.jsonl" -o "$tmp/keep.svg"
if [ "$(cat "$tmp/keep.svg")" = "old picture" ]; then ok "a failed plot keeps the existing file"; else
  bad "a failed plot keeps the existing file"
fi

finish
