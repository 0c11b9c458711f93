"""The one error every config reader raises: a config.json (or safetensors index) the calculator
cannot use. Its own module so that the architecture, parameter and quantization readers share it
without importing each other."""


class ConfigError(ValueError):
    """A config.json (or safetensors index) the calculator cannot use; the message names the field."""
