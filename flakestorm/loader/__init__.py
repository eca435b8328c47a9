"""Read flakestorm.yaml: YAML with line numbers, ``${VAR}`` expansion, ConfigError with file:line.

The pipeline, each step collecting every problem it finds before the next one runs::

    text ──document──> plain data + locations + secrets (env: ${VAR})
         ──validation──> Config ──semantics.check──> errors, warnings (+ legacy warnings)

Only this package imports ``yaml`` and sees pydantic's ``ValidationError``: both are translated
here into :class:`~flakestorm.errors.Problem` values that say where (line:col of the offending
node), what, and what would be valid. Whatever the input, the only exception that leaves
:func:`load_config_text` is :class:`~flakestorm.errors.ConfigError`.

Modules: ``reader`` (the entry points and LoadedConfig), ``document`` (YAML -> data with
positions), ``env`` (``${VAR}`` and secrets), ``locations`` (config path -> line:col),
``validation`` (pydantic errors -> worded problems, for any model: :func:`validate_model`),
``error_path`` (a pydantic ``loc`` -> the document's path), ``wording`` (kinds, values, "did
you mean"), ``legacy`` (earlier formats), ``profiles`` (built-in chaos profiles).
"""

from flakestorm.loader.profiles import PROFILES, load_profile, profile_text
from flakestorm.loader.reader import LoadedConfig, load_config, load_config_text
from flakestorm.loader.validation import FieldProblem, InvalidData, validate_model

__all__ = [
    "PROFILES",
    "FieldProblem",
    "InvalidData",
    "LoadedConfig",
    "load_config",
    "load_config_text",
    "load_profile",
    "profile_text",
    "validate_model",
]
