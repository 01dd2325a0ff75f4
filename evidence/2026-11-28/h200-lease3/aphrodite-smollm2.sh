#!/usr/bin/env bash
# usage: evidence/2026-11-28/h200-lease3/aphrodite-smollm2.sh  (started in the lease, after lane A)
# Aphrodite 0.21 (transformers 4.57) could not load SmolLM2's folder as made on the host by
# transformers 5.17: its tokenizer_config.json names the class `TokenizersBackend`, which 4.x lacks.
# Here a copy names `PreTrainedTokenizerFast` (the same tokenizer.json), and lane A's Aphrodite
# step on SmolLM2 runs on it: GPU 0, lane A's cores, the functions of lease.sh.
set -uo pipefail
eval "$(sed -n '/^set -uo/,/^lane() {/p' evidence/2026-11-28/h200-lease3/lease.sh | sed '$d')"
export GPU=0 CLIENT=0,1 ENGINE=2-15 CUDA_VISIBLE_DEVICES=0
await test -e $W/lane-A.finished
FOLDER=$M/smollm2-135m-tokenizer4
rm -rf $FOLDER && cp -r $SMOL $FOLDER
sed -i 's/"TokenizersBackend"/"PreTrainedTokenizerFast"/' $FOLDER/tokenizer_config.json
grep tokenizer_class $FOLDER/tokenizer_config.json
stamp "aphrodite smollm2 start"
APHRODITE_MODEL=$FOLDER APHRODITE_SERVED_MODEL_NAME=smollm2-135m APHRODITE_GPUS=$GPU rig engine start \
  --engine aphrodite --port 2242 --cpus $ENGINE --pidfile $W/aph.pid --log $R/aphrodite-smollm2-t4.log \
  --timeout 400 || { tail -30 $R/aphrodite-smollm2-t4.log; touch $W/lane-A2.finished; exit 1; }
smollm2_sets aphrodite 2242 none $R/smollm2-aphrodite
rig engine stop --pidfile $W/aph.pid; stamp "aphrodite smollm2 done"; touch $W/lane-A2.finished
