#!/usr/bin/env bash
# Photo folders under mpirun: each process decodes only its own replicas' slices of
# every global batch (and of the validation set's), augmented as one process
# augments them: N processes x 1 device compute the bits one process with N devices
# computes, and each process's count of images prepared (the log's `decoding`)
# equals its replicas' examples, not the global batch's.
#   test_mpi_photos.sh CLTRAIN CKPT_TOOL MAKE_PHOTOS
set -u
CLT=$1
TOOL=$2
MAKE=$3
. "$(dirname "$0")/lib.sh"

mpi_check "$CLT" || skip_exit
export POCL_DEVICES="pthread pthread pthread"

# 66 photos of 3 classes: 50 to train on (global batches of 12: 4 of 12 and one of
# 2), 16 to validate; a model without BatchNormalization (the reference CNN's layers
# on RGB), so N replicas also come close to one device on the whole batch.
"$MAKE" "$tmp/ph" 3 22 5 >/dev/null || bad "make_photos"
/usr/bin/python3 - "$(dirname "$0")/models/examples/fmnist_cnn.json" "$tmp/rgb.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
layers = m["config"]["layers"]
layers[0]["config"]["batch_shape"] = [None, 28, 28, 3]
[d for d in layers if d["class_name"] == "Dense"][-1]["config"]["units"] = 3
json.dump(m, open(sys.argv[2], "w"))
PY

# train NAME NP DEVICES BATCH SPLIT [flags]: 2 epochs into $tmp/NAME; NP 0 runs without mpirun.
train() {
  local name=$1 np=$2 devices=$3 batch=$4 split=$5
  shift 5
  local cmd=("$CLT" train --data "$tmp/ph" --model "$tmp/rgb.json" --image-size 28 --validation-split 0.25
    --augment flip,rotate=0.1 --epochs 2 --devices "$devices" --split "$split" --batch-per-replica "$batch"
    --seed 9 --checkpoint-dir "$tmp/$name" --checkpoint-every 1 --log "$tmp/$name.jsonl" "$@")
  if [ "$np" -gt 0 ]; then cmd=("${MPI[@]}" -np "$np" "${cmd[@]}"); fi
  "${cmd[@]}" >"$tmp/$name.txt" 2>&1 || bad "run $name ($(tail -3 "$tmp/$name.txt"))"
}
same_bits() {
  local d
  d=$("$TOOL" diff "$2" "$3" | awk '{ print $2 }')
  if [ "$d" = "0.000e+00" ]; then ok "$1"; else bad "$1 (max relative difference $d)"; fi
}
# shares NAME EXACT: each epoch, each rank's images prepared against its replicas'
# examples (EXACT 1: equal, and all decoded from files in epoch 1; 0: at least those,
# and with several processes fewer in all than each preparing the whole set), and the
# validation images over the ranks the set's 16. Prints what differs.
shares() {
  /usr/bin/python3 - "$tmp/$1.jsonl" "$2" <<'PY'
import json, sys
exact = sys.argv[2] == "1"
bad = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    ep, work = r["epoch"], r["decoding"]
    for w in work:
        mine = sum(x["examples"] for x in r["replicas"] if x.get("rank", 0) == w["rank"])
        if exact and w["images"] != mine or not exact and w["images"] < mine:
            bad.append("epoch %d rank %d: %d images for %d examples" % (ep, w["rank"], w["images"], mine))
        if exact and ep == 1 and w["decoded"] != w["images"]:
            bad.append("epoch 1 rank %d: %d of %d decoded" % (w["rank"], w["decoded"], w["images"]))
    total = sum(w["images"] for w in work)
    if len(work) > 1 and total >= len(work) * r["train_examples"] or sum(w["test_images"] for w in work) != 16:
        bad.append("epoch %d: %d images in all, %d validation" % (ep, total, sum(w["test_images"] for w in work)))
print("; ".join(bad) if bad else "ok")
PY
}

train one 0 0 12 equal
train local2 0 0,1 6 equal
train local3 0 0,1,2 4 equal
train mpi2 2 0 6 equal --check-replicas --profile
train mpi3 3 0 4 equal --check-replicas
same_bits "photos, augmented: 2 processes x 1 device = 1 process x 2 devices, bit for bit" \
  "$tmp/local2/ckpt-2.npz" "$tmp/mpi2/ckpt-2.npz"
same_bits "photos, augmented: 3 processes x 1 device = 1 process x 3 devices, bit for bit" \
  "$tmp/local3/ckpt-2.npz" "$tmp/mpi3/ckpt-2.npz"
expect_close "photos: 2 processes x 6 = 1 device x 12 after 2 epochs" "$tmp/one/ckpt-2.npz" "$tmp/mpi2/ckpt-2.npz" 1e-4
expect_close "photos: 3 processes x 4 = 1 device x 12 after 2 epochs" "$tmp/one/ckpt-2.npz" "$tmp/mpi3/ckpt-2.npz" 1e-4
a=$(grep -Eo '"test_accuracy": [0-9.]+' "$tmp/local3.jsonl")
b=$(grep -Eo '"test_accuracy": [0-9.]+' "$tmp/mpi3.jsonl")
if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "the validation split scores the same on 3 processes"; else
  bad "the validation split scores the same on 3 processes ($a vs $b)"; fi

for run in mpi2 mpi3; do
  r=$(shares $run 1)
  [ "$r" = ok ] && ok "$run: each process decodes its replicas' slices alone" ||
    bad "$run: each process decodes its replicas' slices alone ($r)"
done
r=$(shares one 1)
[ "$r" = ok ] && ok "one process decodes every example once an epoch" || bad "one process decodes every example ($r)"
if grep -Eq "^  photo decoding of rank 1: 25 images \(25 decoded from files, the rest from the cache\), [0-9.]+s of CPU time$" "$tmp/mpi2.txt"; then
  ok "--profile: each rank's photo decoding"
else
  bad "--profile: each rank's photo decoding ($(grep "photo decoding" "$tmp/mpi2.txt"))"
fi

# --split auto: the slices change every step; each process decodes ahead what the
# latest split gives it and, where that moved, what its slices then ask for.
train auto 2 0 6 auto
r=$(shares auto 0)
[ "$r" = ok ] && ok "--split auto: each process decodes its slices as the split moves" ||
  bad "--split auto: each process decodes its slices as the split moves ($r)"

finish
