"""Hardware profiles: what a GPU is, as the cost model sees it."""

from rooftune.hwprofiles.profile import (
    HardwareProfile,
    ProfileError,
    fits_device,
    is_profile_of,
    list_profiles,
    load_profile,
    profile_from_dict,
    profile_to_dict,
    profiles_fitting,
    save_profile,
)

__all__ = [
    "HardwareProfile",
    "ProfileError",
    "fits_device",
    "is_profile_of",
    "list_profiles",
    "load_profile",
    "profile_from_dict",
    "profiles_fitting",
    "profile_to_dict",
    "save_profile",
]
