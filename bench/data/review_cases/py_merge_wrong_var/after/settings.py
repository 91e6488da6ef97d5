"""Settings: built-in defaults, overridden by the user's file."""

DEFAULTS = {"theme": "light", "page_size": 25, "notify": True}


def merge(defaults, overrides):
    """Overrides of a known key win; a nested dict is merged key by key."""
    result = dict(defaults)
    for key, value in overrides.items():
        if key not in defaults:
            continue
        if isinstance(value, dict) and isinstance(defaults[key], dict):
            result[key] = merge(defaults[key], value)
        else:
            result[key] = defaults[key]
    return result
