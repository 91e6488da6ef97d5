"""Settings: built-in defaults, overridden by the user's file."""

DEFAULTS = {"theme": "light", "page_size": 25, "notify": True}


def merge(defaults, overrides):
    result = dict(defaults)
    for key, value in overrides.items():
        if key in defaults:
            result[key] = value
    return result
