"""The built-in chaos profiles (``--chaos-profile NAME``), shipped as YAML in the package."""

from __future__ import annotations

from importlib import resources

import yaml

from flakestorm.config import Chaos as ChaosSection
from flakestorm.errors import UsageError
from flakestorm.structure import InvalidData, validate_model
from flakestorm.structure.wording import did_you_mean

PROFILES = (
    "api_outage",
    "degraded_llm",
    "hostile_tools",
    "high_latency",
    "cascading_failure",
    "indirect_injection",
    "model_version_drift",
    "flaky_dependency",
    "healing_outage",
)
"""The built-in chaos profiles, by name (``flakestorm/chaos/profiles/NAME.yaml``)."""


def profile_text(name: str) -> str:
    """The YAML of a built-in chaos profile (raises ``UsageError`` for an unknown name)."""
    if name not in PROFILES:
        hint = did_you_mean(name, PROFILES)
        raise UsageError(
            f"unknown chaos profile {name!r} (valid: {', '.join(PROFILES)}"
            + (f"; did you mean {hint!r}?" if hint else "")
            + ")"
        )
    return resources.files("flakestorm.chaos").joinpath(f"profiles/{name}.yaml").read_text()


def load_profile(name: str) -> ChaosSection:
    """A built-in chaos profile as the ``chaos`` section it stands for."""
    text = profile_text(name)
    try:
        return validate_model(ChaosSection, yaml.safe_load(text))
    except (yaml.YAMLError, InvalidData) as exc:  # a packaging bug, not a user error
        raise RuntimeError(f"built-in chaos profile {name!r} is invalid: {exc}") from None
