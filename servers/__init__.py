"""The engines the rig starts, as Compose services, and their settings translation.

    from servers import translate, validate, SETTINGS
    translate("vllm", {"SPECULATE": "2"})   # the engine's argv
"""

from servers.registry import ENGINES, from_env, translate, validate
from servers.settings import SETTINGS, SettingError

__all__ = ["ENGINES", "SETTINGS", "SettingError", "from_env", "translate", "validate"]
