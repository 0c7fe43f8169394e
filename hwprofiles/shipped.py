"""Which shipped profile describes this GPU, by the name its driver reports (`torch.cuda.get_device_name`)."""

from __future__ import annotations

from rooftune.hwprofiles.profile import ProfileError, list_profiles

# Driver-reported name -> shipped profile, only where that profile was made for exactly this GPU
# (an H200 NVL or an H100 PCIe has other clocks and bandwidths: it gets no profile by a near name).
SHIPPED_BY_GPU_NAME = {
    "NVIDIA H200": "h200",
    "NVIDIA H100 80GB HBM3": "h100_sxm",
    "NVIDIA A100-SXM4-80GB": "a100_sxm4_80gb",
    "NVIDIA B200": "b200",
}


def shipped_profile_name(gpu_name: str) -> str:
    """The shipped profile's name for the GPU the driver calls `gpu_name`; ProfileError for any other GPU."""
    name = SHIPPED_BY_GPU_NAME.get(gpu_name.strip())
    if name is None:
        raise ProfileError(f"no shipped hardware profile for GPU {gpu_name!r} (shipped: {', '.join(list_profiles())}, "
                           f"for {', '.join(SHIPPED_BY_GPU_NAME)}); profile it once with "
                           f"`rooftune hwprobe --out PATH.json` and set ROOFTUNE_PROFILE=PATH.json "
                           f"(or ROOFTUNE_PROFILE=<shipped name> to use a shipped one)")
    return name
