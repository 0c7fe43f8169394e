"""`rooftune` run with the GEMM model's last wave counted by its own CTAs where the grid is one partial wave
(`replay_halves.exact_single_wave`), e.g. the H200 residual refitted under it, its cross-validation printed:

    python experiments/exact-last-wave-gemm/fit_single_wave.py fit gemm --data datasets/h200/gemm/train --gpu h200 \
        --out /tmp/gemm-single.json                                                          # repository root
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from replay_halves import exact_single_wave  # noqa: E402

from rooftune.roofline import gemm  # noqa: E402

if __name__ == "__main__":
    gemm.gemm_main_loop = exact_single_wave
    from rooftune.tuner.cli.app import app

    app(sys.argv[1:])
