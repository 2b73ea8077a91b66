#!/usr/bin/env bash
# The worked fine-tuning example of docs/finetune.md, end to end, in the current
# folder: a photo folder, a Keras model file with a frozen MobileNetV2 base and
# augmentation layers, a cosine schedule with warm-up, early stopping with the
# best model kept, then a second stage that unfreezes the base, predict on a few
# photos and the ONNX export.
#   examples/finetune/run.sh MODEL_DIR [PHOTOS]
# MODEL_DIR holds model.json and weights.npz (examples/finetune/make_model.py);
# PHOTOS is a folder of class subfolders (default: 5 classes of 40 synthetic
# photos made by build/tests/make_photos).
set -euo pipefail
model=$1
photos=${2:-photos}
here=$(cd "$(dirname "$0")/../.." && pwd)
[ -d "$photos" ] || "$here/build/tests/make_photos" "$photos" 5 40 2 >/dev/null

# Stage 1: the head alone on the frozen base (the model file froze it).
cltrain train --data "$photos" --model "$model/model.json" --weights "$model/weights.npz" \
  --validation-split 0.2 --epochs 12 --batch-per-replica 16 \
  --lr-schedule cosine:decay_steps=100,warmup_target=0.005,warmup_steps=20 --lr 0.0005 \
  --early-stopping monitor=val_loss,patience=3,restore_best_weights=true \
  --checkpoint-dir stage1 --log stage1.jsonl

# Stage 2: the whole network (--freeze-until none unfreezes the model file's base)
# from stage 1's best weights, at a lower rate, again keeping the best epoch.
best=stage1/$(sed -n 's/^best_checkpoint_path: "\(.*\)"$/\1/p' stage1/best_checkpoint).npz
cltrain train --data "$photos" --model "$model/model.json" --weights "$best" --freeze-until none \
  --validation-split 0.2 --epochs 6 --batch-per-replica 16 --lr 0.0003 \
  --early-stopping monitor=val_loss,patience=2,restore_best_weights=true \
  --checkpoint-dir stage2 --log stage2.jsonl

# New photos: the top 2 classes of a few, then the model for ONNX Runtime.
cltrain predict --checkpoint stage2 --best --top-k 2 "$photos"/class_0/img_000.* "$photos"/class_3/img_001.*
cltrain export --checkpoint stage2 --best --onnx flowers.onnx
