# Environment for tests and the demo, sourced by scripts/test.sh and scripts/demo.sh.
# Without a GPU, slangpy's Vulkan device runs on lavapipe; one thread keeps atomic sums
# bit-reproducible.
lavapipe_icd=/usr/share/vulkan/icd.d/lvp_icd.json
if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; } \
   && [ -f "$lavapipe_icd" ]; then
  export VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-$lavapipe_icd}
  export LP_NUM_THREADS=${LP_NUM_THREADS:-1}
fi
