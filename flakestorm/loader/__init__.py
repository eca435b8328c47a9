"""Read flakestorm.yaml: YAML with line numbers, ``${VAR}`` expansion, ConfigError with file:line.

The pipeline, each step collecting every problem it finds before the next one runs::

    text ──document──> plain data + locations + secrets (env: ${VAR})
         ──structure──> Config, or the problems of its structure
         ──meaning.check──> errors, warnings (+ legacy warnings), on every part that validated

Only this package imports ``yaml``; pydantic's ``ValidationError`` is worded by
:mod:`flakestorm.structure`. Both are translated here into
:class:`~flakestorm.errors.Problem` values that say where (line:col of the offending node),
what, and what would be valid. Whatever the input, the only exception that leaves
:func:`load_config_text` is :class:`~flakestorm.errors.ConfigError`.

Modules: ``reader`` (the entry points and LoadedConfig), ``document`` (YAML -> data with
positions), ``env`` (``${VAR}`` and secrets), ``locations`` (config path -> line:col),
``legacy`` (earlier formats, and the hints :func:`~flakestorm.structure.validate_model` gives
for them), ``profiles`` (built-in chaos profiles).
"""

from flakestorm.loader.profiles import PROFILES, load_profile, profile_text
from flakestorm.loader.reader import LoadedConfig, load_config, load_config_text

__all__ = [
    "PROFILES",
    "LoadedConfig",
    "load_config",
    "load_config_text",
    "load_profile",
    "profile_text",
]
